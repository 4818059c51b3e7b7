/*
 * segstore_rocketmq._speedups: the RocketMQ plugin's C accelerator, one translation unit of one file
 * per concern, each with a pure-Python reference it is tested equal to:
 *
 *   _speedups_encode.c   encode_plain: the batch append of plain messages (fastappend.py)
 *   _speedups_index.c    index_put: IndexFile entries put as the broker's putKey does (keyhash.py);
 *                        index_chains: the slots and links verify expects of them;
 *                        index_run_confirmed: a run of entries against a walk's messages; index_key_runs:
 *                        the runs of one message's entries holding a hash twice
 *   _speedups_single.c   Appender: the single and batch append in one call (fastappend.appender)
 *   _speedups_decode.c   the columnar decode of a mapped commitlog region (columnar.py)
 *   _speedups_json.c     json_lines: the lines of dump --json (columnar.py)
 *   _speedups_text.c     text_lines: the message lines of the text dump (columnar.py)
 *   _speedups_restore.c  a conversion's columns back into messages (arrowwrite.py, conversion.py)
 *   _speedups_arrow.c    export_arrays: a batch's columns handed to Arrow in one call (columnar.py)
 *
 * This file holds what they share (the message layout below, constants, the append's parse
 * types and helpers), init(AppendResult) (the result dataclass the appends build, and where its
 * slots live) and the module.  setup.py builds this file only; its SOURCE_HASH covers the
 * included files too (segstore.speedups.source_files).
 *
 * One stored message (message.HEADER_FIELDS in message.py is the one description;
 * CommitLog.calMsgLength; big-endian):
 *
 *     TOTALSIZE i4, MAGICCODE i4, BODYCRC i4, QUEUEID i4, FLAG i4, QUEUEOFFSET i8,
 *     PHYSICALOFFSET i8, SYSFLAG i4, BORNTIMESTAMP i8, BORNHOST 4|16 + i4,
 *     STORETIMESTAMP i8, STOREHOST 4|16 + i4, RECONSUMETIMES i4,
 *     PREPAREDTRANSACTIONOFFSET i8, BODYLENGTH i4 + BODY, TOPICLENGTH i1 + TOPIC,
 *     PROPERTIESLENGTH i2 + PROPERTIES
 *
 * The functions run no Python code of the caller's (only exact dicts, lists,
 * tuples, str, bytes, int and buffers are accepted; an Appender reads and sets the
 * attributes of the store's own objects) and keep no state besides the class set once
 * by init(); they are safe from any thread.  The appends hold the GIL throughout; the
 * columnar decode loops release it while they walk.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>

#include "speedups_common.h"
#include <zlib.h>

#define MESSAGE_MAGIC ((int32_t)0xDAA320A7)
#define BLANK_MAGIC ((int32_t)0xCBD43194)
#define BODY_CRC_MASK 0x7FFFFFFFu
#define SYSFLAG_BORNHOST_V6 0x10
#define SYSFLAG_STOREHOST_V6 0x20
#define IPV4_LEN 4
#define IPV6_LEN 16
/* The header from TOTALSIZE to BODYLENGTH with IPv4 hosts; each IPv6 host adds 12 bytes. */
#define HEADER_V4 88
#define END_FILE_MIN_BLANK_LENGTH 8
#define TOPIC_LENGTH_SIZE 1
#define PROPERTIES_LENGTH_SIZE 2
#define MAX_PROPERTIES_BYTES 0x7FFF
#define NAME_VALUE_SEPARATOR '\x01'
#define PROPERTY_SEPARATOR '\x02'
#define KEY_SEPARATOR ' '
#define TOPIC_KEY_SEPARATOR '#'
/* "TAGS" and "KEYS" */
#define PROPERTY_NAME_LEN 4
/* A consume-queue entry: offset i8, size i4, tags code i8. */
#define CQ_ROW_SIZE 20
/* msgId: uppercase hex of store IP, int port, long physical offset. */
#define MSG_ID_PORT_BYTES 4
#define MSG_ID_OFFSET_BYTES 8

enum { R_TOPIC, R_PARTITION, R_OFFSET, R_POSITION, R_SIZE, R_EXTRA, N_RESULT_FIELDS };
static const char *const RESULT_FIELDS[N_RESULT_FIELDS] = {
    "topic", "partition", "offset", "position", "size", "extra",
};
static PyTypeObject *result_type = NULL;
static Py_ssize_t result_offset[N_RESULT_FIELDS];

/* The fields an append dict may carry on this path, in the order of the strings below. */
enum { F_TOPIC, F_QUEUE_ID, F_BODY, F_TAGS, F_KEYS, F_BORN_TIMESTAMP, F_STORE_TIMESTAMP, F_FLAG, F_PROPERTIES,
       N_FIELDS };
static const char *const FIELD_NAMES[N_FIELDS] = {
    "topic", "queue_id", "body", "tags", "keys", "born_timestamp", "store_timestamp", "flag", "properties",
};
static PyObject *field_str[N_FIELDS];
static PyObject *str_msg_id, *str_store_timestamp, *long_zero;

typedef struct {
    PyObject *topic;       /* borrowed from the item */
    PyObject *queue_id;    /* borrowed (or long_zero) */
    PyObject *topic_field; /* borrowed from topic_fields */
    const char *body;
    Py_ssize_t body_len;
    PyObject *tags;        /* borrowed, NULL: no TAGS */
    const char *tags_utf8;
    Py_ssize_t tags_len;
    PyObject *keys;        /* borrowed: a str, list or tuple; NULL: no KEYS */
    Py_ssize_t keys_len;   /* UTF-8 bytes of the joined KEYS value */
    int64_t born_ts, store_ts;
    int32_t flag, queue_id_value;
    Py_ssize_t size, props_len, slot;
    int64_t phys, queue_offset;    /* where the single and batch append (Appender) place it */
    int trailing;          /* the properties end with PROPERTY_SEPARATOR (counted in props_len) */
} Msg;

/* ------------------------------------------------------------------------------ */
/* helpers */

static inline uint8_t *
put_i16(uint8_t *p, int32_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
    return p + 2;
}

static inline uint8_t *
put_i32(uint8_t *p, int32_t v)
{
    uint32_t u = (uint32_t)v;
    p[0] = (uint8_t)(u >> 24);
    p[1] = (uint8_t)(u >> 16);
    p[2] = (uint8_t)(u >> 8);
    p[3] = (uint8_t)u;
    return p + 4;
}

static inline uint8_t *
put_i64(uint8_t *p, int64_t v)
{
    uint64_t u = (uint64_t)v;
    for (int i = 7; i >= 0; i--) {
        p[i] = (uint8_t)u;
        u >>= 8;
    }
    return p + 8;
}

static inline uint8_t *
put_bytes(uint8_t *p, const void *src, Py_ssize_t n)
{
    if (n > 0) {
        memcpy(p, src, (size_t)n);
    }
    return p + n;
}

/* Java String.hashCode continued from h over the UTF-16 code units of s. */
static uint32_t
java_hash(uint32_t h, PyObject *s, Py_ssize_t from, Py_ssize_t to)
{
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    if (kind == PyUnicode_1BYTE_KIND) {     /* Latin-1 (tags, keys, topics mostly): one code unit each */
        const Py_UCS1 *p = data;
        for (Py_ssize_t i = from; i < to; i++) {
            h = h * 31u + p[i];
        }
        return h;
    }
    for (Py_ssize_t i = from; i < to; i++) {
        Py_UCS4 ch = PyUnicode_READ(kind, data, i);
        if (ch > 0xFFFF) {
            ch -= 0x10000;
            h = h * 31u + (0xD800u + (ch >> 10));
            h = h * 31u + (0xDC00u + (ch & 0x3FF));
        } else {
            h = h * 31u + ch;
        }
    }
    return h;
}

/* The broker's index hash: abs(signed hash), Integer.MIN_VALUE -> 0. */
static inline int64_t
index_hash(uint32_t h)
{
    int32_t s = (int32_t)h;
    return s == INT32_MIN ? 0 : (s < 0 ? -(int64_t)s : (int64_t)s);
}

/* UTF-8 of an exact str without the property separators; 0 ok, 1 not plain, -1 error. */
static int
plain_text(PyObject *s, const char **utf8, Py_ssize_t *len)
{
    if (!PyUnicode_CheckExact(s)) {
        return 1;
    }
    *utf8 = PyUnicode_AsUTF8AndSize(s, len);
    if (*utf8 == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) {
            return -1;
        }
        PyErr_Clear(); /* a lone surrogate: the general path encodes it with surrogatepass */
        return 1;
    }
    if (memchr(*utf8, NAME_VALUE_SEPARATOR, (size_t)*len) || memchr(*utf8, PROPERTY_SEPARATOR, (size_t)*len)) {
        return 1; /* the general path raises InvalidMessageError */
    }
    return 0;
}

/* An exact int (or None -> dflt) within [lo, hi]; 0 ok, 1 not plain, -1 error. */
static int
plain_int(PyObject *v, int64_t dflt, int64_t lo, int64_t hi, int64_t *out)
{
    if (v == NULL || v == Py_None) {
        *out = dflt;
        return 0;
    }
    if (!PyLong_CheckExact(v)) {
        return 1;
    }
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (x == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (overflow || x < lo || x > hi) {
        return 1;
    }
    *out = x;
    return 0;
}

static int
field_index(PyObject *key)
{
    for (int f = 0; f < N_FIELDS; f++) {
        if (key == field_str[f]) {
            return f;
        }
    }
    if (!PyUnicode_CheckExact(key)) {
        return -1;
    }
    for (int f = 0; f < N_FIELDS; f++) {
        if (PyUnicode_Compare(key, field_str[f]) == 0) {
            return f;
        }
    }
    return -1;
}

/* The KEYS value of m: its UTF-8 length into m->keys_len; 0 ok, 1 not plain, -1 error. */
static int
plain_keys(PyObject *keys, Msg *m)
{
    m->keys = NULL;
    m->keys_len = 0;
    if (keys == NULL || keys == Py_None) {
        return 0;
    }
    const char *utf8;
    Py_ssize_t len;
    if (PyUnicode_CheckExact(keys)) {
        if (PyUnicode_GET_LENGTH(keys) == 0) {
            return 0; /* falsy: no KEYS */
        }
        int rc = plain_text(keys, &utf8, &len);
        if (rc) {
            return rc;
        }
        m->keys = keys;
        m->keys_len = len;
        return 0;
    }
    if (!PyList_CheckExact(keys) && !PyTuple_CheckExact(keys)) {
        return 1;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(keys);
    if (n == 0) {
        return 0;
    }
    PyObject **items = PySequence_Fast_ITEMS(keys);
    Py_ssize_t total = n - 1; /* separators */
    for (Py_ssize_t i = 0; i < n; i++) {
        int rc = plain_text(items[i], &utf8, &len);
        if (rc) {
            return rc;
        }
        total += len;
    }
    if (total == 0) {
        return 0; /* [""]: the empty KEYS the broker drops (4.9.7 MessageDecoder.string2messageProperties) */
    }
    m->keys = keys;
    m->keys_len = total;
    return 0;
}

/* Writes the joined KEYS value of m at p. */
static uint8_t *
put_keys(uint8_t *p, const Msg *m)
{
    Py_ssize_t len;
    if (PyUnicode_CheckExact(m->keys)) {
        return put_bytes(p, PyUnicode_AsUTF8AndSize(m->keys, &len), m->keys_len);
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(m->keys);
    PyObject **items = PySequence_Fast_ITEMS(m->keys);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (i) {
            *p++ = KEY_SEPARATOR;
        }
        const char *utf8 = PyUnicode_AsUTF8AndSize(items[i], &len); /* cached by plain_keys */
        p = put_bytes(p, utf8, len);
    }
    return p;
}

/* Index entries being written: three parallel columns. */
typedef struct {
    int64_t *hashes, *phys, *stamps;
    Py_ssize_t n;
} IndexOut;

/* An entry for every non-empty space-separated token of s, hashed as topic#token (prefix: topic#). */
static void
index_string(IndexOut *out, uint32_t prefix, PyObject *s, int64_t phys, int64_t stamp)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    Py_ssize_t from = 0;
    if (kind == PyUnicode_1BYTE_KIND) {     /* the tokens' hashes made as they are walked */
        const Py_UCS1 *p = data;
        uint32_t h = prefix;
        for (Py_ssize_t i = 0; i <= n; i++) {
            if (i == n || p[i] == KEY_SEPARATOR) {
                if (i > from) {
                    out->hashes[out->n] = index_hash(h);
                    out->phys[out->n] = phys;
                    out->stamps[out->n] = stamp;
                    out->n++;
                }
                from = i + 1;
                h = prefix;
            } else {
                h = h * 31u + p[i];
            }
        }
        return;
    }
    for (Py_ssize_t i = 0; i <= n; i++) {
        if (i == n || PyUnicode_READ(kind, data, i) == KEY_SEPARATOR) {
            if (i > from) {
                out->hashes[out->n] = index_hash(java_hash(prefix, s, from, i));
                out->phys[out->n] = phys;
                out->stamps[out->n] = stamp;
                out->n++;
            }
            from = i + 1;
        }
    }
}

/* Non-empty space-separated tokens of s. */
static Py_ssize_t
count_tokens(PyObject *s)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(s), count = 0;
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    int in_token = 0;
    if (kind == PyUnicode_1BYTE_KIND) {
        const Py_UCS1 *p = data;
        for (Py_ssize_t i = 0; i < n; i++) {
            int sep = p[i] == KEY_SEPARATOR;
            count += !sep && !in_token;
            in_token = !sep;
        }
        return count;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        int sep = PyUnicode_READ(kind, data, i) == KEY_SEPARATOR;
        if (!sep && !in_token) {
            count++;
        }
        in_token = !sep;
    }
    return count;
}

/* Index entries of m: the tokens of its joined KEYS value (a token never spans two keys). */
static Py_ssize_t
index_tokens(const Msg *m)
{
    if (m->keys == NULL) {
        return 0;
    }
    if (PyUnicode_CheckExact(m->keys)) {
        return count_tokens(m->keys);
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(m->keys), count = 0;
    PyObject **items = PySequence_Fast_ITEMS(m->keys);
    for (Py_ssize_t i = 0; i < n; i++) {
        count += count_tokens(items[i]);
    }
    return count;
}

/*
 * zlib's CRC-32 (IEEE 802.3, reflected) of a message body (the append's BODYCRC, the decode's check): with PCLMULQDQ where the CPU has it
 * (folding 16 bytes at a time, then a Barrett reduction: Intel's "Fast CRC Computation for Generic
 * Polynomials Using PCLMULQDQ"; a length not a multiple of 16 padded before its first byte), other CPUs
 * through zlib.
 */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_CLMUL_CRC 1

#define CLMUL_TARGET __attribute__((target("pclmul,ssse3,sse4.1")))

/*
 * A body whose length is not a multiple of 16 is folded as if z = 16 - len % 16 zero bytes came before
 * it, from the register that those z zero bytes take to the CRC's initial ~0 (crc_pad_init[z]): the
 * same CRC, each fold a whole 16 bytes, and no byte tail after the folds (a 100-byte body's 4 tail bytes
 * took 27 instructions through tables after them; the padded first block takes one shuffle and one
 * more fold).  Its first block is its first 16 - z bytes moved up by z (crc_pad_shuffle[z], pshufb).
 * Filled once by crc_pad_tables_init at module init (under the GIL), read-only after.
 */
static uint32_t crc_pad_init[16];
static uint8_t crc_pad_shuffle[16][16];

static void
crc_pad_tables_init(void)
{
    const z_crc_t *table = get_crc_table();
    uint32_t reg = 0xFFFFFFFFu;
    for (int z = 0; z < 16; z++) {
        crc_pad_init[z] = reg;
        /* one zero byte back: the step reg' = table[reg & 0xFF] ^ (reg >> 8) undone (the table's top
         * bytes are distinct, so reg' >> 24 names reg & 0xFF) */
        for (uint32_t b = 0; b < 256; b++) {
            if (((uint32_t)table[b] >> 24) == (reg >> 24)) {
                reg = ((reg ^ (uint32_t)table[b]) << 8) | b;
                break;
            }
        }
        for (int j = 0; j < 16; j++) {
            crc_pad_shuffle[z][j] = j >= z ? (uint8_t)(j - z) : 0x80;      /* 0x80: a zero byte */
        }
    }
}

/* The fold constants: x^(128+32) mod P and x^(128-32) mod P (bit-reflected). */
CLMUL_TARGET static inline __m128i
clmul_k3k4(void)
{
    return _mm_set_epi64x(0x00ccaa009eLL, 0x01751997d0LL);
}

/* The first block of a buffer of len >= 16 bytes, padded (see crc_pad_init), the CRC's initial
 * register xored in; *rest: where its whole blocks after that one start (buf + len - *rest a
 * multiple of 16). */
CLMUL_TARGET static inline __m128i
clmul_start(const uint8_t *buf, size_t len, const uint8_t **rest)
{
    size_t z = (16 - (len & 15)) & 15;
    __m128i first = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)buf),
                                     _mm_loadu_si128((const __m128i *)crc_pad_shuffle[z]));
    *rest = buf + 16 - z;
    return _mm_xor_si128(first, _mm_cvtsi32_si128((int)crc_pad_init[z]));
}

/* x folded over the next 16 bytes at buf. */
CLMUL_TARGET static inline __m128i
clmul_fold(__m128i x, __m128i k3k4, const uint8_t *buf)
{
    __m128i lo = _mm_clmulepi64_si128(x, k3k4, 0x00);
    x = _mm_clmulepi64_si128(x, k3k4, 0x11);
    return _mm_xor_si128(_mm_xor_si128(x, lo), _mm_loadu_si128((const __m128i *)buf));
}

/* The CRC of a buffer whose folded state is x1 at its end (a Barrett reduction). */
CLMUL_TARGET static inline uint32_t
clmul_finish(__m128i x1)
{
    /* x^64 mod P, P and floor(x^64 / P) */
    const __m128i k3k4 = clmul_k3k4();
    const __m128i k5 = _mm_set_epi64x(0, 0x0163cd6124LL);
    const __m128i poly = _mm_set_epi64x(0x01f7011641LL, 0x01db710641LL);
    const __m128i low32 = _mm_setr_epi32(~0, 0, ~0, 0);
    __m128i x2 = _mm_clmulepi64_si128(x1, k3k4, 0x10);
    x1 = _mm_xor_si128(_mm_srli_si128(x1, 8), x2);
    x2 = _mm_srli_si128(x1, 4);
    x1 = _mm_xor_si128(_mm_clmulepi64_si128(_mm_and_si128(x1, low32), k5, 0x00), x2);
    x2 = _mm_clmulepi64_si128(_mm_and_si128(x1, low32), poly, 0x10);
    x2 = _mm_clmulepi64_si128(_mm_and_si128(x2, low32), poly, 0x00);
    x1 = _mm_xor_si128(x1, x2);
    return ~(uint32_t)_mm_extract_epi32(x1, 1);
}

CLMUL_TARGET static uint32_t
crc32_clmul(const uint8_t *buf, size_t len)
{
    const __m128i k3k4 = clmul_k3k4();
    const uint8_t *at, *end = buf + len;
    __m128i x = clmul_start(buf, len, &at);
    for (; at < end; at += 16) {
        x = clmul_fold(x, k3k4, at);
    }
    return clmul_finish(x);
}

/*
 * The CRCs of four buffers of at least 16 bytes each into out: their folds interleaved while all
 * four have 16 bytes left.  A fold waits for the one before it (the multiply's latency), so one
 * short body at a time keeps the multiplier mostly idle; four chains keep it busy.
 */
CLMUL_TARGET static inline __attribute__((always_inline)) void
crc32_clmul_4(const uint8_t *const buf[4], const size_t len[4], uint32_t out[4])
{
    const __m128i k3k4 = clmul_k3k4();
    const uint8_t *at[4];
    __m128i x[4];
    if (len[0] == len[1] && len[0] == len[2] && len[0] == len[3]) {     /* the usual: bodies of one size */
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            x[k] = clmul_start(buf[k], len[k], &at[k]);
        }
        for (const uint8_t *end = buf[0] + len[0]; at[0] < end; at[0] += 16, at[1] += 16, at[2] += 16, at[3] += 16) {
            x[0] = clmul_fold(x[0], k3k4, at[0]);
            x[1] = clmul_fold(x[1], k3k4, at[1]);
            x[2] = clmul_fold(x[2], k3k4, at[2]);
            x[3] = clmul_fold(x[3], k3k4, at[3]);
        }
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            out[k] = clmul_finish(x[k]);
        }
        return;
    }
    size_t left[4], common = SIZE_MAX;
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) {
        x[k] = clmul_start(buf[k], len[k], &at[k]);
        left[k] = (size_t)(buf[k] + len[k] - at[k]);
        common = left[k] < common ? left[k] : common;
    }
    size_t done = 0;
    for (; done < common; done += 16) {
        x[0] = clmul_fold(x[0], k3k4, at[0] + done);
        x[1] = clmul_fold(x[1], k3k4, at[1] + done);
        x[2] = clmul_fold(x[2], k3k4, at[2] + done);
        x[3] = clmul_fold(x[3], k3k4, at[3] + done);
    }
    for (int k = 0; k < 4; k++) {
        for (size_t more = done; more < left[k]; more += 16) {
            x[k] = clmul_fold(x[k], k3k4, at[k] + more);
        }
        out[k] = clmul_finish(x[k]);
    }
}
#endif

/* Whether this CPU runs crc32_clmul (PCLMULQDQ and SSE4.1). */
static int
clmul_usable(void)
{
#ifdef HAVE_CLMUL_CRC
    static int has_clmul = -1;
    if (has_clmul < 0) {
        __builtin_cpu_init();
        has_clmul = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
    }
    return has_clmul;
#else
    return 0;
#endif
}

static uint32_t
body_crc32(const uint8_t *buf, size_t len)
{
#ifdef HAVE_CLMUL_CRC
    if (clmul_usable() && len >= 16 && len <= UINT32_MAX) {
        return crc32_clmul(buf, len);
    }
#endif
    uint32_t crc = (uint32_t)crc32(0L, Z_NULL, 0);
    while (len > 0) {  /* zlib takes uInt lengths */
        uInt chunk = len > (size_t)UINT32_MAX ? UINT32_MAX : (uInt)len;
        crc = (uint32_t)crc32(crc, buf, chunk);
        buf += chunk;
        len -= chunk;
    }
    return crc;
}

static PyObject *
msg_id(const uint8_t *ip, Py_ssize_t ip_len, int32_t port, int64_t phys)
{
    static const char HEX[] = "0123456789ABCDEF";
    uint8_t raw[IPV6_LEN + MSG_ID_PORT_BYTES + MSG_ID_OFFSET_BYTES];
    uint8_t *p = put_bytes(raw, ip, ip_len);
    p = put_i32(p, port);
    p = put_i64(p, phys);
    Py_ssize_t n = p - raw;
    PyObject *s = PyUnicode_New(2 * n, 127);
    if (s == NULL) {
        return NULL;
    }
    Py_UCS1 *out = PyUnicode_1BYTE_DATA(s);
    for (Py_ssize_t i = 0; i < n; i++) {
        out[2 * i] = (Py_UCS1)HEX[raw[i] >> 4];
        out[2 * i + 1] = (Py_UCS1)HEX[raw[i] & 0xF];
    }
    return s;
}

static PyObject *
make_result(PyObject *topic, PyObject *queue_id, int64_t queue_offset, int64_t phys, Py_ssize_t size,
            PyObject *id, PyObject *stamp)
{
    PyObject *extra = PyDict_New();
    if (extra == NULL || PyDict_SetItem(extra, str_msg_id, id) < 0 ||
        PyDict_SetItem(extra, str_store_timestamp, stamp) < 0) {
        Py_XDECREF(extra);
        return NULL;
    }
    PyObject *values[N_RESULT_FIELDS] = {
        topic, queue_id, PyLong_FromLongLong(queue_offset), PyLong_FromLongLong(phys),
        PyLong_FromSsize_t(size), extra,
    };
    Py_INCREF(topic);
    Py_INCREF(queue_id);
    PyObject *obj = NULL;
    if (values[R_OFFSET] && values[R_POSITION] && values[R_SIZE]) {
        obj = result_type->tp_alloc(result_type, 0);
    }
    if (obj == NULL) {
        for (int i = 0; i < N_RESULT_FIELDS; i++) {
            Py_XDECREF(values[i]);
        }
        return NULL;
    }
    for (int i = 0; i < N_RESULT_FIELDS; i++) {
        *(PyObject **)((char *)obj + result_offset[i]) = values[i]; /* steals the reference */
    }
    /* A result refers to a str, ints and its own extra dict of a str and an int, none of which can
     * refer back to it: it is never part of a cycle, so the collector need not visit it (as CPython
     * untracks tuples and dicts of atomic values, and as the Kafka plugin's results are).  Tracked,
     * every live result was walked at each collection, and each append's result made the next
     * full collection nearer. */
    PyObject_GC_UnTrack(obj);
    return obj;
}

/* ------------------------------------------------------------------------------ */
/* the functions, one file per concern, in the order their dependencies need */

#include "_speedups_encode.c"
#include "_speedups_index.c"
#include "_speedups_single.c"
#include "_speedups_decode.c"
#include "_speedups_json.c"
#include "_speedups_text.c"
#include "_speedups_restore.c"
#include "_speedups_arrow.c"

/* ------------------------------------------------------------------------------ */
/* init */

static PyObject *
init(PyObject *module, PyObject *cls)
{
    Py_ssize_t offsets[N_RESULT_FIELDS];
    if (slot_offsets(cls, RESULT_FIELDS, N_RESULT_FIELDS, offsets) < 0) {
        return NULL;
    }
    memcpy(result_offset, offsets, sizeof(offsets));
    Py_INCREF(cls);
    Py_XSETREF(result_type, (PyTypeObject *)cls);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"init", init, METH_O, "init(AppendResult): the slots dataclass encode_plain builds."},
    {"encode_plain", (PyCFunction)(void (*)(void))encode_plain, METH_FASTCALL,
     "encode_plain(items, topic_fields, next_offsets, keys_first, store_ts, store_ip, store_port, start, "
     "file_size, limit, with_index, dest[, trailing[, dest_start]]) -> None | str | (data, blanks, results, "
     "cq_rows, queues, index, end)"},
    {"index_put", (PyCFunction)(void (*)(void))index_put, METH_FASTCALL,
     "index_put(head, slots, entries, slot_num, header, hashes, phys, stamps) -> (header, count)"},
    {"index_run_confirmed", index_run_confirmed, METH_VARARGS,
     "index_run_confirmed(entries, lo, key_hashes, key_offsets, phy) -> bool: a run of entries in put order"},
    {"index_key_runs", index_key_runs, METH_VARARGS,
     "index_key_runs(entries, carry_phy, carry, chunk) -> (segments, tail_start) | None: runs holding a hash twice"},
    {"index_chains", index_chains, METH_VARARGS,
     "index_chains(entries, slots, index_count) -> (negative, wrong links, first, expected, wrong slots, first, "
     "expected): the IndexFile chains as verify checks them"},
    {"decode_region", decode_region, METH_VARARGS,
     "decode_region(view, pos, stop, limit, base, i8, i4, u8, strict) -> (n, pos, status, blank_size)"},
    {"decode_region_indexed", decode_region_indexed, METH_VARARGS,
     "decode_region_indexed(view, pos, stop, limit, base, i8, i4, u8, strict, counts, hashes, tags, topics, "
     "firsts) -> (n, pos, status, blank_size, total, k)"},
    {"decode_at", decode_at, METH_VARARGS, "decode_at(view, positions, limit, base, i8, i4, u8, strict) -> n"},
    {"gather", gather, METH_VARARGS, "gather(view, starts, lengths, offsets, out): the slices one after another."},
    {"encode_restored", encode_restored, METH_VARARGS,
     "encode_restored(ints, born_ip, store_ip, body, body_starts, body_lengths, topic_fields, topic_at, topic_code, "
     "props, prop_starts, prop_lengths, out, topic_pos, props_pos) -> bytes written: v1 messages from columns."},
    {"gather_columns", gather_columns, METH_VARARGS,
     "gather_columns(view, rows, chunk, specs): several gathers, a chunk of rows at a time through all."},
    {"split_properties", split_properties, METH_VARARGS,
     "split_properties(view, starts, lengths, item_offsets, names, name_lens, values, value_lens, tags, "
     "tags_lens, token_offsets, tokens, token_lens) -> (items, tokens)"},
    {"property_columns", property_columns, METH_VARARGS,
     "property_columns(view, starts, lengths, item_offsets, names, name_data, values, value_data, tags, tag_data, "
     "tag_valid, token_offsets, tokens, token_data, keys, key_data, key_valid[, items_and_tags]) -> (items, tokens, "
     "tag_nulls, "
     "key_nulls)"},
    {"tags_hashes", tags_hashes, METH_VARARGS, "tags_hashes(view, props_pos, props_len, out): TAGS hashes."},
    {"put_be64", put_be64, METH_VARARGS, "put_be64(view, positions, values): int64s written big-endian."},
    {"index_entries", index_entries, METH_VARARGS,
     "index_entries(view, topic_pos, topic_len, props_pos, props_len, sys_flag, counts, hashes, tags) -> total"},
    {"topic_codes", topic_codes, METH_VARARGS,
     "topic_codes(view, topic_pos, topic_len, codes) -> first rows: the rows' topics numbered by first appearance"},
    {"next_boundary", next_boundary, METH_VARARGS,
     "next_boundary(view, pos, limit, base) -> int: the first plausible message header in [pos, limit), or limit"},
    {"merge_order", merge_order, METH_VARARGS,
     "merge_order(positions, bounds, order[, sizes, phys, sorted_sizes]) -> bool: the stable sorting order "
     "of ascending ranges, merged (with the positions and sizes in that order)"},
    {"queue_run_confirmed", queue_run_confirmed, METH_VARARGS,
     "queue_run_confirmed(entries, rows, phy, size, tags_code, ext_max_addr) -> bool: entries exactly those rows'"},
    {"match_entries", match_entries, METH_VARARGS,
     "match_entries(view, position, size, queue_id, queue_offset, topic_pos, topic_len, phys, order, sizes, "
     "bounds, part_slots, part_firsts, first, last, queue_ids, topic_offsets, topic_data, met, hits) -> "
     "(count, wrong, identity)"},
    {"claim_entries", claim_entries, METH_VARARGS,
     "claim_entries(view, position, size, queue_id, queue_offset, topic_pos, topic_len, positions, sizes, bounds, "
     "part_slots, part_firsts, queue_ids, topic_offsets, topic_data, cursors, met, hits) -> (count, passed, "
     "identity)"},
    {"text_lines", text_lines, METH_VARARGS,
     "text_lines(view, i8, i4, u8, n, tags, tags_lens, token_offsets, tokens, token_lens, out) -> n"},
    {"json_lines", json_lines, METH_VARARGS,
     "json_lines(view, i8, i4, u8, n, tags_codes, ..., out) -> bytes written, or -(bytes needed)"},
    {"header_lists", header_lists, METH_VARARGS,
     "header_lists(n, slots, props) -> the five buffers of a list<struct<key, value>> column"},
    {"format_hosts", format_hosts, METH_VARARGS, "format_hosts(i8, i4, u8, n, which, offsets, out) -> bytes used"},
    {"export_arrays", export_arrays, METH_O,
     "export_arrays(spec) -> address of an ArrowArray over the spec's buffers (see _speedups_arrow.c)."},
    {"release_arrays", release_arrays, METH_O, "release_arrays(address): free what export_arrays returned."},
    {"first_headers", first_headers, METH_VARARGS,
     "first_headers(rows, key_offsets, keys, value_offsets, values, valid, name, marked, numbers) -> "
     "rows whose value is not a plain decimal"},
    {"restore_headers", restore_headers, METH_VARARGS,
     "restore_headers(item_offsets, key_offsets, keys, value_offsets, values, value_valid, names, prefix, "
     "trailing_text, ints, ips, ports, trailing, places, prop_offsets, prop_data) -> (status, prop_bytes, "
     "topic_repeated, queue_repeated)"},
    {"join_properties", join_properties, METH_VARARGS,
     "join_properties(list_offsets, name_offsets, names, value_offsets, values, trailing, limit) -> "
     "(data, offsets) | None: a map column's rows as stored properties."},
    {"native_properties", native_properties, METH_VARARGS,
     "native_properties(offsets, key_offsets, key_data, key_valid, null_value, log_append, item_rows, hk_offsets, "
     "hk_data, hv_offsets, hv_data, hv_valid, txn, control, producers, names, orders, log_append_text, trailing, "
     "prop_offsets, prop_data) -> (status, used)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "segstore_rocketmq._speedups",
    "The RocketMQ batch append and IndexFile put (see fastappend.py and indexfile.py for the references).", -1, methods,
};

#ifndef SEGSTORE_SOURCE_HASH
#define SEGSTORE_SOURCE_HASH ""    /* built without setup.py: not checked */
#endif

PyMODINIT_FUNC
PyInit__speedups(void)
{
#ifdef HAVE_CLMUL_CRC
    crc_pad_tables_init();
#endif
    for (int f = 0; f < N_FIELDS; f++) {
        field_str[f] = PyUnicode_InternFromString(FIELD_NAMES[f]);
        if (field_str[f] == NULL) {
            return NULL;
        }
    }
    str_msg_id = PyUnicode_InternFromString("msg_id");
    str_store_timestamp = PyUnicode_InternFromString("store_timestamp");
    long_zero = PyLong_FromLong(0);
    if (!str_msg_id || !str_store_timestamp || !long_zero) {
        return NULL;
    }
    for (int i = 0; i < N_STR; i++) {
        str_[i] = PyUnicode_InternFromString(STR_NAMES[i]);
        if (str_[i] == NULL) {
            return NULL;
        }
    }
    if (PyType_Ready(&AppenderType) < 0) {
        return NULL;
    }
    PyObject *module = PyModule_Create(&module_def);
    if (module != NULL && PyModule_AddObjectRef(module, "Appender", (PyObject *)&AppenderType) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    /* the hash of the source this was built from (setup.py): segstore.speedups refuses a stale build */
    if (module != NULL && PyModule_AddStringConstant(module, "SOURCE_HASH", SEGSTORE_SOURCE_HASH) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
