/*
 * segstore_rocketmq._speedups: the RocketMQ append of a batch of plain messages, in one call.
 *
 * encode_plain(items, topic_fields, next_offsets, keys_first, store_ts, store_ip, store_port,
 *              start, file_size, limit, with_index, dest[, trailing[, dest_start]])
 *     dest: None or a writable buffer whose byte dest_start is physical offset start (a mapped
 *     commitlog file: its unwritten rest is where an in-place batch goes)
 *     trailing: end the properties with 0x02 (brokers up to 4.9.0 and from 5.2.0;
 *     MessageDecoder.messageProperties2String of that version)
 *     -> None | str | (data, blanks, results, cq_rows, queues, index_arrays, end)
 * index_put(head, slots, entries, slot_num, header, hashes, phys, stamps) -> (header, count)
 *     put IndexFile entries one after another exactly as the broker's putKey does.
 * init(AppendResult): remember the result dataclass (slots) and where its slots live.
 * decode_region / decode_at / gather / gather_columns / split_properties / format_hosts / tags_hashes /
 * index_entries / json_lines: the columnar decode of a mapped commitlog region (columnar.py
 *     holds the pure-Python reference).
 *
 * This mirrors encode_plain_py in fastappend.py exactly (same return values, same
 * bytes; tests/test_rocketmq_speedups.py checks it against that reference and the
 * reference encoder message.encode, BLANKs included); see there for what "plain"
 * means and what each returned part holds.  Nothing passed in is changed
 * (next_offsets is only read; bytes may be written into dest past the data end):
 * a batch that is not plain returns None (the caller takes its general path,
 * which raises the typed errors), an unknown topic returns that topic (the caller
 * validates it and calls again).
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
 * tuples, str, bytes, int and buffers are accepted) and keep no state besides the
 * class set once by init(); they are safe from any thread.  The append holds the
 * GIL throughout; the columnar decode loops release it while they walk.
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
    return obj;
}

/* ------------------------------------------------------------------------------ */
/* pass 1: check every item and size it */

/* 0 plain, 1 not plain, 2 unknown topic (m->topic), -1 error. */
static int
parse_item(PyObject *item, PyObject *topic_fields, int64_t store_ts, Py_ssize_t header_size,
           Py_ssize_t limit, int trailing, Msg *m)
{
    if (!PyDict_CheckExact(item)) {
        return 1;
    }
    PyObject *v[N_FIELDS] = {NULL};
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(item, &pos, &key, &value)) {
        int f = field_index(key);
        if (f < 0) {
            return 1;
        }
        v[f] = value;
    }
    if (v[F_PROPERTIES] != NULL && v[F_PROPERTIES] != Py_None &&
        !(PyDict_CheckExact(v[F_PROPERTIES]) && PyDict_GET_SIZE(v[F_PROPERTIES]) == 0)) {
        return 1;
    }
    if (v[F_TOPIC] == NULL || !PyUnicode_CheckExact(v[F_TOPIC])) {
        return 1;
    }
    m->topic = v[F_TOPIC];
    m->topic_field = PyDict_GetItemWithError(topic_fields, m->topic);
    if (m->topic_field == NULL) {
        return PyErr_Occurred() ? -1 : 2;
    }
    if (!PyBytes_CheckExact(m->topic_field)) {
        PyErr_SetString(PyExc_TypeError, "topic_fields values must be bytes");
        return -1;
    }
    int64_t x;
    int rc;
    PyObject *qid = v[F_QUEUE_ID];
    if (qid == NULL || qid == Py_None) {
        qid = long_zero; /* `queue_id or 0` */
    }
    if ((rc = plain_int(qid, 0, 0, INT32_MAX, &x))) {
        return rc;
    }
    m->queue_id = qid;
    m->queue_id_value = (int32_t)x;
    PyObject *body = v[F_BODY];
    if (body == NULL || body == Py_None) {
        m->body = "";
        m->body_len = 0;
    } else if (PyBytes_CheckExact(body)) {
        m->body = PyBytes_AS_STRING(body);
        m->body_len = PyBytes_GET_SIZE(body);
    } else {
        return 1;
    }
    m->tags = NULL;
    m->tags_len = 0;
    PyObject *tags = v[F_TAGS];
    if (tags != NULL && tags != Py_None) {
        if (!PyUnicode_CheckExact(tags)) {
            return 1;
        }
        if (PyUnicode_GET_LENGTH(tags) > 0) {
            if ((rc = plain_text(tags, &m->tags_utf8, &m->tags_len))) {
                return rc;
            }
            m->tags = tags;
        }
    }
    if ((rc = plain_keys(v[F_KEYS], m))) {
        return rc;
    }
    if ((rc = plain_int(v[F_STORE_TIMESTAMP], store_ts, INT64_MIN, INT64_MAX, &m->store_ts))) {
        return rc;
    }
    if ((rc = plain_int(v[F_BORN_TIMESTAMP], m->store_ts, INT64_MIN, INT64_MAX, &m->born_ts))) {
        return rc;
    }
    if ((rc = plain_int(v[F_FLAG], 0, INT32_MIN, INT32_MAX, &x))) {
        return rc;
    }
    m->flag = (int32_t)x;
    Py_ssize_t props = 0;
    if (m->tags != NULL) {
        props += PROPERTY_NAME_LEN + 1 + m->tags_len;
    }
    if (m->keys != NULL) {
        props += (props ? 1 : 0) + PROPERTY_NAME_LEN + 1 + m->keys_len;
    }
    m->trailing = trailing && props > 0;
    props += m->trailing;
    if (props > MAX_PROPERTIES_BYTES) {
        return 1;
    }
    m->props_len = props;
    m->size = header_size + m->body_len + PyBytes_GET_SIZE(m->topic_field) + PROPERTIES_LENGTH_SIZE + props;
    return m->size > limit ? 1 : 0;
}

/* ------------------------------------------------------------------------------ */
/* pass 2: place and write */

static uint8_t *
put_property(uint8_t *p, const char *name, const Msg *m, int tags)
{
    p = put_bytes(p, name, PROPERTY_NAME_LEN);
    *p++ = NAME_VALUE_SEPARATOR;
    return tags ? put_bytes(p, m->tags_utf8, m->tags_len) : put_keys(p, m);
}

static uint8_t *
put_message(uint8_t *p, const Msg *m, int64_t queue_offset, int64_t phys, int32_t sys_flag,
            const uint8_t *ip, Py_ssize_t ip_len, int32_t port, int keys_first)
{
    uint32_t crc = (uint32_t)crc32(0L, Z_NULL, 0);
    const uint8_t *body = (const uint8_t *)m->body;
    Py_ssize_t left = m->body_len;
    while (left > 0) { /* zlib takes uInt lengths */
        uInt chunk = left > (Py_ssize_t)UINT32_MAX ? UINT32_MAX : (uInt)left;
        crc = (uint32_t)crc32(crc, body, chunk);
        body += chunk;
        left -= chunk;
    }
    p = put_i32(p, (int32_t)m->size);
    p = put_i32(p, MESSAGE_MAGIC);
    p = put_i32(p, (int32_t)(crc & BODY_CRC_MASK));
    p = put_i32(p, m->queue_id_value);
    p = put_i32(p, m->flag);
    p = put_i64(p, queue_offset);
    p = put_i64(p, phys);
    p = put_i32(p, sys_flag);
    p = put_i64(p, m->born_ts);
    p = put_bytes(p, ip, ip_len);
    p = put_i32(p, port);
    p = put_i64(p, m->store_ts);
    p = put_bytes(p, ip, ip_len);
    p = put_i32(p, port);
    p = put_i32(p, 0); /* RECONSUMETIMES */
    p = put_i64(p, 0); /* PREPAREDTRANSACTIONOFFSET */
    p = put_i32(p, (int32_t)m->body_len);
    p = put_bytes(p, m->body, m->body_len);
    p = put_bytes(p, PyBytes_AS_STRING(m->topic_field), PyBytes_GET_SIZE(m->topic_field));
    p = put_i16(p, (int32_t)m->props_len);
    int first_tags = !(keys_first && m->keys != NULL);
    if (m->tags != NULL && first_tags) {
        p = put_property(p, "TAGS", m, 1);
    }
    if (m->keys != NULL) {
        if (m->tags != NULL && first_tags) {
            *p++ = PROPERTY_SEPARATOR;
        }
        p = put_property(p, "KEYS", m, 0);
    }
    if (m->tags != NULL && !first_tags) {
        *p++ = PROPERTY_SEPARATOR;
        p = put_property(p, "TAGS", m, 1);
    }
    if (m->trailing) {
        *p++ = PROPERTY_SEPARATOR;
    }
    return p;
}

typedef struct {
    PyObject *key;  /* (topic, queue_id), owned */
    int64_t base;   /* next_offsets[key] before the batch */
    Py_ssize_t count, row, seen;
} Queue;

static void
free_queues(Queue *queues, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_XDECREF(queues[i].key);
    }
    PyMem_Free(queues);
}

/* Argument conversions of encode_plain (called once per append: PyArg_ParseTuple's format walk was
 * a tenth of a single append's instructions).  Each returns 0, or -1 with an exception set. */
static int
arg_ll(PyObject *o, long long *out)
{
    *out = PyLong_AsLongLong(o);
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

static int
arg_bool(PyObject *o, int *out)
{
    *out = PyObject_IsTrue(o);
    return *out < 0 ? -1 : 0;
}

static int
arg_int(PyObject *o, int *out)
{
    long v = PyLong_AsLong(o);
    if (v == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (v < INT_MIN || v > INT_MAX) {
        PyErr_SetString(PyExc_OverflowError, "signed integer is greater than maximum");
        return -1;
    }
    *out = (int)v;
    return 0;
}

#define ENCODE_PLAIN_ARGS 12 /* then trailing and dest_start, optional */

static PyObject *
encode_plain(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *items, *topic_fields, *next_offsets; /* next_offsets: read only */
    int keys_first, with_index, trailing = 0;
    long long store_ts_arg, start, file_size, limit_arg;
    const uint8_t *ip;
    Py_ssize_t ip_len;
    int port;
    PyObject *dest_obj;
    Py_buffer dest = {0};
    Py_ssize_t dest_start = 0;
    if (nargs < ENCODE_PLAIN_ARGS || nargs > ENCODE_PLAIN_ARGS + 2) {
        PyErr_Format(PyExc_TypeError, "encode_plain() takes %d to %d arguments (%zd given)", ENCODE_PLAIN_ARGS,
                     ENCODE_PLAIN_ARGS + 2, nargs);
        return NULL;
    }
    items = args[0];
    topic_fields = args[1];
    next_offsets = args[2];
    if (!PyList_Check(items) || !PyDict_Check(topic_fields) || !PyDict_Check(next_offsets)) {
        PyErr_SetString(PyExc_TypeError, "expected items a list, topic_fields and next_offsets dicts");
        return NULL;
    }
    if (!PyBytes_Check(args[5])) {
        PyErr_SetString(PyExc_TypeError, "expected store_ip as bytes");
        return NULL;
    }
    ip = (const uint8_t *)PyBytes_AS_STRING(args[5]);
    ip_len = PyBytes_GET_SIZE(args[5]);
    dest_obj = args[11];
    if (arg_bool(args[3], &keys_first) < 0 || arg_ll(args[4], &store_ts_arg) < 0 || arg_int(args[6], &port) < 0 ||
        arg_ll(args[7], &start) < 0 || arg_ll(args[8], &file_size) < 0 || arg_ll(args[9], &limit_arg) < 0 ||
        arg_bool(args[10], &with_index) < 0 || (nargs > 12 && arg_bool(args[12], &trailing) < 0)) {
        return NULL;
    }
    if (nargs > 13) {
        dest_start = PyNumber_AsSsize_t(args[13], PyExc_OverflowError);
        if (dest_start == -1 && PyErr_Occurred()) {
            return NULL;
        }
    }
    if (result_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "init(AppendResult) was not called");
        return NULL;
    }
    if ((ip_len != IPV4_LEN && ip_len != IPV6_LEN) || file_size <= END_FILE_MIN_BLANK_LENGTH || start < 0) {
        PyErr_SetString(PyExc_ValueError, "expected a 4- or 16-byte store IP, a file size above 8 and start >= 0");
        return NULL;
    }
    if (dest_obj != Py_None && PyObject_GetBuffer(dest_obj, &dest, PyBUF_WRITABLE) < 0) {
        return NULL;
    }
    if (dest_start < 0 || (dest_obj != Py_None && dest_start > dest.len)) {
        PyErr_SetString(PyExc_ValueError, "expected dest_start within dest");
        if (dest_obj != Py_None) {
            PyBuffer_Release(&dest);
        }
        return NULL;
    }
    /* where the batch may go in place: dest from dest_start on */
    uint8_t *dest_buf = dest.buf != NULL ? (uint8_t *)dest.buf + dest_start : NULL;
    Py_ssize_t dest_len = dest.buf != NULL ? dest.len - dest_start : 0;
    Py_ssize_t in_place = 0; /* bytes written into dest, zeroed again if the call fails */
    Py_ssize_t n = PyList_GET_SIZE(items);
    int32_t sys_flag = ip_len == IPV6_LEN ? (SYSFLAG_BORNHOST_V6 | SYSFLAG_STOREHOST_V6) : 0;
    Py_ssize_t header_size = HEADER_V4 + (ip_len == IPV6_LEN ? 2 * (IPV6_LEN - IPV4_LEN) : 0);
    Py_ssize_t limit = (Py_ssize_t)(limit_arg < file_size - END_FILE_MIN_BLANK_LENGTH
                                        ? limit_arg : file_size - END_FILE_MIN_BLANK_LENGTH);
    Msg *msgs = PyMem_Calloc(n ? n : 1, sizeof(Msg));
    Queue *queues = PyMem_Calloc(n ? n : 1, sizeof(Queue));
    PyObject *slots = PyDict_New();
    PyObject *ret = NULL, *data = NULL, *blanks = NULL, *results = NULL, *cq = NULL, *queue_list = NULL,
             *index = NULL, *stamp = NULL;
    Py_ssize_t n_queues = 0, total = 0, n_tokens = 0;
    if (msgs == NULL || queues == NULL || slots == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    /* the list is held by the caller; items are not replaced while this runs (no Python code runs) */
    for (Py_ssize_t i = 0; i < n; i++) {
        Msg *m = &msgs[i];
        int rc = parse_item(PyList_GET_ITEM(items, i), topic_fields, store_ts_arg, header_size,
                            limit, trailing, m);
        if (rc == 1) {
            ret = Py_NewRef(Py_None);
            goto done;
        }
        if (rc == 2) {
            ret = Py_NewRef(m->topic);
            goto done;
        }
        if (rc < 0) {
            goto done;
        }
        PyObject *key = PyTuple_Pack(2, m->topic, m->queue_id);
        if (key == NULL) {
            goto done;
        }
        PyObject *slot = PyDict_GetItemWithError(slots, key);
        if (slot == NULL) {
            if (PyErr_Occurred()) {
                Py_DECREF(key);
                goto done;
            }
            PyObject *next = PyDict_GetItemWithError(next_offsets, key);
            int64_t base = 0;
            if (next == NULL && PyErr_Occurred()) {
                Py_DECREF(key);
                goto done;
            }
            if (next != NULL && plain_int(next, 0, 0, INT64_MAX, &base) != 0) {
                Py_DECREF(key);
                if (!PyErr_Occurred()) {
                    PyErr_SetString(PyExc_TypeError, "next_offsets values must be ints >= 0");
                }
                goto done;
            }
            slot = PyLong_FromSsize_t(n_queues);
            if (slot == NULL || PyDict_SetItem(slots, key, slot) < 0) {
                Py_XDECREF(slot);
                Py_DECREF(key);
                goto done;
            }
            Py_DECREF(slot);
            queues[n_queues].key = key; /* owned */
            queues[n_queues].base = base;
            m->slot = n_queues++;
        } else {
            Py_DECREF(key);
            m->slot = PyLong_AsSsize_t(slot);
        }
        queues[m->slot].count++;
        total += m->size;
        if (with_index) {
            n_tokens += index_tokens(m);
        }
    }

    /* consume-queue rows grouped by queue, in first-appearance order */
    Py_ssize_t row = 0;
    queue_list = PyList_New(n_queues);
    if (queue_list == NULL) {
        goto done;
    }
    for (Py_ssize_t q = 0; q < n_queues; q++) {
        queues[q].row = row;
        PyObject *entry = Py_BuildValue("(Onn)", queues[q].key, row, queues[q].count);
        if (entry == NULL) {
            goto done;
        }
        PyList_SET_ITEM(queue_list, q, entry);
        row += queues[q].count;
    }
    /* in place: dest given and the batch needs no BLANK (the last message leaves 8 bytes in the file) */
    int to_dest = dest_buf != NULL && total + END_FILE_MIN_BLANK_LENGTH <= dest_len &&
                  start + total + END_FILE_MIN_BLANK_LENGTH <= start - start % file_size + file_size;
    data = to_dest ? Py_NewRef(Py_None) : PyByteArray_FromStringAndSize(NULL, total);
    cq = PyByteArray_FromStringAndSize(NULL, n * CQ_ROW_SIZE);
    index = PyByteArray_FromStringAndSize(NULL, 3 * n_tokens * (Py_ssize_t)sizeof(int64_t));
    blanks = PyList_New(0);
    results = PyList_New(n);
    if (data == NULL || cq == NULL || index == NULL || blanks == NULL || results == NULL) {
        goto done;
    }
    uint8_t *out = to_dest ? dest_buf : (uint8_t *)PyByteArray_AS_STRING(data);
    in_place = to_dest ? total : 0;
    uint8_t *rows = (uint8_t *)PyByteArray_AS_STRING(cq);
    int64_t *idx = (int64_t *)PyByteArray_AS_STRING(index);
    IndexOut iout = {idx, idx + n_tokens, idx + 2 * n_tokens, 0};
    int64_t pos = start;
    int64_t file_end = pos - pos % file_size + file_size;
    int64_t last_stamp = INT64_MIN;
    for (Py_ssize_t i = 0; i < n; i++) {
        Msg *m = &msgs[i];
        /* the BLANK rule, as commitlog.place (the Python one) and tested equal to it */
        if (pos + m->size + END_FILE_MIN_BLANK_LENGTH > file_end) {
            PyObject *blank = Py_BuildValue("(LL)", (long long)pos, (long long)(file_end - pos));
            if (blank == NULL || PyList_Append(blanks, blank) < 0) {
                Py_XDECREF(blank);
                goto done;
            }
            Py_DECREF(blank);
            pos = file_end;
            file_end += file_size;
        }
        Queue *q = &queues[m->slot];
        int64_t queue_offset = q->base + q->seen;
        uint8_t *r = rows + (q->row + q->seen) * CQ_ROW_SIZE;
        q->seen++;
        out = put_message(out, m, queue_offset, pos, sys_flag, ip, ip_len, port, keys_first);
        int64_t tags_code = m->tags != NULL ? (int32_t)java_hash(0, m->tags, 0, PyUnicode_GET_LENGTH(m->tags)) : 0;
        r = put_i64(r, pos);
        r = put_i32(r, (int32_t)m->size);
        put_i64(r, tags_code);
        if (with_index && m->keys != NULL) {
            uint32_t prefix = java_hash(0, m->topic, 0, PyUnicode_GET_LENGTH(m->topic));
            prefix = prefix * 31u + TOPIC_KEY_SEPARATOR;
            if (PyUnicode_CheckExact(m->keys)) {
                index_string(&iout, prefix, m->keys, pos, m->store_ts);
            } else {
                Py_ssize_t nk = PySequence_Fast_GET_SIZE(m->keys);
                PyObject **ks = PySequence_Fast_ITEMS(m->keys);
                for (Py_ssize_t k = 0; k < nk; k++) {
                    index_string(&iout, prefix, ks[k], pos, m->store_ts);
                }
            }
        }
        if (stamp == NULL || m->store_ts != last_stamp) {
            Py_XSETREF(stamp, PyLong_FromLongLong(m->store_ts));
            if (stamp == NULL) {
                goto done;
            }
            last_stamp = m->store_ts;
        }
        PyObject *id = msg_id(ip, ip_len, port, pos);
        if (id == NULL) {
            goto done;
        }
        PyObject *res = make_result(m->topic, m->queue_id, queue_offset, pos, m->size, id, stamp);
        Py_DECREF(id);
        if (res == NULL) {
            goto done;
        }
        PyList_SET_ITEM(results, i, res);
        pos += m->size;
    }
    PyObject *end = PyLong_FromLongLong(pos);
    if (end != NULL) {
        ret = PyTuple_Pack(7, data, blanks, results, cq, queue_list, index, end);
        Py_DECREF(end);
    }

done:
    if (ret == NULL && in_place > 0) {
        memset(dest_buf, 0, (size_t)in_place); /* a failed call leaves no message past the data end */
    }
    if (dest.buf != NULL) {
        PyBuffer_Release(&dest);
    }
    Py_XDECREF(data);
    Py_XDECREF(blanks);
    Py_XDECREF(results);
    Py_XDECREF(cq);
    Py_XDECREF(queue_list);
    Py_XDECREF(index);
    Py_XDECREF(stamp);
    Py_XDECREF(slots);
    if (queues != NULL) {
        free_queues(queues, n_queues);
    }
    PyMem_Free(msgs);
    return ret;
}

/* ------------------------------------------------------------------------------ */
/* IndexFile put */

#define INDEX_HEADER_SIZE 40
#define INDEX_SLOT_SIZE 4
#define INDEX_ENTRY_SIZE 20
#define INDEX_INVALID 0
#define INDEX_FIRST_ENTRY 1
#define MS_PER_SECOND 1000

enum { H_BEGIN_TS, H_END_TS, H_BEGIN_PHY, H_END_PHY, H_SLOT_COUNT, H_INDEX_COUNT, N_HEADER };

static inline int32_t
get_i32(const uint8_t *p)
{
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3]);
}

/*
 * Put entries (hs, ps, ts: n native int64 each) while the file has room (index_num entries), each as
 * IndexFile.putKey: chained to its slot's newest entry (if that is a valid entry number), the slot
 * then pointing at it; h is the header, updated.  Returns how many were put.  Runs no Python code.
 */
static Py_ssize_t
index_put_entries(long long *h, uint8_t *slot_table, Py_ssize_t slot_num, uint8_t *entry_table,
                  Py_ssize_t index_num, const int64_t *hs, const int64_t *ps, const int64_t *ts, Py_ssize_t n)
{
    Py_ssize_t put = 0;
    for (; put < n && h[H_INDEX_COUNT] < index_num; put++) {
        int64_t number = h[H_INDEX_COUNT];
        int64_t slot = hs[put] % slot_num;
        if (slot < 0) {
            slot += slot_num;
        }
        uint8_t *slot_at = slot_table + slot * INDEX_SLOT_SIZE;
        int32_t prev = get_i32(slot_at);
        if (prev <= INDEX_INVALID || prev > number) {
            prev = INDEX_INVALID;
            h[H_SLOT_COUNT]++;
        }
        int64_t begin = h[H_BEGIN_TS], stamp = ts[put], diff = 0;
        if (begin > 0 && stamp > begin) {
            uint64_t seconds = ((uint64_t)stamp - (uint64_t)begin) / MS_PER_SECOND;
            diff = seconds > INT32_MAX ? INT32_MAX : (int64_t)seconds;
        }
        uint8_t *e = entry_table + number * INDEX_ENTRY_SIZE;
        e = put_i32(e, (int32_t)hs[put]);
        e = put_i64(e, ps[put]);
        e = put_i32(e, (int32_t)diff);
        put_i32(e, prev);
        put_i32(slot_at, (int32_t)number);
        if (number <= INDEX_FIRST_ENTRY) {
            h[H_BEGIN_PHY] = ps[put];
            h[H_BEGIN_TS] = stamp;
        }
        h[H_INDEX_COUNT] = number + 1;
        h[H_END_PHY] = ps[put];
        h[H_END_TS] = stamp;
    }
    return put;
}

/* The 40-byte header h at head (IndexHeader.pack). */
static void
index_put_head(uint8_t *head, const long long *h)
{
    uint8_t *p = head;
    for (int i = H_BEGIN_TS; i <= H_END_PHY; i++) {
        p = put_i64(p, h[i]);
    }
    p = put_i32(p, (int32_t)h[H_SLOT_COUNT]);
    put_i32(p, (int32_t)h[H_INDEX_COUNT]);
}

/*
 * index_put(head, slots, entries, slot_num, header, hashes, phys, stamps) -> (header, count)
 *
 * head: the file's 40-byte header (writable), rewritten from the header after the
 * puts (beginTimestamp, endTimestamp, beginPhyOffset, endPhyOffset i8, hashSlotCount,
 * indexCount i4); slots: the file's slot table (slot_num big-endian int32, writable); entries: its
 * entry table (index_num entries of 20 bytes: hash i4, phyOffset i8, timeDiff i4,
 * prevIndex i4); header: (beginTimestamp, endTimestamp, beginPhyOffset,
 * endPhyOffset, hashSlotCount, indexCount); hashes, phys, stamps: native int64
 * columns.  Entries are put while the file has room, each as IndexFile.putKey:
 * chained to its slot's newest entry (if that is a valid entry number), the slot
 * then pointing at it.  Returns the header after and how many were put.
 */
static PyObject *
index_put(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    /* arguments converted by hand (once per append: PyArg_ParseTuple's format walk cost more than the put) */
    Py_buffer head = {0}, slots = {0}, entries = {0}, hashes = {0}, phys = {0}, stamps = {0};
    Py_ssize_t slot_num;
    long long h[N_HEADER];
    PyObject *ret = NULL;
    if (nargs != 8) {
        PyErr_Format(PyExc_TypeError, "index_put() takes 8 arguments (%zd given)", nargs);
        return NULL;
    }
    if (!PyTuple_Check(args[4]) || PyTuple_GET_SIZE(args[4]) != N_HEADER) {
        PyErr_SetString(PyExc_TypeError, "expected the header as a tuple of 6 ints");
        return NULL;
    }
    slot_num = PyNumber_AsSsize_t(args[3], PyExc_OverflowError);
    if (slot_num == -1 && PyErr_Occurred()) {
        return NULL;
    }
    for (int i = 0; i < N_HEADER; i++) {
        if (arg_ll(PyTuple_GET_ITEM(args[4], i), &h[i]) < 0) {
            return NULL;
        }
    }
    if (PyObject_GetBuffer(args[0], &head, PyBUF_WRITABLE) < 0 ||
        PyObject_GetBuffer(args[1], &slots, PyBUF_WRITABLE) < 0 ||
        PyObject_GetBuffer(args[2], &entries, PyBUF_WRITABLE) < 0 ||
        PyObject_GetBuffer(args[5], &hashes, PyBUF_SIMPLE) < 0 ||
        PyObject_GetBuffer(args[6], &phys, PyBUF_SIMPLE) < 0 ||
        PyObject_GetBuffer(args[7], &stamps, PyBUF_SIMPLE) < 0) {
        goto done;
    }
    Py_ssize_t n = hashes.len / (Py_ssize_t)sizeof(int64_t);
    Py_ssize_t index_num = entries.len / INDEX_ENTRY_SIZE;
    if (head.len != INDEX_HEADER_SIZE || slot_num <= 0 || slots.len != slot_num * INDEX_SLOT_SIZE ||
        hashes.len % sizeof(int64_t) ||
        phys.len != hashes.len || stamps.len != hashes.len || h[H_INDEX_COUNT] < INDEX_FIRST_ENTRY) {
        PyErr_SetString(PyExc_ValueError, "expected a 40-byte header, slot_num 4-byte slots, equal int64 columns "
                                          "and indexCount >= 1");
        goto done;
    }
    Py_ssize_t put;
    /* the buffers held pin the IndexFile's map: the puts run without the GIL (a conversion's
       reading thread runs meanwhile; a first write into a page of the map can fault for long) */
    Py_BEGIN_ALLOW_THREADS
    put = index_put_entries(h, slots.buf, slot_num, entries.buf, index_num, hashes.buf, phys.buf, stamps.buf, n);
    Py_END_ALLOW_THREADS
    index_put_head(head.buf, h);
    PyObject *fields = PyTuple_New(N_HEADER);
    if (fields == NULL) {
        goto done;
    }
    for (int i = 0; i < N_HEADER; i++) {
        PyObject *v = PyLong_FromLongLong(h[i]);
        if (v == NULL) {
            Py_DECREF(fields);
            goto done;
        }
        PyTuple_SET_ITEM(fields, i, v);
    }
    PyObject *count = PyLong_FromSsize_t(put);
    if (count != NULL) {
        ret = PyTuple_Pack(2, fields, count);
        Py_DECREF(count);
    }
    Py_DECREF(fields);
done:
    PyBuffer_Release(&head);
    PyBuffer_Release(&slots);
    PyBuffer_Release(&entries);
    PyBuffer_Release(&hashes);
    PyBuffer_Release(&phys);
    PyBuffer_Release(&stamps);
    return ret;
}

/* ------------------------------------------------------------------------------ */
/* the single append: Appender */

/*
 * Appender(store, commitlog, flusher, index, clock, topic_configs, store_ip, store_port, keys_first, file_size,
 *          limit, writeback)
 * .append(item) -> AppendResult | None
 *
 * What RocketMQStore.append does for one plain item (see encode_plain; the same parse and the same
 * bytes), in one call: the message encoded into the active commitlog file's map at the data end, its
 * consume-queue entry written at the queue's end (pwrite, as files.MappedFile.write), its IndexFile
 * entries put (index_put's loop), and what the Python path updates afterwards set on the Python
 * objects themselves: CommitLogFile.wrote, each log's dirty set, ConsumeQueueFile._count,
 * store._next_offsets, the IndexFile header, the flusher's bookkeeping (FlushService.appended).
 * Nothing is cached between calls: every position is read from those objects at each call, so any
 * Python path may run between two calls.
 *
 * None, nothing changed, for anything the common path does not hold and the store's general path
 * (store._append) does: an item that is not plain or of a topic not validated yet, the flusher's lock
 * held by another thread, a message that does not fit in the reserved blocks of the active commitlog
 * file with 8 bytes to spare (a roll, a BLANK, a reservation), a queue not yet made or whose active file
 * has no reserved room, a topic config to extend, IndexFile entries that need a new file or a
 * reservation, extra index layouts (store.indexes), the properties style not yet known.
 *
 * store._clock is called for the store time unless clock is None (then the wall clock,
 * time.time_ns() // 10**6).  Holds the GIL throughout, and the flusher's lock while it writes.
 */
#include <time.h>
#include <unistd.h>
#include <errno.h>

#define INDEX_STACK_ENTRIES 16

enum {
    S_ACTIVE, S_WROTE, S_BASE, S_FILE, S_MM, S_RESERVED, S_QUEUES, S_LOG, S_SEGMENTS, S_LAST, S_COUNT, S_FD,
    S_SIZE, S_NEXT_OFFSETS, S_TOPICS, S_WRITE_QUEUE_NUMS, S_FILES, S_HEADER, S_INDEX_NUM, S_SLOT_NUM, S_DIRTY,
    S_APPENDED_END, S_LAST_STORE_TS, S_CQ_DIRTY_ENTRIES, S_CQ_LAST_TS, S_ACQUIRE, S_RELEASE, S_APPENDED,
    S_WRITE, S_INDEXES, S_TRAILING, S_PLAIN_TOPICS, S_RESERVING,
    N_STR
};
static const char *const STR_NAMES[N_STR] = {
    "_active", "wrote", "base", "file", "_mm", "reserved", "queues", "log", "segments", "_last", "_count", "_fd",
    "size", "_next_offsets", "topics", "writeQueueNums", "files", "header", "index_num", "slot_num", "_dirty",
    "_appended_end", "_last_store_ts", "_cq_dirty_entries", "_cq_last_ts", "acquire", "release", "appended",
    "write", "indexes", "_trailing_separator", "_plain_topics", "_reserving",
};
static PyObject *str_[N_STR];
/* IndexHeader's fields in the order of H_* */
static const char *const HEADER_NAMES[N_HEADER] = {
    "begin_timestamp", "end_timestamp", "begin_phy_offset", "end_phy_offset", "hash_slot_count", "index_count",
};
static PyObject *header_str[N_HEADER];

typedef struct {
    PyObject_HEAD
    PyObject *store, *commitlog, *flusher, *lock, *index, *clock, *topic_configs, *ip;
    int32_t port;
    int keys_first;
    long long file_size, limit, writeback;
} Appender;

/* getattr(o, str_[name]) as a long long; 0 ok, -1 error, 1 not an int (not plain). */
static int
attr_ll(PyObject *o, int name, long long *out)
{
    PyObject *v = PyObject_GetAttr(o, str_[name]);
    if (v == NULL) {
        return -1;
    }
    int rc = 1;
    if (PyLong_CheckExact(v)) {
        *out = PyLong_AsLongLong(v);
        rc = *out == -1 && PyErr_Occurred() ? -1 : 0;
    }
    Py_DECREF(v);
    return rc;
}

/* Whether a MappedFile keeps blocks reserved ahead of its writer (False on a filesystem without
   posix_fallocate: then nothing is written through its map, as files.MappedFile.write does).  0/1, -1 error. */
static int
reserving(PyObject *mapped)
{
    PyObject *v = PyObject_GetAttr(mapped, str_[S_RESERVING]);
    if (v == NULL) {
        return -1;
    }
    int rc = PyObject_IsTrue(v);
    Py_DECREF(v);
    return rc;
}

/* fd's bytes [at, at + n) = data, by pwrite; on a failure the file's own write (files.MappedFile.write), which
   raises the typed error (or writes them).  0 ok, -1 error. */
static int
write_through(PyObject *mapped, int fd, const uint8_t *data, Py_ssize_t n, long long at)
{
    Py_ssize_t done = 0;
    while (done < n) {
        ssize_t w = pwrite(fd, data + done, (size_t)(n - done), (off_t)(at + done));
        if (w <= 0) {
            if (w < 0 && errno == EINTR) {
                continue;
            }
            PyObject *res = PyObject_CallMethod(mapped, "write", "Ly#", at + done, data + done, n - done);
            if (res == NULL) {
                return -1;
            }
            Py_DECREF(res);
            return 0;
        }
        done += w;
    }
    return 0;
}

static int
set_ll(PyObject *o, PyObject *name, long long value)
{
    PyObject *v = PyLong_FromLongLong(value);
    if (v == NULL) {
        return -1;
    }
    int rc = PyObject_SetAttr(o, name, v);
    Py_DECREF(v);
    return rc;
}

/* log._dirty[seg.base] = seg (SegmentedLog.mark_dirty). */
static int
mark_dirty(PyObject *log, PyObject *seg, long long base)
{
    PyObject *dirty = PyObject_GetAttr(log, str_[S_DIRTY]);
    PyObject *key = PyLong_FromLongLong(base);
    int rc = dirty == NULL || key == NULL ? -1 : PyDict_SetItem(dirty, key, seg);
    Py_XDECREF(dirty);
    Py_XDECREF(key);
    return rc;
}

static int
appender_traverse(Appender *self, visitproc visit, void *arg)
{
    Py_VISIT(self->store);
    Py_VISIT(self->commitlog);
    Py_VISIT(self->flusher);
    Py_VISIT(self->lock);
    Py_VISIT(self->index);
    Py_VISIT(self->clock);
    Py_VISIT(self->topic_configs);
    Py_VISIT(self->ip);
    return 0;
}

static int
appender_clear(Appender *self)
{
    Py_CLEAR(self->store);
    Py_CLEAR(self->commitlog);
    Py_CLEAR(self->flusher);
    Py_CLEAR(self->lock);
    Py_CLEAR(self->index);
    Py_CLEAR(self->clock);
    Py_CLEAR(self->topic_configs);
    Py_CLEAR(self->ip);
    return 0;
}

static void
appender_dealloc(Appender *self)
{
    PyObject_GC_UnTrack(self);
    appender_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int
appender_init(Appender *self, PyObject *args, PyObject *kwds)
{
    PyObject *store, *commitlog, *flusher, *index, *clock, *topic_configs, *ip;
    int port, keys_first;
    long long file_size, limit, writeback;
    if (!PyArg_ParseTuple(args, "OOOOOOSipLLL", &store, &commitlog, &flusher, &index, &clock, &topic_configs, &ip,
                          &port, &keys_first, &file_size, &limit, &writeback)) {
        return -1;
    }
    if ((PyBytes_GET_SIZE(ip) != IPV4_LEN && PyBytes_GET_SIZE(ip) != IPV6_LEN) ||
        file_size <= END_FILE_MIN_BLANK_LENGTH || writeback <= 0) {
        PyErr_SetString(PyExc_ValueError, "expected a 4- or 16-byte store IP, a file size above 8, writeback > 0");
        return -1;
    }
    if (result_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "init(AppendResult) was not called");
        return -1;
    }
    PyObject *lock = PyObject_GetAttrString(flusher, "lock");
    if (lock == NULL) {
        return -1;
    }
    appender_clear(self);
    self->store = Py_NewRef(store);
    self->commitlog = Py_NewRef(commitlog);
    self->flusher = Py_NewRef(flusher);
    self->lock = lock;
    self->index = Py_NewRef(index);
    self->clock = Py_NewRef(clock);
    self->topic_configs = Py_NewRef(topic_configs);
    self->ip = Py_NewRef(ip);
    self->port = (int32_t)port;
    self->keys_first = keys_first;
    self->file_size = file_size;
    self->limit = limit < file_size - END_FILE_MIN_BLANK_LENGTH ? limit : file_size - END_FILE_MIN_BLANK_LENGTH;
    self->writeback = writeback;
    return 0;
}

/* The IndexFile an append puts into (index.files[-1]) and what it needs of it. */
typedef struct {
    PyObject *file;    /* the IndexFile, owned */
    PyObject *header;  /* its IndexHeader, owned */
    PyObject *mm;      /* its MappedFile's map, owned */
    long long h[N_HEADER], index_num, slot_num;
} IndexTarget;

static void
index_target_clear(IndexTarget *t)
{
    Py_CLEAR(t->file);
    Py_CLEAR(t->header);
    Py_CLEAR(t->mm);
}

/* 0: t filled and k entries fit it with no reservation; 1: not the common path; -1: error. */
static int
index_target(PyObject *index, Py_ssize_t k, int64_t phys, IndexTarget *t)
{
    PyObject *files = PyObject_GetAttr(index, str_[S_FILES]);
    if (files == NULL) {
        return -1;
    }
    if (!PyList_CheckExact(files) || PyList_GET_SIZE(files) == 0) {
        Py_DECREF(files);
        return 1;
    }
    t->file = Py_NewRef(PyList_GET_ITEM(files, PyList_GET_SIZE(files) - 1));
    Py_DECREF(files);
    t->header = PyObject_GetAttr(t->file, str_[S_HEADER]);
    if (t->header == NULL) {
        return -1;
    }
    int rc;
    for (int i = 0; i < N_HEADER; i++) {
        PyObject *v = PyObject_GetAttr(t->header, header_str[i]);
        if (v == NULL) {
            return -1;
        }
        rc = 1;
        if (PyLong_CheckExact(v)) {
            t->h[i] = PyLong_AsLongLong(v);
            rc = t->h[i] == -1 && PyErr_Occurred() ? -1 : 0;
        }
        Py_DECREF(v);
        if (rc) {
            return rc;
        }
    }
    long long reserved, size;
    if ((rc = attr_ll(t->file, S_INDEX_NUM, &t->index_num)) || (rc = attr_ll(t->file, S_SLOT_NUM, &t->slot_num))) {
        return rc;
    }
    PyObject *mapped = PyObject_GetAttr(t->file, str_[S_FILE]);
    if (mapped == NULL) {
        return -1;
    }
    int reserves = reserving(mapped);
    rc = reserves < 0 ? -1 : attr_ll(mapped, S_RESERVED, &reserved);
    if (rc == 0) {
        rc = attr_ll(mapped, S_SIZE, &size);
    }
    if (rc == 0) {
        t->mm = PyObject_GetAttr(mapped, str_[S_MM]);
        rc = t->mm == NULL ? -1 : 0;
    }
    Py_DECREF(mapped);
    if (rc) {
        return rc;
    }
    long long end = INDEX_HEADER_SIZE + t->slot_num * INDEX_SLOT_SIZE + (t->h[H_INDEX_COUNT] + k) * INDEX_ENTRY_SIZE;
    /* full (the general path opens the next file), past the reserved blocks (it reserves), behind the
       file's end offset (IndexService.put_hashes skips such entries), or a header the loop refuses */
    if (t->mm == Py_None || t->slot_num <= 0 || t->h[H_INDEX_COUNT] < INDEX_FIRST_ENTRY ||
        t->h[H_INDEX_COUNT] >= t->index_num || t->h[H_INDEX_COUNT] + k > t->index_num || (reserves && end > reserved) ||
        end > size || phys < t->h[H_END_PHY]) {
        return 1;
    }
    return 0;
}

/* The queue-config check of the Python path (TopicConfigs.ensure would change nothing): 0 yes, 1 no. */
static int
queue_configured(PyObject *topic_configs, PyObject *topic, int32_t queue_id)
{
    PyObject *topics = PyObject_GetAttr(topic_configs, str_[S_TOPICS]);
    if (topics == NULL) {
        return -1;
    }
    int rc = 1;
    PyObject *entry = PyDict_CheckExact(topics) ? PyDict_GetItemWithError(topics, topic) : NULL;
    if (entry != NULL && PyDict_CheckExact(entry)) {
        PyObject *nums = PyDict_GetItemWithError(entry, str_[S_WRITE_QUEUE_NUMS]);
        if (nums != NULL && PyLong_CheckExact(nums)) {
            long long n = PyLong_AsLongLong(nums);
            rc = n == -1 && PyErr_Occurred() ? -1 : (n >= (long long)queue_id + 1 ? 0 : 1);
        }
    }
    if (PyErr_Occurred()) {
        rc = -1;
    }
    Py_DECREF(topics);
    return rc;
}

/* The append under the lock: the result, Py_None (not the common path) or NULL (error). */
static PyObject *
append_locked(Appender *self, PyObject *item)
{
    PyObject *ret = NULL, *topic_fields = NULL, *seg = NULL, *mapped = NULL, *mm = NULL, *queues = NULL,
             *key = NULL, *log = NULL, *cq_seg = NULL, *cq_file = NULL, *next_offsets = NULL, *cl_log = NULL,
             *indexes = NULL, *trailing_obj = NULL;
    IndexTarget it = {0};
    int64_t idx_stack[3 * INDEX_STACK_ENTRIES];
    int64_t *idx = idx_stack;
    Py_buffer dest = {0};
    int rc;

    /* extra index layouts and the properties style: the general path's */
    indexes = PyObject_GetAttr(self->store, str_[S_INDEXES]);
    trailing_obj = indexes == NULL ? NULL : PyObject_GetAttr(self->store, str_[S_TRAILING]);
    if (trailing_obj == NULL) {
        goto done;
    }
    if (indexes != Py_None || !PyBool_Check(trailing_obj)) {
        ret = Py_NewRef(Py_None);
        goto done;
    }
    long long now;
    if (self->clock == Py_None) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        now = (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    } else {
        PyObject *t = PyObject_CallNoArgs(self->clock);
        if (t == NULL) {
            goto done;
        }
        if (!PyLong_CheckExact(t)) {  /* the general path converts it */
            Py_DECREF(t);
            ret = Py_NewRef(Py_None);
            goto done;
        }
        now = PyLong_AsLongLong(t);
        Py_DECREF(t);
        if (now == -1 && PyErr_Occurred()) {
            goto done;
        }
    }
    Py_ssize_t ip_len = PyBytes_GET_SIZE(self->ip);
    const uint8_t *ip = (const uint8_t *)PyBytes_AS_STRING(self->ip);
    Py_ssize_t header_size = HEADER_V4 + (ip_len == IPV6_LEN ? 2 * (IPV6_LEN - IPV4_LEN) : 0);
    int32_t sys_flag = ip_len == IPV6_LEN ? (SYSFLAG_BORNHOST_V6 | SYSFLAG_STOREHOST_V6) : 0;
    topic_fields = PyObject_GetAttr(self->store, str_[S_PLAIN_TOPICS]);
    if (topic_fields == NULL) {
        goto done;
    }
    if (!PyDict_CheckExact(topic_fields)) {
        ret = Py_NewRef(Py_None);
        goto done;
    }
    Msg m;
    rc = parse_item(item, topic_fields, now, header_size, (Py_ssize_t)self->limit, trailing_obj == Py_True, &m);
    if (rc < 0) {
        goto done;
    }
    if (rc) {
        ret = Py_NewRef(Py_None);
        goto done;
    }

    /* the commitlog: room in the active file's reserved blocks, with 8 bytes to spare (no BLANK) */
    long long wrote, base, reserved;
    seg = PyObject_GetAttr(self->commitlog, str_[S_ACTIVE]);
    if (seg == NULL) {
        goto done;
    }
    if (seg == Py_None) {
        ret = Py_NewRef(Py_None);
        goto done;
    }
    if ((rc = attr_ll(seg, S_WROTE, &wrote)) || (rc = attr_ll(seg, S_BASE, &base))) {
        goto not_common;
    }
    mapped = PyObject_GetAttr(seg, str_[S_FILE]);
    if (mapped == NULL) {
        goto done;
    }
    long long cl_fd;
    int cl_reserving = reserving(mapped);
    if (cl_reserving < 0) {
        goto done;
    }
    if ((rc = attr_ll(mapped, S_RESERVED, &reserved)) || (rc = attr_ll(mapped, S_FD, &cl_fd))) {
        goto not_common;
    }
    mm = PyObject_GetAttr(mapped, str_[S_MM]);
    if (mm == NULL) {
        goto done;
    }
    /* in place within the reserved blocks (CommitLog.unwritten_map); a file that reserves none is
       written through its descriptor (CommitLog.write_batch) */
    long long room = cl_reserving && reserved < self->file_size ? reserved : self->file_size;
    if (mm == Py_None || cl_fd < 0 || wrote < 0 || wrote + m.size + END_FILE_MIN_BLANK_LENGTH > room) {
        ret = Py_NewRef(Py_None);
        goto done;
    }
    int64_t pos = base + wrote;

    /* the queue: made already, its active file with a reserved slot, its topic config holding it */
    long long count, cq_base, cq_reserved, cq_size, fd;
    queues = PyObject_GetAttr(self->store, str_[S_QUEUES]);
    next_offsets = queues == NULL ? NULL : PyObject_GetAttr(self->store, str_[S_NEXT_OFFSETS]);
    key = next_offsets == NULL ? NULL : PyTuple_Pack(2, m.topic, m.queue_id);
    if (key == NULL) {
        goto done;
    }
    if (!PyDict_CheckExact(queues) || !PyDict_CheckExact(next_offsets)) {
        ret = Py_NewRef(Py_None);
        goto done;
    }
    PyObject *cq = PyDict_GetItemWithError(queues, key);
    if (cq == NULL) {
        if (!PyErr_Occurred()) {
            ret = Py_NewRef(Py_None);
        }
        goto done;
    }
    log = PyObject_GetAttr(cq, str_[S_LOG]);
    PyObject *segments = log == NULL ? NULL : PyObject_GetAttr(log, str_[S_SEGMENTS]);
    if (segments == NULL) {
        goto done;
    }
    cq_seg = PyObject_GetAttr(segments, str_[S_LAST]);
    Py_DECREF(segments);
    if (cq_seg == NULL) {
        goto done;
    }
    if (cq_seg == Py_None) {
        ret = Py_NewRef(Py_None);
        goto done;
    }
    if ((rc = attr_ll(cq_seg, S_COUNT, &count)) || (rc = attr_ll(cq_seg, S_BASE, &cq_base))) {
        goto not_common;
    }
    cq_file = PyObject_GetAttr(cq_seg, str_[S_FILE]);
    if (cq_file == NULL) {
        goto done;
    }
    if ((rc = attr_ll(cq_file, S_RESERVED, &cq_reserved)) || (rc = attr_ll(cq_file, S_SIZE, &cq_size)) ||
        (rc = attr_ll(cq_file, S_FD, &fd))) {
        goto not_common;
    }
    int cq_reserving = reserving(cq_file);
    if (cq_reserving < 0) {
        goto done;
    }
    if (count < 0 || fd < 0 || (count + 1) * CQ_ROW_SIZE > cq_size ||
        (cq_reserving && (count + 1) * CQ_ROW_SIZE > cq_reserved)) {
        ret = Py_NewRef(Py_None);
        goto done;
    }
    if ((rc = queue_configured(self->topic_configs, m.topic, m.queue_id_value))) {
        goto not_common;
    }
    int64_t queue_offset = 0;
    PyObject *next = PyDict_GetItemWithError(next_offsets, key);
    if (next == NULL && PyErr_Occurred()) {
        goto done;
    }
    if (next != NULL && (rc = plain_int(next, 0, 0, INT64_MAX, &queue_offset))) {
        goto not_common;
    }

    /* the IndexFile: the message's entries fit the last file's reserved entries */
    Py_ssize_t k = self->index != Py_None && m.keys != NULL ? index_tokens(&m) : 0;
    if (self->index != Py_None) {
        if ((rc = index_target(self->index, k, pos, &it))) {
            goto not_common;
        }
        if (k > INDEX_STACK_ENTRIES) {
            idx = PyMem_Malloc(3 * k * sizeof(int64_t));
            if (idx == NULL) {
                PyErr_NoMemory();
                goto done;
            }
        }
    }

    /* every check passed: write the message */
    if (cl_reserving) {
        if (PyObject_GetBuffer(mm, &dest, PyBUF_WRITABLE) < 0) {
            goto done;
        }
        if (dest.len < wrote + m.size) {
            PyErr_SetString(PyExc_ValueError, "expected the commitlog map to hold the reserved blocks");
            goto done;
        }
        put_message((uint8_t *)dest.buf + wrote, &m, queue_offset, pos, sys_flag, ip, ip_len, self->port,
                    self->keys_first);
        PyBuffer_Release(&dest);
    } else {
        uint8_t *data = PyMem_Malloc((size_t)m.size);
        if (data == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        put_message(data, &m, queue_offset, pos, sys_flag, ip, ip_len, self->port, self->keys_first);
        rc = write_through(mapped, (int)cl_fd, data, m.size, wrote);
        PyMem_Free(data);
        if (rc < 0) {
            goto done;
        }
    }
    /* CommitLog.written_in_place */
    long long after = wrote + m.size;
    if (set_ll(seg, str_[S_WROTE], after) < 0) {
        goto done;
    }
    if (wrote / self->writeback != after / self->writeback) {   /* MappedFile.appended: starts writeback */
        PyObject *r = PyObject_CallMethod(mapped, "appended", "LL", wrote, after);
        if (r == NULL) {
            goto done;
        }
        Py_DECREF(r);
    }
    cl_log = PyObject_GetAttr(self->commitlog, str_[S_LOG]);
    if (cl_log == NULL || mark_dirty(cl_log, seg, base) < 0) {
        goto done;
    }
    /* the queue's entry (ConsumeQueue.append_packed), its next offset */
    uint8_t row[CQ_ROW_SIZE];
    uint8_t *r = put_i64(row, pos);
    r = put_i32(r, (int32_t)m.size);
    put_i64(r, m.tags != NULL ? (int32_t)java_hash(0, m.tags, 0, PyUnicode_GET_LENGTH(m.tags)) : 0);
    PyObject *next_value = PyLong_FromLongLong(queue_offset + 1);
    if (next_value == NULL || PyDict_SetItem(next_offsets, key, next_value) < 0) {
        Py_XDECREF(next_value);
        goto done;
    }
    Py_DECREF(next_value);
    /* through the descriptor, as files.MappedFile.write: a page of the queue not written yet costs
       no write fault (measured: no faster through the map) */
    if (write_through(cq_file, (int)fd, row, CQ_ROW_SIZE, count * CQ_ROW_SIZE) < 0) {
        goto done;
    }
    if (set_ll(cq_seg, str_[S_COUNT], count + 1) < 0 || mark_dirty(log, cq_seg, cq_base) < 0) {
        goto done;
    }
    /* the key index (IndexFile.put) */
    if (self->index != Py_None) {
        if (k > 0) {
            uint32_t prefix = java_hash(0, m.topic, 0, PyUnicode_GET_LENGTH(m.topic)) * 31u + TOPIC_KEY_SEPARATOR;
            IndexOut iout = {idx, idx + k, idx + 2 * k, 0};
            if (PyUnicode_CheckExact(m.keys)) {
                index_string(&iout, prefix, m.keys, pos, m.store_ts);
            } else {
                Py_ssize_t nk = PySequence_Fast_GET_SIZE(m.keys);
                PyObject **ks = PySequence_Fast_ITEMS(m.keys);
                for (Py_ssize_t j = 0; j < nk; j++) {
                    index_string(&iout, prefix, ks[j], pos, m.store_ts);
                }
            }
            if (PyObject_GetBuffer(it.mm, &dest, PyBUF_WRITABLE) < 0) {
                goto done;
            }
            long long entries_at = INDEX_HEADER_SIZE + it.slot_num * INDEX_SLOT_SIZE;
            if (dest.len < entries_at + it.index_num * INDEX_ENTRY_SIZE) {
                PyErr_SetString(PyExc_ValueError, "expected the IndexFile map to hold its slots and entries");
                goto done;
            }
            uint8_t *b = dest.buf;
            index_put_entries(it.h, b + INDEX_HEADER_SIZE, (Py_ssize_t)it.slot_num, b + entries_at,
                              (Py_ssize_t)it.index_num, idx, idx + k, idx + 2 * k, k);
            index_put_head(b, it.h);
            PyBuffer_Release(&dest);
            for (int i = 0; i < N_HEADER; i++) {
                if (set_ll(it.header, header_str[i], it.h[i]) < 0) {
                    goto done;
                }
            }
        }
    }
    /* FlushService.appended */
    long long dirty_entries;
    if (set_ll(self->flusher, str_[S_APPENDED_END], pos + m.size) < 0 ||
        set_ll(self->flusher, str_[S_LAST_STORE_TS], m.store_ts) < 0 ||
        attr_ll(self->flusher, S_CQ_DIRTY_ENTRIES, &dirty_entries) != 0 ||
        set_ll(self->flusher, str_[S_CQ_DIRTY_ENTRIES], dirty_entries + 1) < 0 ||
        set_ll(self->flusher, str_[S_CQ_LAST_TS], m.store_ts) < 0) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError, "expected FlushService._cq_dirty_entries an int");
        }
        goto done;
    }
    PyObject *stamp = PyLong_FromLongLong(m.store_ts);
    PyObject *id = stamp == NULL ? NULL : msg_id(ip, ip_len, self->port, pos);
    if (id != NULL) {
        ret = make_result(m.topic, m.queue_id, queue_offset, pos, m.size, id, stamp);
    }
    Py_XDECREF(id);
    Py_XDECREF(stamp);
    goto done;

not_common:
    if (rc > 0) {
        ret = Py_NewRef(Py_None);
    }
done:
    if (dest.obj != NULL) {
        PyBuffer_Release(&dest);
    }
    if (idx != idx_stack) {
        PyMem_Free(idx);
    }
    index_target_clear(&it);
    Py_XDECREF(indexes);
    Py_XDECREF(trailing_obj);
    Py_XDECREF(topic_fields);
    Py_XDECREF(seg);
    Py_XDECREF(mapped);
    Py_XDECREF(mm);
    Py_XDECREF(queues);
    Py_XDECREF(key);
    Py_XDECREF(log);
    Py_XDECREF(cq_seg);
    Py_XDECREF(cq_file);
    Py_XDECREF(next_offsets);
    Py_XDECREF(cl_log);
    return ret;
}

static PyObject *
appender_append(Appender *self, PyObject *item)
{
    if (self->store == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Appender not initialised");
        return NULL;
    }
    /* the flusher's lock, if free at once: a flusher holding it (or another writer) sends the item to
       the general path, which waits for it */
    PyObject *got = PyObject_CallMethodOneArg(self->lock, str_[S_ACQUIRE], Py_False);
    if (got == NULL) {
        return NULL;
    }
    int taken = PyObject_IsTrue(got);
    Py_DECREF(got);
    if (taken <= 0) {
        return taken < 0 ? NULL : Py_NewRef(Py_None);
    }
    PyObject *ret = append_locked(self, item);
    PyObject *exc_type, *exc_value, *exc_tb;
    PyErr_Fetch(&exc_type, &exc_value, &exc_tb);
    PyObject *released = PyObject_CallMethodNoArgs(self->lock, str_[S_RELEASE]);
    if (released == NULL) {
        Py_XDECREF(exc_type);
        Py_XDECREF(exc_value);
        Py_XDECREF(exc_tb);
        Py_XDECREF(ret);
        return NULL;
    }
    Py_DECREF(released);
    PyErr_Restore(exc_type, exc_value, exc_tb);
    return ret;
}

static PyMethodDef appender_methods[] = {
    {"append", (PyCFunction)appender_append, METH_O,
     "append(item) -> AppendResult, or None: not the common path (nothing changed; take the general one)."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject AppenderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "segstore_rocketmq._speedups.Appender",
    .tp_basicsize = sizeof(Appender),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The single append of a RocketMQ store in one call (see the comment above it in _speedups.c).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)appender_init,
    .tp_dealloc = (destructor)appender_dealloc,
    .tp_traverse = (traverseproc)appender_traverse,
    .tp_clear = (inquiry)appender_clear,
    .tp_methods = appender_methods,
};

/* ------------------------------------------------------------------------------ */
/* columnar decode (see columnar.py: the pure-Python reference and the column layout) */

/*
 * The decoded columns, cap rows each, in three caller-owned blocks (columnar.Rows):
 * int64 [N_I8][cap], int32 [N_I4][cap], uint8 born_ip [cap][16], store_ip [cap][16],
 * crc_ok [cap].  *_pos are view positions; position is the view position + base.
 */
enum { C_POSITION, C_QUEUE_OFFSET, C_PHYSICAL_OFFSET, C_BORN_TS, C_STORE_TS, C_PREPARED, C_BODY_POS,
       C_TOPIC_POS, C_PROPS_POS, N_I8 };
enum { C_SIZE, C_MAGIC, C_BODY_CRC, C_QUEUE_ID, C_FLAG, C_SYS_FLAG, C_BORN_PORT, C_STORE_PORT, C_RECONSUME,
       C_BODY_LEN, C_TOPIC_LEN, C_PROPS_LEN, N_I4 };
#define U8_PER_ROW (2 * IPV6_LEN + 1)

typedef struct {
    int64_t *i8[N_I8];
    int32_t *i4[N_I4];
    uint8_t *born_ip, *store_ip, *crc_ok;
    Py_ssize_t cap;
} Cols;

/* Point c into the three blocks; 0 (with ValueError set) when their sizes disagree. */
static int
cols_init(Cols *c, Py_buffer *i8, Py_buffer *i4, Py_buffer *u8)
{
    Py_ssize_t cap = i8->len / (Py_ssize_t)(N_I8 * sizeof(int64_t));
    if (i8->len != cap * N_I8 * (Py_ssize_t)sizeof(int64_t) || i4->len != cap * N_I4 * (Py_ssize_t)sizeof(int32_t) ||
        u8->len != cap * U8_PER_ROW) {
        PyErr_SetString(PyExc_ValueError, "expected column blocks of one capacity (see columnar.Rows)");
        return 0;
    }
    for (int k = 0; k < N_I8; k++) {
        c->i8[k] = (int64_t *)i8->buf + k * cap;
    }
    for (int k = 0; k < N_I4; k++) {
        c->i4[k] = (int32_t *)i4->buf + k * cap;
    }
    c->born_ip = u8->buf;
    c->store_ip = c->born_ip + cap * IPV6_LEN;
    c->crc_ok = c->store_ip + cap * IPV6_LEN;
    c->cap = cap;
    return 1;
}

#define MESSAGE_MAGIC_V2 ((int32_t)0xDAA320AB)
#define PREFIX_SIZE 8
#define IPV6_EXTRA (IPV6_LEN - IPV4_LEN)
enum { ST_DONE, ST_BLANK, ST_END, ST_BAD };

static inline int64_t
get_i64(const uint8_t *p)
{
    uint64_t u = 0;
    for (int i = 0; i < 8; i++) {
        u = (u << 8) | p[i];
    }
    return (int64_t)u;
}

/*
 * zlib's CRC-32 (IEEE 802.3, reflected) of a message body: with PCLMULQDQ where the CPU has it
 * (folding 16 bytes at a time, then a Barrett reduction: Intel's "Fast CRC Computation for Generic
 * Polynomials Using PCLMULQDQ"), the 0-15 trailing bytes and other CPUs through zlib.
 */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_CLMUL_CRC 1

__attribute__((target("pclmul,sse4.1"))) static uint32_t
crc32_clmul(const uint8_t *buf, size_t len)
{
    /* x^(128+32) mod P and x^(128-32) mod P (bit-reflected), x^64 mod P, P and floor(x^64 / P) */
    const __m128i k3k4 = _mm_set_epi64x(0x00ccaa009eLL, 0x01751997d0LL);
    const __m128i k5 = _mm_set_epi64x(0, 0x0163cd6124LL);
    const __m128i poly = _mm_set_epi64x(0x01f7011641LL, 0x01db710641LL);
    const __m128i low32 = _mm_setr_epi32(~0, 0, ~0, 0);
    __m128i x1 = _mm_xor_si128(_mm_loadu_si128((const __m128i *)buf), _mm_cvtsi32_si128((int)0xFFFFFFFFu));
    buf += 16;
    len -= 16;
    while (len >= 16) {
        __m128i lo = _mm_clmulepi64_si128(x1, k3k4, 0x00);
        x1 = _mm_clmulepi64_si128(x1, k3k4, 0x11);
        x1 = _mm_xor_si128(_mm_xor_si128(x1, lo), _mm_loadu_si128((const __m128i *)buf));
        buf += 16;
        len -= 16;
    }
    __m128i x2 = _mm_clmulepi64_si128(x1, k3k4, 0x10);
    x1 = _mm_xor_si128(_mm_srli_si128(x1, 8), x2);
    x2 = _mm_srli_si128(x1, 4);
    x1 = _mm_xor_si128(_mm_clmulepi64_si128(_mm_and_si128(x1, low32), k5, 0x00), x2);
    x2 = _mm_clmulepi64_si128(_mm_and_si128(x1, low32), poly, 0x10);
    x2 = _mm_clmulepi64_si128(_mm_and_si128(x2, low32), poly, 0x00);
    x1 = _mm_xor_si128(x1, x2);
    uint32_t crc = (uint32_t)_mm_extract_epi32(x1, 1);    /* still inverted */
    const z_crc_t *table = get_crc_table();
    for (; len; len--) {       /* the 0-15 bytes left, a table lookup each (no call into zlib) */
        crc = (uint32_t)table[(crc ^ *buf++) & 0xFF] ^ (crc >> 8);
    }
    return ~crc;
}
#endif

static uint32_t
body_crc32(const uint8_t *buf, size_t len)
{
#ifdef HAVE_CLMUL_CRC
    static int has_clmul = -1;
    if (has_clmul < 0) {
        __builtin_cpu_init();
        has_clmul = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
    }
    if (has_clmul && len >= 16 && len <= UINT32_MAX) {
        return crc32_clmul(buf, len);
    }
#endif
    return (uint32_t)crc32(0L, buf, (uInt)len);
}

/*
 * body_crcs(view, starts, lengths, out) -> None
 *
 * The stored body CRC (zlib CRC-32 & 0x7FFFFFFF, message.body_crc) of each slice
 * view[starts[i]:starts[i]+lengths[i]] into out (int32, one per slice): the
 * columnar restore of converted messages encodes them with it.  Bounds-checked;
 * releases the GIL.
 */
static PyObject *
body_crcs(PyObject *module, PyObject *args)
{
    Py_buffer view, starts, lengths, out;
    if (!PyArg_ParseTuple(args, "y*y*y*w*", &view, &starts, &lengths, &out)) {
        return NULL;
    }
    Py_ssize_t n = lengths.len / (Py_ssize_t)sizeof(int32_t);
    const int64_t *s = starts.buf;
    const int32_t *l = lengths.buf;
    int32_t *o = out.buf;
    int ok = starts.len == n * (Py_ssize_t)sizeof(int64_t) && out.len >= n * (Py_ssize_t)sizeof(int32_t);
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; ok && i < n; i++) {
        if (l[i] < 0 || s[i] < 0 || s[i] + l[i] > view.len) {
            ok = 0;
            break;
        }
        o[i] = (int32_t)(body_crc32((const uint8_t *)view.buf + s[i], (size_t)l[i]) & 0x7FFFFFFFu);
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    PyBuffer_Release(&starts);
    PyBuffer_Release(&lengths);
    PyBuffer_Release(&out);
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "expected slices inside the view and an output of n int32");
        return NULL;
    }
    Py_RETURN_NONE;
}

/*
 * Decode the message at d = view + pos (left bytes to the limit) into row n of c;
 * 0 when message.decode would raise (with check_crc = strict).  Row n may be
 * partly written then: the caller does not count it.
 */
static int
decode_row(const uint8_t *d, Py_ssize_t left, int32_t total, int32_t magic, int strict, Cols *c, Py_ssize_t n,
           Py_ssize_t pos, int64_t base)
{
    if (total < HEADER_V4 || total > left) {
        return 0;
    }
    int32_t sys_flag = get_i32(d + 36);
    int born6 = (sys_flag & SYSFLAG_BORNHOST_V6) != 0, store6 = (sys_flag & SYSFLAG_STOREHOST_V6) != 0;
    Py_ssize_t header = HEADER_V4 + (born6 ? IPV6_EXTRA : 0) + (store6 ? IPV6_EXTRA : 0);
    if (total < header) {
        return 0;
    }
    const uint8_t *p = d + header - 4;
    int32_t body_len = get_i32(p);
    Py_ssize_t at = header;
    if (body_len < 0 || at + body_len > total) {
        return 0;
    }
    Py_ssize_t body_at = at;
    at += body_len;
    int32_t topic_len;
    if (magic == MESSAGE_MAGIC) {
        if (at + 1 > total) {
            return 0;
        }
        topic_len = (int8_t)d[at];
        at += 1;
    } else {
        if (at + 2 > total) {
            return 0;
        }
        topic_len = (int16_t)((d[at] << 8) | d[at + 1]);
        at += 2;
    }
    if (topic_len < 0 || at + topic_len > total || !valid_utf8(d + at, topic_len, 0)) {
        return 0;
    }
    Py_ssize_t topic_at = at;
    at += topic_len;
    if (at + PROPERTIES_LENGTH_SIZE > total) {
        return 0;
    }
    int32_t props_len = (int16_t)((d[at] << 8) | d[at + 1]);
    at += PROPERTIES_LENGTH_SIZE;
    if (props_len < 0 || at + props_len != total || !valid_utf8(d + at, props_len, 1)) {
        return 0;
    }
    int32_t stored_crc = get_i32(d + 8);
    uint8_t crc_ok = (body_crc32(d + body_at, (size_t)body_len) & BODY_CRC_MASK) == (uint32_t)stored_crc;
    if (strict && !crc_ok) {
        return 0;
    }
    int64_t **i8 = c->i8;
    int32_t **i4 = c->i4;
    i8[C_POSITION][n] = base + pos;
    i8[C_QUEUE_OFFSET][n] = get_i64(d + 20);
    i8[C_PHYSICAL_OFFSET][n] = get_i64(d + 28);
    i8[C_BORN_TS][n] = get_i64(d + 40);
    i8[C_BODY_POS][n] = pos + body_at;
    i8[C_TOPIC_POS][n] = pos + topic_at;
    i8[C_PROPS_POS][n] = pos + at;
    i4[C_SIZE][n] = total;
    i4[C_MAGIC][n] = magic;
    i4[C_BODY_CRC][n] = stored_crc;
    i4[C_QUEUE_ID][n] = get_i32(d + 12);
    i4[C_FLAG][n] = get_i32(d + 16);
    i4[C_SYS_FLAG][n] = sys_flag;
    i4[C_BODY_LEN][n] = body_len;
    i4[C_TOPIC_LEN][n] = topic_len;
    i4[C_PROPS_LEN][n] = props_len;
    c->crc_ok[n] = crc_ok;
    p = d + 48;
    uint8_t *ip = c->born_ip + n * IPV6_LEN;
    int len = born6 ? IPV6_LEN : IPV4_LEN;
    memcpy(ip, p, (size_t)len);
    memset(ip + len, 0, (size_t)(IPV6_LEN - len));
    p += len;
    i4[C_BORN_PORT][n] = get_i32(p); p += 4;
    i8[C_STORE_TS][n] = get_i64(p); p += 8;
    ip = c->store_ip + n * IPV6_LEN;
    len = store6 ? IPV6_LEN : IPV4_LEN;
    memcpy(ip, p, (size_t)len);
    memset(ip + len, 0, (size_t)(IPV6_LEN - len));
    p += len;
    i4[C_STORE_PORT][n] = get_i32(p); p += 4;
    i4[C_RECONSUME][n] = get_i32(p); p += 4;
    i8[C_PREPARED][n] = get_i64(p);
    return 1;
}

/*
 * decode_region(view, pos, stop, limit, base, i8, i4, u8, strict) -> (n, pos, status, blank_size)
 *
 * Walk the records of view[pos:limit] that start before stop, one row each into
 * the column blocks, until they are full.  status: ST_DONE (stop reached or rows
 * full), ST_BLANK (a BLANK at pos, blank_size its size), ST_END (unwritten zeros
 * at pos), ST_BAD (message.decode would raise at pos; strict: a CRC mismatch too,
 * else it only clears crc_ok).  Never reads outside view[:limit].  Releases the GIL.
 */
static PyObject *
decode_region(PyObject *module, PyObject *args)
{
    Py_buffer view, i8, i4, u8;
    Py_ssize_t pos, stop, limit;
    long long base;
    int strict;
    if (!PyArg_ParseTuple(args, "y*nnnLw*w*w*p", &view, &pos, &stop, &limit, &base, &i8, &i4, &u8, &strict)) {
        return NULL;
    }
    Cols c;
    PyObject *ret = NULL;
    if (!cols_init(&c, &i8, &i4, &u8)) {
        goto done;
    }
    if (limit > view.len || pos < 0) {
        PyErr_SetString(PyExc_ValueError, "expected 0 <= pos and limit <= len(view)");
        goto done;
    }
    const uint8_t *d = view.buf;
    Py_ssize_t n = 0;
    int status = ST_DONE;
    int32_t blank = 0;
    Py_BEGIN_ALLOW_THREADS
    while (n < c.cap && pos < stop) {
        Py_ssize_t left = limit - pos;
        if (left < PREFIX_SIZE) {
            status = ST_END;
            for (Py_ssize_t k = 0; k < left; k++) {
                if (d[pos + k]) {
                    status = ST_BAD;
                }
            }
            break;
        }
        int32_t total = get_i32(d + pos), magic = get_i32(d + pos + 4);
        if (magic == BLANK_MAGIC) {
            status = ST_BLANK;
            blank = total;
            break;
        }
        if (magic != MESSAGE_MAGIC && magic != MESSAGE_MAGIC_V2) {
            status = total == 0 && magic == 0 ? ST_END : ST_BAD;
            break;
        }
        if (!decode_row(d + pos, left, total, magic, strict, &c, n, pos, base)) {
            status = ST_BAD;
            break;
        }
        n++;
        pos += total;
    }
    Py_END_ALLOW_THREADS
    ret = Py_BuildValue("nnii", n, pos, status, blank);
done:
    PyBuffer_Release(&view);
    PyBuffer_Release(&i8);
    PyBuffer_Release(&i4);
    PyBuffer_Release(&u8);
    return ret;
}

/*
 * decode_at(view, positions, limit, base, i8, i4, u8, strict) -> n
 *
 * The message at each view position (int64) in turn, one row each, until one is
 * not a message message.decode accepts (a BLANK, zeros or damage): n <
 * len(positions) then names it.  Never reads outside view[:limit].  Releases the GIL.
 */
static PyObject *
decode_at(PyObject *module, PyObject *args)
{
    Py_buffer view, positions, i8, i4, u8;
    Py_ssize_t limit;
    long long base;
    int strict;
    if (!PyArg_ParseTuple(args, "y*y*nLw*w*w*p", &view, &positions, &limit, &base, &i8, &i4, &u8, &strict)) {
        return NULL;
    }
    Cols c;
    PyObject *ret = NULL;
    if (!cols_init(&c, &i8, &i4, &u8)) {
        goto done;
    }
    Py_ssize_t count = positions.len / (Py_ssize_t)sizeof(int64_t);
    if (limit > view.len || limit < 0 || c.cap < count || positions.len % (Py_ssize_t)sizeof(int64_t)) {
        PyErr_SetString(PyExc_ValueError, "expected limit <= len(view), int64 positions and a row for each");
        goto done;
    }
    const uint8_t *d = view.buf;
    const int64_t *at = positions.buf;
    Py_ssize_t n = 0;
    Py_BEGIN_ALLOW_THREADS
    for (; n < count; n++) {
        int64_t pos = at[n];
        if (pos < 0 || limit - pos < PREFIX_SIZE) {
            break;
        }
        int32_t total = get_i32(d + pos), magic = get_i32(d + pos + 4);
        if ((magic != MESSAGE_MAGIC && magic != MESSAGE_MAGIC_V2) ||
            !decode_row(d + pos, limit - pos, total, magic, strict, &c, n, pos, base)) {
            break;
        }
    }
    Py_END_ALLOW_THREADS
    ret = PyLong_FromSsize_t(n);
done:
    PyBuffer_Release(&view);
    PyBuffer_Release(&positions);
    PyBuffer_Release(&i8);
    PyBuffer_Release(&i4);
    PyBuffer_Release(&u8);
    return ret;
}

/*
 * The columns are filled a row at a time from bytes spread over the map (a message's topic or
 * properties every few hundred bytes), and the next rows' bytes are mostly not in the cache yet:
 * asking for those PREFETCH_AHEAD rows ahead overlaps their loads with this row's work.  A
 * prefetch never faults; the position is still kept inside the view.
 */
#define PREFETCH_AHEAD 8
#if defined(__GNUC__)
#define PREFETCH(base, len, at) do { if ((at) >= 0 && (at) < (len)) __builtin_prefetch((base) + (at)); } while (0)
#else
#define PREFETCH(base, len, at) do { } while (0)
#endif

/*
 * gather(view, starts, lengths, offsets, out) -> None
 *
 * Copy view[starts[i]:starts[i]+lengths[i]] one after another into out, and
 * their int32 offsets (n + 1) into offsets (int64 starts, int32 lengths;
 * lengths <= 0 copy nothing).  Every slice is bounds-checked.  Releases the GIL.
 */
static PyObject *
gather(PyObject *module, PyObject *args)
{
    Py_buffer view, starts, lengths, offsets, out;
    if (!PyArg_ParseTuple(args, "y*y*y*w*w*", &view, &starts, &lengths, &offsets, &out)) {
        return NULL;
    }
    Py_ssize_t n = lengths.len / (Py_ssize_t)sizeof(int32_t);
    const int64_t *s = starts.buf;
    const int32_t *l = lengths.buf;
    int32_t *off = offsets.buf;
    const uint8_t *d = view.buf;
    uint8_t *o = out.buf;
    Py_ssize_t at = 0;
    int ok = starts.len == n * (Py_ssize_t)sizeof(int64_t) && offsets.len >= (n + 1) * (Py_ssize_t)sizeof(int32_t);
    Py_BEGIN_ALLOW_THREADS
    if (ok) {
        off[0] = 0;
    }
    for (Py_ssize_t i = 0; ok && i < n; i++) {
        if (l[i] > 0) {
            if (s[i] < 0 || s[i] + l[i] > view.len || at + l[i] > out.len || at + l[i] > INT32_MAX) {
                ok = 0;
                break;
            }
            copy_short(o + at, d + s[i], (size_t)l[i]);
            at += l[i];
        }
        off[i + 1] = (int32_t)at;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    PyBuffer_Release(&starts);
    PyBuffer_Release(&lengths);
    PyBuffer_Release(&offsets);
    PyBuffer_Release(&out);
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "expected slices inside the view and outputs large enough");
        return NULL;
    }
    Py_RETURN_NONE;
}

#define MAX_GATHER_PARTS 8

/*
 * gather_parts(parts, starts, lengths, out) -> bytes written
 *
 * Rows of k = len(parts) slices each: slice j of every row is parts[j][starts[r * k + j]:+lengths[r * k + j]]
 * (int64 starts, int32 lengths; lengths <= 0 copy nothing), copied one after another into out: the
 * pieces of a message in layout order, each from its own column, with no pool of them all first.
 * Every slice is bounds-checked (ValueError).  Releases the GIL.
 */
static PyObject *
gather_parts(PyObject *module, PyObject *args)
{
    PyObject *parts;
    Py_buffer starts, lengths, out, part[MAX_GATHER_PARTS];
    if (!PyArg_ParseTuple(args, "O!y*y*w*", &PyTuple_Type, &parts, &starts, &lengths, &out)) {
        return NULL;
    }
    Py_ssize_t k = PyTuple_GET_SIZE(parts), got = 0;
    int ok = k > 0 && k <= MAX_GATHER_PARTS;
    for (; ok && got < k; got++) {
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(parts, got), &part[got], PyBUF_SIMPLE) < 0) {
            ok = -1;
            break;
        }
    }
    Py_ssize_t m = lengths.len / (Py_ssize_t)sizeof(int32_t), at = 0;
    const int64_t *s = starts.buf;
    const int32_t *l = lengths.buf;
    uint8_t *o = out.buf;
    if (ok > 0) {
        ok = starts.len == m * (Py_ssize_t)sizeof(int64_t) && m % k == 0;
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; ok > 0 && i < m; i++) {
        if (l[i] > 0) {
            const Py_buffer *p = &part[i % k];
            if (s[i] < 0 || s[i] + l[i] > p->len || at + l[i] > out.len) {
                ok = 0;
                break;
            }
            copy_short(o + at, (const uint8_t *)p->buf + s[i], (size_t)l[i]);
            at += l[i];
        }
    }
    Py_END_ALLOW_THREADS
    for (Py_ssize_t j = 0; j < got; j++) {
        PyBuffer_Release(&part[j]);
    }
    PyBuffer_Release(&starts);
    PyBuffer_Release(&lengths);
    PyBuffer_Release(&out);
    if (ok < 0) {
        return NULL;
    }
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "expected 1 to 8 parts, slices inside them and an output large enough");
        return NULL;
    }
    return PyLong_FromSsize_t(at);
}

#define MAX_GATHER_SPECS 16

/*
 * gather_columns(view, rows, chunk, specs) -> None
 *
 * Several gathers at once: specs is a tuple of (starts, lengths, row_items, offsets, out), each
 * filled as gather fills it; row_items is None for one item per row, else the rows' int32 item
 * offsets (rows + 1: row r holds items row_items[r] to row_items[r + 1]).  The rows are taken
 * `chunk` at a time through every spec, so the bytes of a chunk of messages are copied into
 * all the columns while they are in the cache (a column at a time over a whole batch reads
 * them from memory again for each column).  Every slice is bounds-checked.  Releases the GIL.
 */
typedef struct {
    Py_buffer starts, lengths, items, offsets, out;
    int has_items;
    Py_ssize_t n, at;
} GatherSpec;

static PyObject *
gather_columns(PyObject *module, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t rows, chunk;
    PyObject *specs;
    if (!PyArg_ParseTuple(args, "y*nnO!", &view, &rows, &chunk, &PyTuple_Type, &specs)) {
        return NULL;
    }
    GatherSpec g[MAX_GATHER_SPECS];
    Py_ssize_t count = 0, want = PyTuple_GET_SIZE(specs);
    int ok = want <= MAX_GATHER_SPECS && rows >= 0 && chunk > 0;
    for (; ok && count < want; count++) {
        PyObject *spec = PyTuple_GET_ITEM(specs, count), *items;
        GatherSpec *k = &g[count];
        if (!PyTuple_Check(spec) ||
            !PyArg_ParseTuple(spec, "y*y*Ow*w*", &k->starts, &k->lengths, &items, &k->offsets, &k->out)) {
            ok = 0;
            break;
        }
        k->has_items = items != Py_None;
        if (k->has_items && PyObject_GetBuffer(items, &k->items, PyBUF_SIMPLE) < 0) {
            PyBuffer_Release(&k->starts);
            PyBuffer_Release(&k->lengths);
            PyBuffer_Release(&k->offsets);
            PyBuffer_Release(&k->out);
            ok = 0;
            break;
        }
        k->n = k->lengths.len / (Py_ssize_t)sizeof(int32_t);
        k->at = 0;
        if (k->starts.len != k->n * (Py_ssize_t)sizeof(int64_t) ||
            k->offsets.len < (k->n + 1) * (Py_ssize_t)sizeof(int32_t) ||
            (k->has_items ? k->items.len < (rows + 1) * (Py_ssize_t)sizeof(int32_t) : k->n != rows)) {
            count++;
            ok = 0;
            break;
        }
    }
    if (ok) {
        const uint8_t *d = view.buf;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t k = 0; k < count; k++) {
            ((int32_t *)g[k].offsets.buf)[0] = 0;
        }
        for (Py_ssize_t r0 = 0; ok && r0 < rows; r0 += chunk) {
            Py_ssize_t r1 = r0 + chunk < rows ? r0 + chunk : rows;
            for (Py_ssize_t k = 0; ok && k < count; k++) {
                GatherSpec *spec = &g[k];
                const int32_t *items = spec->has_items ? spec->items.buf : NULL;
                Py_ssize_t i0 = items ? items[r0] : r0, i1 = items ? items[r1] : r1;
                if (i0 < 0 || i1 < i0 || i1 > spec->n) {
                    ok = 0;
                    break;
                }
                const int64_t *s = spec->starts.buf;
                const int32_t *l = spec->lengths.buf;
                int32_t *off = spec->offsets.buf;
                uint8_t *o = spec->out.buf;
                Py_ssize_t at = spec->at, cap = spec->out.len;
                for (Py_ssize_t i = i0; i < i1; i++) {
                    if (i + PREFETCH_AHEAD < i1) {
                        PREFETCH(d, view.len, s[i + PREFETCH_AHEAD]);
                    }
                    if (l[i] > 0) {
                        if (s[i] < 0 || s[i] + l[i] > view.len || at + l[i] > cap || at + l[i] > INT32_MAX) {
                            ok = 0;
                            break;
                        }
                        copy_short(o + at, d + s[i], (size_t)l[i]);
                        at += l[i];
                    }
                    off[i + 1] = (int32_t)at;
                }
                spec->at = at;
            }
        }
        for (Py_ssize_t k = 0; ok && k < count; k++) {   /* items no row holds: none copied */
            if (g[k].has_items && ((const int32_t *)g[k].items.buf)[rows] != g[k].n) {
                ok = 0;
            }
        }
        Py_END_ALLOW_THREADS
    }
    for (Py_ssize_t k = 0; k < count; k++) {
        PyBuffer_Release(&g[k].starts);
        PyBuffer_Release(&g[k].lengths);
        if (g[k].has_items) {
            PyBuffer_Release(&g[k].items);
        }
        PyBuffer_Release(&g[k].offsets);
        PyBuffer_Release(&g[k].out);
    }
    PyBuffer_Release(&view);
    if (!ok) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_ValueError, "expected specs of slices inside the view, item offsets "
                            "covering every item and outputs large enough");
        }
        return NULL;
    }
    Py_RETURN_NONE;
}

/*
 * split_properties(view, starts, lengths, item_offsets, names, name_lens, values, value_lens,
 *                  tags, tags_lens, token_offsets, tokens, token_lens) -> (items, tokens)
 *
 * (tags_lens is -1 for a message without TAGS; a message's first KEYS token is
 * tokens[token_offsets[i]] when token_offsets[i + 1] > token_offsets[i].)
 *
 * Each properties string view[starts[i]:+lengths[i]] split as message.decode_properties:
 * items NAME 0x01 VALUE separated by 0x02, items without 0x01 skipped, a repeated
 * name keeps its first place and takes the last value.  Per message: item_offsets
 * (n + 1 int32), its TAGS value in tags/tags_lens (-1: none), and the non-empty
 * space-separated tokens of its KEYS value (token_offsets n + 1).  Items and
 * tokens are view positions (int64) and lengths (int32).  Returns (-1, -1) when
 * the item or token outputs are too small (sum(lengths) // 2 + n each always do).
 */
static PyObject *
split_properties(PyObject *module, PyObject *args)
{
    Py_buffer b[13];
    if (!PyArg_ParseTuple(args, "y*y*y*w*w*w*w*w*w*w*w*w*w*", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5], &b[6],
                          &b[7], &b[8], &b[9], &b[10], &b[11], &b[12])) {
        return NULL;
    }
    const uint8_t *d = b[0].buf;
    const int64_t *starts = b[1].buf;
    const int32_t *lens = b[2].buf;
    int32_t *item_off = b[3].buf, *name_len = b[5].buf, *val_len = b[7].buf, *tags_len = b[9].buf;
    int64_t *name_pos = b[4].buf, *val_pos = b[6].buf, *tags_pos = b[8].buf, *tok_pos = b[11].buf;
    int32_t *tok_off = b[10].buf, *tok_len = b[12].buf;
    Py_ssize_t n = b[2].len / (Py_ssize_t)sizeof(int32_t);
    Py_ssize_t item_cap = b[5].len / (Py_ssize_t)sizeof(int32_t), tok_cap = b[12].len / (Py_ssize_t)sizeof(int32_t);
    int ok = b[1].len == n * 8 && b[3].len >= (n + 1) * 4 && b[8].len >= n * 8 && b[9].len >= n * 4 &&
             b[10].len >= (n + 1) * 4 && b[4].len >= item_cap * 8 && b[6].len >= item_cap * 8 &&
             b[7].len >= item_cap * 4 && b[11].len >= tok_cap * 8;
    Py_ssize_t items = 0, tokens = 0;
    int full = 0;
    if (ok) {
        item_off[0] = 0;
        tok_off[0] = 0;
    }
    for (Py_ssize_t i = 0; ok && !full && i < n; i++) {
        int64_t s = starts[i], e = s + lens[i];
        if (s < 0 || e > b[0].len || lens[i] < 0) {
            ok = 0;
            break;
        }
        Py_ssize_t first = items;
        int64_t p = s;
        while (!full && lens[i] > 0 && p <= e) {
            const uint8_t *q = memchr(d + p, PROPERTY_SEPARATOR, (size_t)(e - p));
            int64_t item_end = q ? q - d : e;
            const uint8_t *sep = memchr(d + p, NAME_VALUE_SEPARATOR, (size_t)(item_end - p));
            if (sep) {
                int64_t nl = sep - (d + p);
                Py_ssize_t k = first;
                for (; k < items; k++) {
                    if (name_len[k] == nl && memcmp(d + name_pos[k], d + p, (size_t)nl) == 0) {
                        break;
                    }
                }
                if (k == items) {
                    if (items >= item_cap) {
                        full = 1;
                        break;
                    }
                    name_pos[k] = p;
                    name_len[k] = (int32_t)nl;
                    items++;
                }
                val_pos[k] = p + nl + 1;
                val_len[k] = (int32_t)(item_end - (p + nl + 1));
            }
            p = item_end + 1;
        }
        item_off[i + 1] = (int32_t)items;
        tags_pos[i] = 0;
        tags_len[i] = -1;
        for (Py_ssize_t k = first; !full && k < items; k++) {
            if (name_len[k] != PROPERTY_NAME_LEN) {
                continue;
            }
            const uint8_t *nm = d + name_pos[k];
            if (memcmp(nm, "TAGS", PROPERTY_NAME_LEN) == 0) {
                tags_pos[i] = val_pos[k];
                tags_len[i] = val_len[k];
            } else if (memcmp(nm, "KEYS", PROPERTY_NAME_LEN) == 0) {
                int64_t t = val_pos[k], te = t + val_len[k];
                while (!full && t < te) {
                    const uint8_t *sp = memchr(d + t, KEY_SEPARATOR, (size_t)(te - t));
                    int64_t tok_end = sp ? sp - d : te;
                    if (tok_end > t) {
                        if (tokens >= tok_cap) {
                            full = 1;
                            break;
                        }
                        tok_pos[tokens] = t;
                        tok_len[tokens] = (int32_t)(tok_end - t);
                        tokens++;
                    }
                    t = tok_end + 1;
                }
            }
        }
        tok_off[i + 1] = (int32_t)tokens;
    }
    for (int k = 0; k < 13; k++) {
        PyBuffer_Release(&b[k]);
    }
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "expected properties inside the view and outputs of the documented sizes");
        return NULL;
    }
    if (full) {
        return Py_BuildValue("nn", (Py_ssize_t)-1, (Py_ssize_t)-1);
    }
    return Py_BuildValue("nn", items, tokens);
}

/*
 * The next item of properties s[0:e] from *p: its name s[*item:*sep] and value s[*sep + 1:*end] (the
 * name ends at the item's first NAME_VALUE_SEPARATOR; *sep is -1 when it has none, and then it is
 * no item), *p moved past its PROPERTY_SEPARATOR.  0 when no item starts at *p (*p > e).  Items
 * are short: glibc's memchr finds a byte in one vector compare, faster than a loop over them.
 */
static inline int
next_item(const uint8_t *s, int64_t *p, int64_t e, int64_t *item, int64_t *sep, int64_t *end)
{
    if (*p > e) {
        return 0;
    }
    const uint8_t *q = memchr(s + *p, PROPERTY_SEPARATOR, (size_t)(e - *p));
    *item = *p;
    *end = q ? q - s : e;
    const uint8_t *x = memchr(s + *p, NAME_VALUE_SEPARATOR, (size_t)(*end - *p));
    *sep = x ? x - s : -1;
    *p = *end + 1;
    return 1;
}

/* One property item of a message while property_columns splits it: view positions and lengths. */
typedef struct {
    int64_t name, value;
    int32_t name_len, value_len;
} PropItem;

/* An output column of property_columns: int32 offsets (one more than its values) and data. */
typedef struct {
    int32_t *off;
    uint8_t *data;
    Py_ssize_t count, off_cap, at, cap;
} OutColumn;

/* Append s[0:n] as the next value of o; 0 when o is full. */
static inline int
out_put(OutColumn *o, const uint8_t *s, Py_ssize_t n)
{
    if (o->count + 1 >= o->off_cap || o->at + n > o->cap) {
        return 0;
    }
    copy_short(o->data + o->at, s, (size_t)n);
    o->at += n;
    o->off[++o->count] = (int32_t)o->at;
    return 1;
}

/* A message's items while property_columns splits it (grown as needed, reused from row to row). */
typedef struct {
    PropItem *items;
    Py_ssize_t m, cap;
} ItemList;

/* Add the item d[item:end] whose name ends at sep to l: a name seen already takes the value in
   its first place (message.decode_properties keeps the last value).  0 when out of memory. */
static inline int
take_item(ItemList *l, const uint8_t *d, int64_t item, int64_t sep, int64_t end)
{
    int32_t nl = (int32_t)(sep - item);
    Py_ssize_t k = 0;
    while (k < l->m && !(l->items[k].name_len == nl && same_text(d + l->items[k].name, d + item, nl))) {
        k++;
    }
    if (k == l->m) {
        if (l->m == l->cap) {
            Py_ssize_t grown = l->cap ? 2 * l->cap : 16;
            PropItem *more = realloc(l->items, (size_t)grown * sizeof(PropItem));
            if (more == NULL) {
                return 0;
            }
            l->items = more;
            l->cap = grown;
        }
        l->items[k].name = item;
        l->items[k].name_len = nl;
        l->m++;
    }
    l->items[k].value = sep + 1;
    l->items[k].value_len = (int32_t)(end - sep - 1);
    return 1;
}

#if defined(__SSE2__)
#include <emmintrin.h>
#define HAVE_SEPARATOR_MASKS 1
/* Bit k of *ones and *twos: whether p[k] is NAME_VALUE_SEPARATOR or PROPERTY_SEPARATOR, k < 64
   (p[0:64] must lie inside the view). */
static inline void
separator_masks(const uint8_t *p, uint64_t *ones, uint64_t *twos)
{
    const __m128i c1 = _mm_set1_epi8(NAME_VALUE_SEPARATOR), c2 = _mm_set1_epi8(PROPERTY_SEPARATOR);
    uint64_t a = 0, b = 0;
    for (int k = 0; k < 4; k++) {
        __m128i v = _mm_loadu_si128((const __m128i *)(p + 16 * k));
        a |= (uint64_t)(uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(v, c1)) << (16 * k);
        b |= (uint64_t)(uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(v, c2)) << (16 * k);
    }
    *ones = a;
    *twos = b;
}
#endif

/*
 * property_columns(view, starts, lengths, item_offsets, names, name_data, values, value_data,
 *                  tags, tag_data, tag_valid, token_offsets, tokens, token_data, keys, key_data,
 *                  key_valid) -> (items, tokens, tag_nulls, key_nulls)
 *
 * The property columns of n messages in one pass over their properties strings
 * view[starts[i]:+lengths[i]], split as split_properties splits them, their bytes copied while
 * they are in the cache: names/name_data and values/value_data (int32 offsets, items + 1, and
 * bytes: every message's items in order, item_offsets n + 1 delimiting each message's), tags
 * (offsets n + 1; tag_valid 0 for a message without TAGS), the non-empty KEYS tokens
 * (token_offsets n + 1 delimiting each message's in tokens/token_data) and keys, each message's
 * first token (key_valid 0 without one).  Data outputs of sum(lengths) bytes and offsets of
 * sum(lengths) // 2 + n + 1 always do (ValueError when an output is too small).  Releases the GIL.
 */
static PyObject *
property_columns(PyObject *module, PyObject *args)
{
    Py_buffer b[17];
    if (!PyArg_ParseTuple(args, "y*y*y*w*w*w*w*w*w*w*w*w*w*w*w*w*w*", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5],
                          &b[6], &b[7], &b[8], &b[9], &b[10], &b[11], &b[12], &b[13], &b[14], &b[15], &b[16])) {
        return NULL;
    }
    const uint8_t *d = b[0].buf;
    const int64_t *starts = b[1].buf;
    const int32_t *lens = b[2].buf;
    int32_t *item_off = b[3].buf, *token_off = b[11].buf;
    uint8_t *tag_valid = b[10].buf, *key_valid = b[16].buf;
    Py_ssize_t n = b[2].len / (Py_ssize_t)sizeof(int32_t);
#define OUT_COLUMN(k) {b[k].buf, b[(k) + 1].buf, 0, b[k].len / (Py_ssize_t)sizeof(int32_t), 0, b[(k) + 1].len}
    OutColumn names = OUT_COLUMN(4), values = OUT_COLUMN(6), tags = OUT_COLUMN(8), tokens = OUT_COLUMN(12),
              keys = OUT_COLUMN(14);
#undef OUT_COLUMN
    int ok = b[1].len == n * 8 && b[3].len >= (n + 1) * 4 && b[11].len >= (n + 1) * 4 && b[10].len >= n &&
             b[16].len >= n && tags.off_cap >= n + 1 && keys.off_cap >= n + 1 && names.off_cap >= 1 &&
             values.off_cap >= 1 && tokens.off_cap >= 1;
    Py_ssize_t tag_nulls = 0, key_nulls = 0;
    ItemList items = {NULL, 0, 0};
    Py_BEGIN_ALLOW_THREADS
    if (ok) {
        item_off[0] = token_off[0] = 0;
        names.off[0] = values.off[0] = tags.off[0] = tokens.off[0] = keys.off[0] = 0;
    }
    for (Py_ssize_t i = 0; ok > 0 && i < n; i++) {
        int64_t s = starts[i], e = s + lens[i];
        if (s < 0 || lens[i] < 0 || e > b[0].len) {
            ok = 0;
            break;
        }
        if (i + PREFETCH_AHEAD < n) {
            PREFETCH(d, b[0].len, starts[i + PREFETCH_AHEAD]);
        }
        items.m = 0;        /* the message's items, a repeated name in its first place */
#ifdef HAVE_SEPARATOR_MASKS
        if (lens[i] < 64 && s + 64 <= b[0].len) {     /* the usual short properties: no call */
            uint64_t ones, twos, len = (uint64_t)lens[i];
            separator_masks(d + s, &ones, &twos);
            uint64_t inside = (1ull << len) - 1;
            ones &= inside;
            twos = (twos & inside) | (1ull << len);     /* the end closes the last item */
            for (uint64_t a = 0; len > 0;) {
                uint64_t from_a = ~((1ull << a) - 1);
                uint64_t end = (uint64_t)__builtin_ctzll(twos & from_a);
                uint64_t seps = ones & from_a & ((1ull << end) - 1);
                if (seps && !take_item(&items, d, s + (int64_t)a, s + __builtin_ctzll(seps), s + (int64_t)end)) {
                    ok = -1;
                    break;
                }
                if (end >= len) {
                    break;
                }
                a = end + 1;
            }
        } else
#endif
        {
            int64_t p = s, item, sep, item_end;
            while (lens[i] > 0 && next_item(d, &p, e, &item, &sep, &item_end)) {
                if (sep >= 0 && !take_item(&items, d, item, sep, item_end)) {
                    ok = -1;
                    break;
                }
            }
        }
        if (ok < 0) {
            break;
        }
        PropItem *scratch = items.items;
        Py_ssize_t m = items.m;
        const PropItem *tag = NULL, *key_list = NULL;
        for (Py_ssize_t k = 0; ok > 0 && k < m; k++) {
            const PropItem *it = &scratch[k];
            if (!out_put(&names, d + it->name, it->name_len) || !out_put(&values, d + it->value, it->value_len)) {
                ok = 0;
                break;
            }
            if (it->name_len == PROPERTY_NAME_LEN) {
                if (same_text(d + it->name, (const uint8_t *)"TAGS", PROPERTY_NAME_LEN)) {
                    tag = it;
                } else if (same_text(d + it->name, (const uint8_t *)"KEYS", PROPERTY_NAME_LEN)) {
                    key_list = it;
                }
            }
        }
        if (ok <= 0) {
            break;
        }
        item_off[i + 1] = (int32_t)names.count;
        tag_valid[i] = tag != NULL;
        if (!out_put(&tags, tag ? d + tag->value : d, tag ? tag->value_len : 0)) {
            ok = 0;
            break;
        }
        tag_nulls += tag == NULL;
        Py_ssize_t first = tokens.count;
        if (key_list != NULL) {
            int64_t t = key_list->value, te = t + key_list->value_len;
            while (t < te) {
                int64_t tok_end = t;
                while (tok_end < te && d[tok_end] != KEY_SEPARATOR) {
                    tok_end++;
                }
                if (tok_end > t && !out_put(&tokens, d + t, tok_end - t)) {
                    ok = 0;
                    break;
                }
                t = tok_end + 1;
            }
        }
        token_off[i + 1] = (int32_t)tokens.count;
        int has_key = tokens.count > first;
        key_valid[i] = (uint8_t)has_key;
        key_nulls += !has_key;
        if (ok <= 0 || !out_put(&keys, has_key ? tokens.data + tokens.off[first] : d,
                                has_key ? tokens.off[first + 1] - tokens.off[first] : 0)) {
            ok = ok < 0 ? ok : 0;
            break;
        }
    }
    Py_END_ALLOW_THREADS
    free(items.items);
    for (int k = 0; k < 17; k++) {
        PyBuffer_Release(&b[k]);
    }
    if (ok < 0) {
        return PyErr_NoMemory();
    }
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "expected properties inside the view and outputs of the documented sizes");
        return NULL;
    }
    return Py_BuildValue("nnnn", names.count, tokens.count, tag_nulls, key_nulls);
}

static const char HEX_UPPER[] = "0123456789ABCDEF";
static const char HEX_LOWER[] = "0123456789abcdef";
/* Each byte as two uppercase hex digits (a msgId's physical offset: 8 lookups, not 16 digit steps). */
static const char HEX_PAIRS[] =
    "000102030405060708090A0B0C0D0E0F101112131415161718191A1B1C1D1E1F202122232425262728292A2B2C2D2E2F"
    "303132333435363738393A3B3C3D3E3F404142434445464748494A4B4C4D4E4F505152535455565758595A5B5C5D5E5F"
    "606162636465666768696A6B6C6D6E6F707172737475767778797A7B7C7D7E7F808182838485868788898A8B8C8D8E8F"
    "909192939495969798999A9B9C9D9E9FA0A1A2A3A4A5A6A7A8A9AAABACADAEAFB0B1B2B3B4B5B6B7B8B9BABBBCBDBEBF"
    "C0C1C2C3C4C5C6C7C8C9CACBCCCDCECFD0D1D2D3D4D5D6D7D8D9DADBDCDDDEDFE0E1E2E3E4E5E6E7E8E9EAEBECEDEEEF"
    "F0F1F2F3F4F5F6F7F8F9FAFBFCFDFEFF";

static uint8_t *
put_decimal(uint8_t *o, int64_t v)
{
    char tmp[24];
    int k = 0;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do {
        tmp[k++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0) {
        *o++ = '-';
    }
    while (k) {
        *o++ = (uint8_t)tmp[--k];
    }
    return o;
}

/*
 * format_hosts(i8, i4, u8, n, which, offsets, out) -> bytes used
 *
 * One string for each of the first n rows of the column blocks: which 0 the born
 * host, 1 the store host, as Host.__str__ ("a.b.c.d:port", "[x:x:x:x:x:x:x:x]:port"
 * as Java prints IPv6), 2 the msgId (uppercase hex of store IP, int port, long
 * physical offset).  offsets: n + 1 int32; out: at least the longest text each row's
 * kind can take (HOST_TEXT_V4 or HOST_TEXT_V6 for a host, MSG_ID_V4 or MSG_ID_V6 for a msgId:
 * columnar.host_text_bound).  A host equal to the previous row's is copied (stores hold few hosts).
 */
#define HOST_TEXT_V4 27     /* "255.255.255.255:-2147483648" */
#define HOST_TEXT_V6 53     /* "[ffff:...:ffff]:-2147483648" */
#define MSG_ID_V4 32
#define MSG_ID_V6 56
static PyObject *
format_hosts(PyObject *module, PyObject *args)
{
    Py_buffer i8, i4, u8, offsets, out;
    Py_ssize_t n;
    int which;
    if (!PyArg_ParseTuple(args, "y*y*y*niw*w*", &i8, &i4, &u8, &n, &which, &offsets, &out)) {
        return NULL;
    }
    Cols c;
    PyObject *ret = NULL;
    if (!cols_init(&c, &i8, &i4, &u8)) {
        goto done;
    }
    if (n < 0 || n > c.cap || offsets.len < (n + 1) * 4 || which < 0 || which > 2) {
        PyErr_SetString(PyExc_ValueError, "expected n <= capacity, which in 0..2 and outputs of n rows");
        goto done;
    }
    int32_t *off = offsets.buf;
    uint8_t *o0 = out.buf, *o = o0;
    int born = which == 0;
    const uint8_t *ips = born ? c.born_ip : c.store_ip;
    const int32_t *ports = c.i4[born ? C_BORN_PORT : C_STORE_PORT], *flags = c.i4[C_SYS_FLAG];
    const int64_t *phys = c.i8[C_PHYSICAL_OFFSET];
    int32_t v6_bit = born ? SYSFLAG_BORNHOST_V6 : SYSFLAG_STOREHOST_V6;
    Py_ssize_t need = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int v6 = (flags[i] & v6_bit) != 0;
        need += which == 2 ? (v6 ? MSG_ID_V6 : MSG_ID_V4) : (v6 ? HOST_TEXT_V6 : HOST_TEXT_V4);
    }
    if (out.len < need) {
        PyErr_SetString(PyExc_ValueError, "expected an output holding the longest text of every row");
        goto done;
    }
    off[0] = 0;
    Py_BEGIN_ALLOW_THREADS      /* plain C over buffers held until done: another scan step may run */
    for (Py_ssize_t i = 0; i < n; i++) {
        const uint8_t *ip = ips + i * IPV6_LEN;
        int32_t port = ports[i];
        int v6 = (flags[i] & v6_bit) != 0;
        if (which == 2) {
            int len = v6 ? IPV6_LEN : IPV4_LEN;
            if (i > 0 && port == ports[i - 1] && v6 == ((flags[i - 1] & v6_bit) != 0) &&
                memcmp(ip, ip - IPV6_LEN, IPV6_LEN) == 0) {
                memcpy(o, o - (off[i] - off[i - 1]), (size_t)(2 * (len + 4)));   /* same host: same prefix */
                o += 2 * (len + 4);
            } else {
                for (int k = 0; k < len; k++) {
                    *o++ = (uint8_t)HEX_UPPER[ip[k] >> 4];
                    *o++ = (uint8_t)HEX_UPPER[ip[k] & 15];
                }
                uint8_t p4[4];
                put_i32(p4, port);
                for (int k = 0; k < 4; k++) {
                    *o++ = (uint8_t)HEX_UPPER[p4[k] >> 4];
                    *o++ = (uint8_t)HEX_UPPER[p4[k] & 15];
                }
            }
            uint64_t u = (uint64_t)phys[i];
            for (int shift = 56; shift >= 0; shift -= 8) {
                memcpy(o, HEX_PAIRS + 2 * ((u >> shift) & 0xFF), 2);
                o += 2;
            }
        } else if (i > 0 && port == ports[i - 1] && v6 == ((flags[i - 1] & v6_bit) != 0) &&
                   memcmp(ip, ip - IPV6_LEN, IPV6_LEN) == 0) {
            int32_t len = off[i] - off[i - 1];
            memcpy(o, o - len, (size_t)len);
            o += len;
        } else if (v6) {
            *o++ = '[';
            for (int g = 0; g < 8; g++) {
                unsigned v = ((unsigned)ip[2 * g] << 8) | ip[2 * g + 1];
                int started = 0;
                for (int shift = 12; shift >= 0; shift -= 4) {
                    unsigned nib = (v >> shift) & 15;
                    if (nib || started || shift == 0) {
                        *o++ = (uint8_t)HEX_LOWER[nib];
                        started = 1;
                    }
                }
                if (g < 7) {
                    *o++ = ':';
                }
            }
            *o++ = ']';
            *o++ = ':';
            o = put_decimal(o, port);
        } else {
            for (int k = 0; k < IPV4_LEN; k++) {
                o = put_decimal(o, ip[k]);
                *o++ = k < IPV4_LEN - 1 ? '.' : ':';
            }
            o = put_decimal(o, port);
        }
        off[i + 1] = (int32_t)(o - o0);
    }
    Py_END_ALLOW_THREADS
    ret = PyLong_FromSsize_t(o - o0);
done:
    PyBuffer_Release(&i8);
    PyBuffer_Release(&i4);
    PyBuffer_Release(&u8);
    PyBuffer_Release(&offsets);
    PyBuffer_Release(&out);
    return ret;
}

#define TRANSACTION_TYPE_MASK 0xC
#define TRANSACTION_ROLLBACK_TYPE 0xC

/* Java String.hashCode continued from h over the UTF-16 code units of UTF-8 s[0:n] (already validated). */
static uint32_t
java_hash_utf8(uint32_t h, const uint8_t *s, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    while (i < n) {
        uint32_t c = s[i], cp;
        if (c < 0x80) {
            cp = c;
            i += 1;
        } else if (c < 0xE0) {
            cp = ((c & 0x1F) << 6) | (s[i + 1] & 0x3F);
            i += 2;
        } else if (c < 0xF0) {
            cp = ((c & 0x0F) << 12) | ((uint32_t)(s[i + 1] & 0x3F) << 6) | (s[i + 2] & 0x3F);
            i += 3;
        } else {
            cp = ((c & 0x07) << 18) | ((uint32_t)(s[i + 1] & 0x3F) << 12) | ((uint32_t)(s[i + 2] & 0x3F) << 6) |
                 (s[i + 3] & 0x3F);
            i += 4;
        }
        if (cp > 0xFFFF) {
            cp -= 0x10000;
            h = h * 31u + (0xD800u + (cp >> 10));
            h = h * 31u + (0xDC00u + (cp & 0x3FF));
        } else {
            h = h * 31u + cp;
        }
    }
    return h;
}

/* The properties decode needs per message: TAGS, KEYS, UNIQ_KEY. */
enum { P_TAGS, P_KEYS, P_UNIQ_KEY, N_KNOWN };
typedef struct {
    const uint8_t *value;
    int32_t len;        /* -1: none */
} Known;

/*
 * TAGS, KEYS and UNIQ_KEY of properties p[0:len] in one pass over the bytes: for each
 * the value of the last item of that name (message.decode_properties keeps the last), len -1 when none.
 */
static void
known_properties(const uint8_t *p, int32_t len, Known out[N_KNOWN])
{
    for (int k = 0; k < N_KNOWN; k++) {
        out[k].value = NULL;
        out[k].len = -1;
    }
    /* an item at a time (memchr finds its end): only an item whose name is one of the three can
       matter, and its name ends at its first NAME_VALUE_SEPARATOR, so the name's bytes and the
       separator after them tell it */
    for (int32_t item = 0; item <= len;) {
        const uint8_t *q = memchr(p + item, PROPERTY_SEPARATOR, (size_t)(len - item));
        int32_t end = q ? (int32_t)(q - p) : len, item_len = end - item, name_len = 0;
        const uint8_t *it = p + item;
        int k = -1;
        if (item_len > PROPERTY_NAME_LEN && it[PROPERTY_NAME_LEN] == NAME_VALUE_SEPARATOR) {
            if (memcmp(it, "TAGS", PROPERTY_NAME_LEN) == 0) {
                k = P_TAGS;
            } else if (memcmp(it, "KEYS", PROPERTY_NAME_LEN) == 0) {
                k = P_KEYS;
            }
            name_len = PROPERTY_NAME_LEN;
        } else if (item_len > 8 && it[8] == NAME_VALUE_SEPARATOR && memcmp(it, "UNIQ_KEY", 8) == 0) {
            k = P_UNIQ_KEY;
            name_len = 8;
        }
        if (k >= 0) {
            out[k].value = it + name_len + 1;
            out[k].len = item_len - name_len - 1;
        }
        item = end + 1;
    }
}

/*
 * tags_hashes(view, props_pos, props_len, out) -> None
 *
 * Per message, the Java String.hashCode of its TAGS property (0 without TAGS or
 * for an empty one): a plain message's consume-queue tags code.  The properties
 * must have passed decode_region (valid UTF-8).
 */
static PyObject *
tags_hashes(PyObject *module, PyObject *args)
{
    Py_buffer view, pos, len, tags;
    if (!PyArg_ParseTuple(args, "y*y*y*w*", &view, &pos, &len, &tags)) {
        return NULL;
    }
    Py_ssize_t n = len.len / (Py_ssize_t)sizeof(int32_t);
    const int64_t *ps = pos.buf;
    const int32_t *ls = len.buf;
    int64_t *th = tags.buf;
    int ok = pos.len == n * 8 && tags.len >= n * 8;
    for (Py_ssize_t i = 0; ok && i < n; i++) {
        if (ps[i] < 0 || ls[i] < 0 || ps[i] + ls[i] > view.len) {
            ok = 0;
            break;
        }
        if (i + PREFETCH_AHEAD < n) {
            PREFETCH((const uint8_t *)view.buf, view.len, ps[i + PREFETCH_AHEAD]);
        }
        Known known[N_KNOWN];
        known_properties((const uint8_t *)view.buf + ps[i], ls[i], known);
        th[i] = known[P_TAGS].len > 0 ? (int64_t)(int32_t)java_hash_utf8(0, known[P_TAGS].value, known[P_TAGS].len) : 0;
    }
    PyBuffer_Release(&view);
    PyBuffer_Release(&pos);
    PyBuffer_Release(&len);
    PyBuffer_Release(&tags);
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "expected properties inside the view and an output of n rows");
        return NULL;
    }
    Py_RETURN_NONE;
}

/*
 * index_entries(view, topic_pos, topic_len, props_pos, props_len, sys_flag, counts, hashes, tags) -> total
 *
 * tags: each message's TAGS hash as tags_hashes gives it (n int64), found in the same
 * pass over the properties.
 *
 * The IndexFile entries the broker puts for each message (IndexService.buildIndex):
 * none for a rollback transaction, else topic#UNIQ_KEY (when the property is
 * there) then topic#token for each non-empty space-separated KEYS token, each as
 * the index hash abs(String.hashCode), MIN_VALUE -> 0.  counts: entries per
 * message (n int32); hashes: the entries in order.  Returns -1 when hashes is too
 * small (sum(props_len) // 2 + n always does).  The fields must have passed
 * decode_region (valid UTF-8).
 */
static PyObject *
index_entries(PyObject *module, PyObject *args)
{
    Py_buffer view, tpos, tlen, ppos, plen, flags, counts, hashes, tags;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*y*w*w*w*", &view, &tpos, &tlen, &ppos, &plen, &flags, &counts, &hashes,
                          &tags)) {
        return NULL;
    }
    Py_ssize_t n = tlen.len / (Py_ssize_t)sizeof(int32_t), cap = hashes.len / (Py_ssize_t)sizeof(int64_t);
    const int64_t *tp = tpos.buf, *pp = ppos.buf;
    const int32_t *tl = tlen.buf, *pl = plen.buf, *sf = flags.buf;
    int32_t *cnt = counts.buf;
    int64_t *out = hashes.buf;
    const uint8_t *d = view.buf;
    int64_t *th = tags.buf;
    int ok = tpos.len == n * 8 && ppos.len == n * 8 && plen.len == n * 4 && flags.len == n * 4 && counts.len >= n * 4 &&
             tags.len >= n * 8;
    Py_ssize_t total = 0;
    /* messages of a batch mostly share their topic: its hash is computed again only when it changes */
    const uint8_t *last_topic = NULL;
    int32_t last_topic_len = -1;
    uint32_t prefix = 0;
    /* no Python object inside: a conversion's reading thread runs meanwhile */
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; ok && total >= 0 && i < n; i++) {
        if (tp[i] < 0 || tl[i] < 0 || tp[i] + tl[i] > view.len || pp[i] < 0 || pl[i] < 0 ||
            pp[i] + pl[i] > view.len) {
            ok = 0;
            break;
        }
        if (i + PREFETCH_AHEAD < n) {
            PREFETCH(d, view.len, pp[i + PREFETCH_AHEAD]);
        }
        cnt[i] = 0;
        Known known[N_KNOWN];
        known_properties(d + pp[i], pl[i], known);
        th[i] = known[P_TAGS].len > 0 ? (int64_t)(int32_t)java_hash_utf8(0, known[P_TAGS].value, known[P_TAGS].len) : 0;
        if ((sf[i] & TRANSACTION_TYPE_MASK) == TRANSACTION_ROLLBACK_TYPE) {
            continue;
        }
        if (tl[i] != last_topic_len || memcmp(d + tp[i], last_topic, (size_t)tl[i]) != 0) {
            last_topic = d + tp[i];
            last_topic_len = tl[i];
            prefix = java_hash_utf8(0, last_topic, last_topic_len) * 31u + TOPIC_KEY_SEPARATOR;
        }
        const uint8_t *v = known[P_UNIQ_KEY].value;
        int32_t vl = known[P_UNIQ_KEY].len;
        if (vl >= 0) {
            if (total >= cap) {
                total = -1;
                break;
            }
            out[total++] = index_hash(java_hash_utf8(prefix, v, vl));
            cnt[i]++;
        }
        v = known[P_KEYS].value;
        vl = known[P_KEYS].len;
        const uint8_t *t = v, *te = v + (vl > 0 ? vl : 0);
        while (vl > 0 && t < te) {
            const uint8_t *sp = memchr(t, KEY_SEPARATOR, (size_t)(te - t));
            const uint8_t *tok_end = sp ? sp : te;
            if (tok_end > t) {
                if (total >= cap) {
                    total = -1;
                    break;
                }
                out[total++] = index_hash(java_hash_utf8(prefix, t, tok_end - t));
                cnt[i]++;
            }
            t = tok_end + 1;
        }
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    PyBuffer_Release(&tpos);
    PyBuffer_Release(&tlen);
    PyBuffer_Release(&ppos);
    PyBuffer_Release(&plen);
    PyBuffer_Release(&flags);
    PyBuffer_Release(&counts);
    PyBuffer_Release(&hashes);
    PyBuffer_Release(&tags);
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "expected fields inside the view and outputs of n rows");
        return NULL;
    }
    return PyLong_FromSsize_t(total);
}

/* FNV-1a of s[0:n]: the hash of a topic in topic_codes' table. */
static inline uint32_t
fnv1a(const uint8_t *s, int32_t n)
{
    uint32_t h = 2166136261u;
    for (int32_t i = 0; i < n; i++) {
        h = (h ^ s[i]) * 16777619u;
    }
    return h;
}

/*
 * topic_codes(view, topic_pos, topic_len, codes) -> list of first rows
 *
 * Number the rows' topics view[topic_pos[i]:+topic_len[i]] 0, 1, ... in order of first
 * appearance into codes (n int32); returns, for each number, the first row holding it.  A
 * topic equal to the previous row's takes its number after one comparison (a batch mostly holds
 * one topic, or runs of one); others are found in a hash table built at the first change.
 * Every slice is bounds-checked.  Releases the GIL.
 */
static PyObject *
topic_codes(PyObject *module, PyObject *args)
{
    Py_buffer view, tpos, tlen, codes;
    if (!PyArg_ParseTuple(args, "y*y*y*w*", &view, &tpos, &tlen, &codes)) {
        return NULL;
    }
    Py_ssize_t n = tlen.len / (Py_ssize_t)sizeof(int32_t);
    const int64_t *tp = tpos.buf;
    const int32_t *tl = tlen.buf;
    int32_t *out = codes.buf;
    const uint8_t *d = view.buf;
    PyObject *ret = NULL;
    int ok = tpos.len == n * 8 && codes.len >= n * 4 && n < INT32_MAX;
    Py_ssize_t *firsts = ok ? PyMem_RawMalloc((size_t)(n > 0 ? n : 1) * sizeof(Py_ssize_t)) : NULL;
    int32_t *table = NULL;      /* numbers by hash, open addressing; -1: free */
    size_t mask = 0;
    int32_t k = 0, last = -1;
    if (ok && firsts == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; ok && i < n; i++) {
        if (tp[i] < 0 || tl[i] < 0 || tp[i] + tl[i] > view.len) {
            ok = 0;
            break;
        }
        if (i + PREFETCH_AHEAD < n) {
            PREFETCH(d, view.len, tp[i + PREFETCH_AHEAD]);
        }
        const uint8_t *t = d + tp[i];
        if (last >= 0 && tl[firsts[last]] == tl[i] && memcmp(d + tp[firsts[last]], t, (size_t)tl[i]) == 0) {
            out[i] = last;
            continue;
        }
        if (k > 0 && table == NULL) {       /* a second topic: index the numbers so far (one) */
            size_t size = 16;
            while (size < 2 * (size_t)n) {
                size <<= 1;
            }
            table = malloc(size * sizeof(int32_t));
            if (table == NULL) {
                ok = -1;
                break;
            }
            memset(table, 0xFF, size * sizeof(int32_t));
            mask = size - 1;
            for (int32_t j = 0; j < k; j++) {
                size_t h = fnv1a(d + tp[firsts[j]], tl[firsts[j]]) & mask;
                while (table[h] >= 0) {
                    h = (h + 1) & mask;
                }
                table[h] = j;
            }
        }
        int32_t found = -1;
        size_t h = 0;
        if (table != NULL) {
            h = fnv1a(t, tl[i]) & mask;
            for (; table[h] >= 0; h = (h + 1) & mask) {
                Py_ssize_t f = firsts[table[h]];
                if (tl[f] == tl[i] && memcmp(d + tp[f], t, (size_t)tl[i]) == 0) {
                    found = table[h];
                    break;
                }
            }
        }
        if (found < 0) {
            found = k;
            firsts[k++] = i;
            if (table != NULL) {
                table[h] = found;
            }
        }
        out[i] = last = found;
    }
    Py_END_ALLOW_THREADS
    if (ok < 0) {
        PyErr_NoMemory();
    } else if (!ok) {
        PyErr_SetString(PyExc_ValueError, "expected topics inside the view and an output of n rows");
    } else if ((ret = PyList_New(k)) != NULL) {
        for (int32_t j = 0; j < k; j++) {
            PyObject *v = PyLong_FromSsize_t(firsts[j]);
            if (v == NULL) {
                Py_CLEAR(ret);
                break;
            }
            PyList_SET_ITEM(ret, j, v);
        }
    }
done:
    free(table);
    PyMem_RawFree(firsts);
    PyBuffer_Release(&view);
    PyBuffer_Release(&tpos);
    PyBuffer_Release(&tlen);
    PyBuffer_Release(&codes);
    return ret;
}

/* ------------------------------------------------------------------------------ */
/* dump --json */

static inline uint8_t *
put_text_n(uint8_t *o, const char *s, size_t n)
{
    memcpy(o, s, n);
    return o + n;
}

/* A string literal, its length known at compile time. */
#define put_text(o, lit) put_text_n((o), (lit), sizeof(lit) - 1)

/* s[0:n] as a JSON string as json.dumps(ensure_ascii=False) writes it. */
static uint8_t *
put_json_string(uint8_t *o, const uint8_t *s, Py_ssize_t n)
{
    *o++ = '"';
    for (Py_ssize_t i = 0; i < n; i++) {
        uint8_t c = s[i];
        if (c >= 0x20 && c != '"' && c != '\\') {
            *o++ = c;
            continue;
        }
        *o++ = '\\';
        switch (c) {
        case '"': *o++ = '"'; break;
        case '\\': *o++ = '\\'; break;
        case '\n': *o++ = 'n'; break;
        case '\r': *o++ = 'r'; break;
        case '\t': *o++ = 't'; break;
        case '\b': *o++ = 'b'; break;
        case '\f': *o++ = 'f'; break;
        default:
            o = put_text(o, "u00");
            *o++ = (uint8_t)HEX_LOWER[c >> 4];
            *o++ = (uint8_t)HEX_LOWER[c & 15];
        }
    }
    *o++ = '"';
    return o;
}

#define put_field_int(o, lit, v) put_decimal(put_text((o), (lit)), (v))

/*
 * json_lines(view, i8, i4, u8, n, tags_codes, item_offsets, names, name_lens, values, value_lens,
 *            tags, tags_lens, token_offsets, tokens, token_lens, born_offsets, born, store_offsets,
 *            store, id_offsets, ids, out) -> bytes written, or -(bytes needed)
 *
 * One ``dump --json`` line per row (store.JSON_KEYS, as json.dumps(to_json(msg),
 * ensure_ascii=False) + "\n" writes it) into the caller's buffer out (reused from
 * batch to batch): the rows' fields, the body in base64, the properties split by
 * split_properties, the tags codes given, the host and msgId texts of
 * format_hosts.  When out may be too small nothing is written and the negated
 * size it needs is returned.
 */
static PyObject *
json_lines(PyObject *module, PyObject *args)
{
    enum { V, I8, I4, U8, CODES, ITEM_OFF, NAMES, NAME_LENS, VALUES, VALUE_LENS, TAGS, TAGS_LENS, TOK_OFF, TOKS,
           TOK_LENS, BORN_OFF, BORN, STORE_OFF, STORE, ID_OFF, IDS, OUT, NB };
    Py_buffer b[NB];
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "y*y*y*y*ny*y*y*y*y*y*y*y*y*y*y*y*y*y*y*y*y*w*", &b[V], &b[I8], &b[I4], &b[U8], &n,
                          &b[CODES], &b[ITEM_OFF], &b[NAMES], &b[NAME_LENS], &b[VALUES], &b[VALUE_LENS], &b[TAGS],
                          &b[TAGS_LENS], &b[TOK_OFF], &b[TOKS], &b[TOK_LENS], &b[BORN_OFF], &b[BORN], &b[STORE_OFF],
                          &b[STORE], &b[ID_OFF], &b[IDS], &b[OUT])) {
        return NULL;
    }
    PyObject *ret = NULL;
    Cols c;
    if (!cols_init(&c, &b[I8], &b[I4], &b[U8])) {
        goto done;
    }
    if (n < 0 || n > c.cap || b[CODES].len < n * 8 || b[ITEM_OFF].len < (n + 1) * 4 || b[TOK_OFF].len < (n + 1) * 4 ||
        b[TAGS].len < n * 8 || b[TAGS_LENS].len < n * 4 || b[BORN_OFF].len < (n + 1) * 4 ||
        b[STORE_OFF].len < (n + 1) * 4 || b[ID_OFF].len < (n + 1) * 4) {
        PyErr_SetString(PyExc_ValueError, "expected columns of n rows");
        goto done;
    }
    const uint8_t *d = b[V].buf;
    int64_t **i8 = c.i8;
    int32_t **i4 = c.i4;
    const int64_t *codes = b[CODES].buf, *names = b[NAMES].buf, *values = b[VALUES].buf, *tags = b[TAGS].buf;
    const int64_t *toks = b[TOKS].buf;
    const int32_t *item_off = b[ITEM_OFF].buf, *name_lens = b[NAME_LENS].buf, *value_lens = b[VALUE_LENS].buf;
    const int32_t *tags_lens = b[TAGS_LENS].buf, *tok_off = b[TOK_OFF].buf, *tok_lens = b[TOK_LENS].buf;
    const int32_t *host_off[3] = {b[BORN_OFF].buf, b[STORE_OFF].buf, b[ID_OFF].buf};
    const uint8_t *host_data[3] = {b[BORN].buf, b[STORE].buf, b[IDS].buf};
    /* every slice must lie in the view and every item/token index in its column */
    Py_ssize_t items = b[NAME_LENS].len / 4, ntoks = b[TOK_LENS].len / 4;
    int64_t bound = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (i8[C_BODY_POS][i] < 0 || i8[C_BODY_POS][i] + i4[C_BODY_LEN][i] > b[V].len || i8[C_TOPIC_POS][i] < 0 ||
            i8[C_TOPIC_POS][i] + i4[C_TOPIC_LEN][i] > b[V].len || item_off[i + 1] > items || tok_off[i + 1] > ntoks ||
            item_off[i] > item_off[i + 1] || tok_off[i] > tok_off[i + 1] ||
            (tags_lens[i] > 0 && tags[i] + tags_lens[i] > b[V].len)) {
            PyErr_SetString(PyExc_ValueError, "expected slices inside the view and item indexes inside their columns");
            goto done;
        }
        bound += 768 + 4 * ((int64_t)i4[C_BODY_LEN][i] / 3 + 1) + 6 * (int64_t)i4[C_TOPIC_LEN][i] +
                 24 * (int64_t)i4[C_PROPS_LEN][i] + 16 * (int64_t)(tok_off[i + 1] - tok_off[i]);
    }
    for (Py_ssize_t k = 0; k < items; k++) {
        if (names[k] < 0 || names[k] + name_lens[k] > b[V].len || values[k] < 0 ||
            values[k] + value_lens[k] > b[V].len) {
            PyErr_SetString(PyExc_ValueError, "expected properties inside the view");
            goto done;
        }
    }
    for (Py_ssize_t k = 0; k < ntoks; k++) {
        if (toks[k] < 0 || toks[k] + tok_lens[k] > b[V].len) {
            PyErr_SetString(PyExc_ValueError, "expected tokens inside the view");
            goto done;
        }
    }
    for (int h = 0; h < 3; h++) {
        bound += host_off[h][n];
    }
    if (bound > b[OUT].len) {
        ret = PyLong_FromLongLong(-(long long)bound);
        goto done;
    }
    uint8_t *o0 = b[OUT].buf, *o = o0;
    for (Py_ssize_t i = 0; i < n; i++) {
        o = put_text(o, "{\"topic\": ");
        o = put_json_string(o, d + i8[C_TOPIC_POS][i], i4[C_TOPIC_LEN][i]);
        o = put_field_int(o, ", \"queue_id\": ", i4[C_QUEUE_ID][i]);
        o = put_field_int(o, ", \"queue_offset\": ", i8[C_QUEUE_OFFSET][i]);
        o = put_field_int(o, ", \"physical_offset\": ", i8[C_PHYSICAL_OFFSET][i]);
        o = put_field_int(o, ", \"size\": ", i4[C_SIZE][i]);
        o = put_field_int(o, ", \"body_crc\": ", i4[C_BODY_CRC][i]);
        o = put_field_int(o, ", \"flag\": ", i4[C_FLAG][i]);
        o = put_field_int(o, ", \"sys_flag\": ", i4[C_SYS_FLAG][i]);
        o = put_field_int(o, ", \"born_timestamp\": ", i8[C_BORN_TS][i]);
        o = put_text(o, ", \"born_host\": ");
        o = put_json_string(o, host_data[0] + host_off[0][i], host_off[0][i + 1] - host_off[0][i]);
        o = put_field_int(o, ", \"store_timestamp\": ", i8[C_STORE_TS][i]);
        o = put_text(o, ", \"store_host\": ");
        o = put_json_string(o, host_data[1] + host_off[1][i], host_off[1][i + 1] - host_off[1][i]);
        o = put_field_int(o, ", \"reconsume_times\": ", i4[C_RECONSUME][i]);
        o = put_field_int(o, ", \"prepared_transaction_offset\": ", i8[C_PREPARED][i]);
        o = put_text(o, ", \"body\": \"");
        o = put_base64(o, d + i8[C_BODY_POS][i], i4[C_BODY_LEN][i]);
        o = put_text(o, "\", \"properties\": {");
        for (int32_t k2 = item_off[i]; k2 < item_off[i + 1]; k2++) {
            if (k2 > item_off[i]) {
                o = put_text(o, ", ");
            }
            o = put_json_string(o, d + names[k2], name_lens[k2]);
            o = put_text(o, ": ");
            o = put_json_string(o, d + values[k2], value_lens[k2]);
        }
        o = put_text(o, "}, \"tags\": ");
        o = tags_lens[i] >= 0 ? put_json_string(o, d + tags[i], tags_lens[i]) : put_text(o, "null");
        o = put_text(o, ", \"keys\": [");
        for (int32_t k2 = tok_off[i]; k2 < tok_off[i + 1]; k2++) {
            if (k2 > tok_off[i]) {
                o = put_text(o, ", ");
            }
            o = put_json_string(o, d + toks[k2], tok_lens[k2]);
        }
        o = put_field_int(o, "], \"tags_code\": ", codes[i]);
        o = put_text(o, ", \"msg_id\": ");
        o = put_json_string(o, host_data[2] + host_off[2][i], host_off[2][i + 1] - host_off[2][i]);
        o = put_text(o, "}\n");
    }
    ret = PyLong_FromSsize_t(o - o0);
done:
    for (int k = 0; k < NB; k++) {
        PyBuffer_Release(&b[k]);
    }
    return ret;
}

/* ------------------------------------------------------------------------------ */
/* init */

static PyObject *
init(PyObject *module, PyObject *cls)
{
    if (!PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "init() takes the AppendResult class");
        return NULL;
    }
    Py_ssize_t offsets[N_RESULT_FIELDS];
    for (int i = 0; i < N_RESULT_FIELDS; i++) {
        PyObject *descr = PyObject_GetAttrString(cls, RESULT_FIELDS[i]);
        if (descr == NULL) {
            return NULL;
        }
        int ok = Py_IS_TYPE(descr, &PyMemberDescr_Type) &&
                 ((PyMemberDescrObject *)descr)->d_member->type == T_OBJECT_EX &&
                 !(((PyMemberDescrObject *)descr)->d_member->flags & READONLY);
        if (ok) {
            offsets[i] = ((PyMemberDescrObject *)descr)->d_member->offset;
        }
        Py_DECREF(descr);
        if (!ok) {
            PyErr_Format(PyExc_TypeError, "AppendResult.%s must be a __slots__ member", RESULT_FIELDS[i]);
            return NULL;
        }
    }
    memcpy(result_offset, offsets, sizeof(offsets));
    Py_INCREF(cls);
    Py_XSETREF(result_type, (PyTypeObject *)cls);
    Py_RETURN_NONE;
}

/*
 * header_lists(n, slots, props) -> (list_offsets, key_offsets, keys, value_offsets, values)
 *
 * The list<struct<key, value>> column of n rows whose row i holds, in order, one item per slot s
 * whose mask takes row i (mask None: every row) -- key the slot's name, value its row i -- then
 * row i's properties, each keyed prefix + name.  A slot is (name, kind, a, b, mask):
 *   kind 0: a is n int64, the value their decimal text;
 *   kind 1: a is n + 1 int32 offsets into the bytes b (an Arrow string/binary array's buffers);
 *   kind 2: a is the one value of every row (bytes).
 * props is (prefix, rows, name_offsets, names, value_offsets, values): rows n + 1 int64 item
 * offsets (row i holds items rows[i] to rows[i + 1]), the others Arrow buffers as for kind 1.
 * Returns the five buffers of the result (int32 offsets), as bytes.  Every offset is checked
 * against its buffer.  The fills run without the GIL.
 */
#define MAX_HEADER_SLOTS 32
typedef struct {
    Py_buffer name, a, b, mask;
    int kind, has_b, has_mask;
} HeaderSlot;

/* "00" to "99": two digits of a decimal text at a time. */
static const char DIGIT_PAIRS[] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

static const uint64_t POWERS_OF_TEN[20] = {
    1ull, 10ull, 100ull, 1000ull, 10000ull, 100000ull, 1000000ull, 10000000ull, 100000000ull,
    1000000000ull, 10000000000ull, 100000000000ull, 1000000000000ull, 10000000000000ull,
    100000000000000ull, 1000000000000000ull, 10000000000000000ull, 100000000000000000ull,
    1000000000000000000ull, 10000000000000000000ull,
};

/* The length of str(v): its digits from its bit length (bits * log10(2), then one comparison). */
static inline int
decimal_length(int64_t v)
{
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    if (u == 0) {
        return 1;
    }
    int t = ((64 - __builtin_clzll(u)) * 1233) >> 12;
    return t + (u >= POWERS_OF_TEN[t]) + (v < 0);
}

/* str(v) written at out (decimal_length(v) bytes), two digits at a time from the end. */
static inline int
decimal_text(int64_t v, char *out)
{
    int len = decimal_length(v);
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    char *p = out + len;
    while (u >= 100) {
        unsigned pair = (unsigned)(u % 100);
        u /= 100;
        p -= 2;
        memcpy(p, DIGIT_PAIRS + 2 * pair, 2);
    }
    if (u >= 10) {
        p -= 2;
        memcpy(p, DIGIT_PAIRS + 2 * u, 2);
    } else {
        *--p = (char)('0' + u);
    }
    if (v < 0) {
        out[0] = '-';
    }
    return len;
}

static int
span_ok(const int32_t *off, Py_ssize_t count, Py_ssize_t data_len)
{
    for (Py_ssize_t i = 0; i < count; i++) {
        if (off[i] < 0 || off[i + 1] < off[i] || off[i + 1] > data_len) {
            return 0;
        }
    }
    return 1;
}

static PyObject *
header_lists(PyObject *module, PyObject *args)
{
    Py_ssize_t n;
    PyObject *slots, *props;
    if (!PyArg_ParseTuple(args, "nO!O!", &n, &PyTuple_Type, &slots, &PyTuple_Type, &props)) {
        return NULL;
    }
    HeaderSlot h[MAX_HEADER_SLOTS];
    Py_ssize_t count = 0, want = PyTuple_GET_SIZE(slots);
    Py_buffer prefix, rows, name_off, names, value_off, values;
    int have_props = 0, ok = n >= 0 && want <= MAX_HEADER_SLOTS;
    PyObject *out[5] = {NULL, NULL, NULL, NULL, NULL}, *ret = NULL;
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "expected n >= 0 and at most 32 slots");
        return NULL;
    }
    if (!PyArg_ParseTuple(props, "y*y*y*y*y*y*", &prefix, &rows, &name_off, &names, &value_off, &values)) {
        return NULL;
    }
    have_props = 1;
    for (; ok && count < want; count++) {
        PyObject *spec = PyTuple_GET_ITEM(slots, count), *b, *mask;
        HeaderSlot *s = &h[count];
        if (!PyTuple_Check(spec) || !PyArg_ParseTuple(spec, "y*iy*OO", &s->name, &s->kind, &s->a, &b, &mask)) {
            ok = 0;
            break;
        }
        s->has_b = b != Py_None && PyObject_GetBuffer(b, &s->b, PyBUF_SIMPLE) == 0;
        s->has_mask = mask != Py_None && PyObject_GetBuffer(mask, &s->mask, PyBUF_SIMPLE) == 0;
        if (PyErr_Occurred() || (s->has_mask && s->mask.len != n) ||
            (s->kind == 0 && s->a.len != n * 8) ||
            (s->kind == 1 && (!s->has_b || s->a.len != (n + 1) * 4 || !span_ok(s->a.buf, n, s->b.len))) ||
            s->kind < 0 || s->kind > 2) {
            count++;
            ok = 0;
            break;
        }
    }
    const int64_t *row_items = rows.buf;
    Py_ssize_t m = 0;
    if (ok) {
        ok = rows.len == (n + 1) * 8 && row_items[0] >= 0;
        for (Py_ssize_t i = 0; ok && i < n; i++) {
            ok = row_items[i + 1] >= row_items[i];
        }
        m = ok ? row_items[n] : 0;
        ok = ok && name_off.len >= (m + 1) * 4 && value_off.len >= (m + 1) * 4 &&
             span_ok(name_off.buf, m, names.len) && span_ok(value_off.buf, m, values.len);
    }
    /* sizes: items, key bytes, value bytes */
    int64_t items = 0, key_bytes = 0, value_bytes = 0;
    if (ok) {
        for (Py_ssize_t k = 0; k < count; k++) {
            HeaderSlot *s = &h[k];
            const uint8_t *mk = s->has_mask ? s->mask.buf : NULL;
            int64_t rows_with = 0, bytes = 0;
            for (Py_ssize_t i = 0; i < n; i++) {
                if (mk && !mk[i]) {
                    continue;
                }
                rows_with++;
                if (s->kind == 0) {
                    bytes += decimal_length(((const int64_t *)s->a.buf)[i]);
                } else if (s->kind == 1) {
                    const int32_t *o = s->a.buf;
                    bytes += o[i + 1] - o[i];
                } else {
                    bytes += s->a.len;
                }
            }
            items += rows_with;
            key_bytes += rows_with * s->name.len;
            value_bytes += bytes;
        }
        const int32_t *no = name_off.buf, *vo = value_off.buf;
        int64_t i0 = row_items[0];
        items += m - i0;
        key_bytes += (int64_t)(m - i0) * prefix.len + (no[m] - no[i0]);
        value_bytes += vo[m] - vo[i0];
        if (items > INT32_MAX || key_bytes > INT32_MAX || value_bytes > INT32_MAX) {
            PyErr_SetString(PyExc_OverflowError, "expected header columns under 2 GiB");
            ok = 0;
        }
    } else if (!PyErr_Occurred()) {
        PyErr_SetString(PyExc_ValueError, "expected slots of n rows and offsets inside their buffers");
    }
    if (ok) {
        out[0] = PyBytes_FromStringAndSize(NULL, (n + 1) * 4);
        out[1] = PyBytes_FromStringAndSize(NULL, (items + 1) * 4);
        out[2] = PyBytes_FromStringAndSize(NULL, key_bytes);
        out[3] = PyBytes_FromStringAndSize(NULL, (items + 1) * 4);
        out[4] = PyBytes_FromStringAndSize(NULL, value_bytes);
        ok = out[0] && out[1] && out[2] && out[3] && out[4];
    }
    if (ok) {
        int32_t *lo = (int32_t *)PyBytes_AS_STRING(out[0]);
        int32_t *ko = (int32_t *)PyBytes_AS_STRING(out[1]);
        uint8_t *kd = (uint8_t *)PyBytes_AS_STRING(out[2]);
        int32_t *vo_out = (int32_t *)PyBytes_AS_STRING(out[3]);
        uint8_t *vd = (uint8_t *)PyBytes_AS_STRING(out[4]);
        const int32_t *no = name_off.buf, *vo = value_off.buf;
        const uint8_t *nd = names.buf, *vdata = values.buf;
        Py_BEGIN_ALLOW_THREADS
        int32_t item = 0, kat = 0, vat = 0;
        lo[0] = 0;
        ko[0] = 0;
        vo_out[0] = 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            for (Py_ssize_t k = 0; k < count; k++) {
                HeaderSlot *s = &h[k];
                if (s->has_mask && !((const uint8_t *)s->mask.buf)[i]) {
                    continue;
                }
                copy_short(kd + kat, s->name.buf, (size_t)s->name.len);
                kat += (int32_t)s->name.len;
                if (s->kind == 0) {
                    vat += decimal_text(((const int64_t *)s->a.buf)[i], (char *)vd + vat);
                } else if (s->kind == 1) {
                    const int32_t *o = s->a.buf;
                    int32_t len = o[i + 1] - o[i];
                    copy_short(vd + vat, (const uint8_t *)s->b.buf + o[i], (size_t)len);
                    vat += len;
                } else {
                    copy_short(vd + vat, s->a.buf, (size_t)s->a.len);
                    vat += (int32_t)s->a.len;
                }
                item++;
                ko[item] = kat;
                vo_out[item] = vat;
            }
            for (int64_t j = row_items[i]; j < row_items[i + 1]; j++) {
                copy_short(kd + kat, prefix.buf, (size_t)prefix.len);
                kat += (int32_t)prefix.len;
                copy_short(kd + kat, nd + no[j], (size_t)(no[j + 1] - no[j]));
                kat += no[j + 1] - no[j];
                copy_short(vd + vat, vdata + vo[j], (size_t)(vo[j + 1] - vo[j]));
                vat += vo[j + 1] - vo[j];
                item++;
                ko[item] = kat;
                vo_out[item] = vat;
            }
            lo[i + 1] = item;
        }
        Py_END_ALLOW_THREADS
        ret = PyTuple_Pack(5, out[0], out[1], out[2], out[3], out[4]);
    }
    for (int k = 0; k < 5; k++) {
        Py_XDECREF(out[k]);
    }
    for (Py_ssize_t k = 0; k < count; k++) {
        PyBuffer_Release(&h[k].name);
        PyBuffer_Release(&h[k].a);
        if (h[k].has_b) {
            PyBuffer_Release(&h[k].b);
        }
        if (h[k].has_mask) {
            PyBuffer_Release(&h[k].mask);
        }
    }
    if (have_props) {
        PyBuffer_Release(&prefix);
        PyBuffer_Release(&rows);
        PyBuffer_Release(&name_off);
        PyBuffer_Release(&names);
        PyBuffer_Release(&value_off);
        PyBuffer_Release(&values);
    }
    return ret;
}

/* The count bytes objects of the tuple names, each as a pointer and a length; 0 if names is not that. */
static int
texts_of(PyObject *names, Py_ssize_t count, const uint8_t **text, Py_ssize_t *len)
{
    if (PyTuple_GET_SIZE(names) != count) {
        return 0;
    }
    for (Py_ssize_t f = 0; f < count; f++) {
        PyObject *item = PyTuple_GET_ITEM(names, f);
        if (!PyBytes_Check(item)) {
            return 0;
        }
        text[f] = (const uint8_t *)PyBytes_AS_STRING(item);
        len[f] = PyBytes_GET_SIZE(item);
    }
    return 1;
}

/*
 * The rmq.* headers restore_headers reads, in the order of its names tuple: decimal ints (the first
 * RH_INTS; flag, sysFlag and reconsumeTimes within int32), the two IPv4 hosts, rmq.magic (v2: the
 * reference path), rmq.trailing_separator, and the reserved topic's rmq.topic and rmq.queue_id.
 */
enum {
    RH_PHYSICAL, RH_BORN_TIMESTAMP, RH_STORE_TIMESTAMP, RH_FLAG, RH_SYS_FLAG, RH_RECONSUME, RH_PREPARED,
    RH_QUEUE_OFFSET, RH_INTS, RH_BORN_HOST = RH_INTS, RH_STORE_HOST, RH_MAGIC, RH_TRAILING, RH_TOPIC,
    RH_QUEUE_ID, RH_FIELDS
};
#define RH_REQUIRED ((1u << RH_PHYSICAL) | (1u << RH_BORN_TIMESTAMP) | (1u << RH_STORE_TIMESTAMP) | \
                     (1u << RH_BORN_HOST) | (1u << RH_STORE_HOST))
/* Header positions in a row whose field restore_headers guesses from the row before; the property
 * headers of a row it keeps to look for a repeated name among (past them: every header before). */
enum { RH_GUESSES = 64, RH_ROW_PROPERTIES = 32 };
/* Why restore_headers declined a run (the reference path then decides): its status, 0 for none. */
enum {
    RH_OK, RH_MISSING, RH_REPEATED, RH_BAD_INT, RH_BAD_HOST, RH_V2, RH_NULL, RH_BAD_PROPERTY, RH_TOO_LONG,
};

/* Bytes below 3 (the property separators 0x01 and 0x02, or a zero) in a word of ASCII bytes. */
#define HAS_BELOW_3(w) (((w) - 0x0303030303030303ull) & ~(w) & ASCII_MASK)

/* Whether s[0:n] is UTF-8 (no surrogates: Arrow's string check) without either property
   separator: a property name or value restore_headers can write.  ASCII words take one test. */
static inline int
property_text(const uint8_t *s, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        if ((w & ASCII_MASK) || HAS_BELOW_3(w)) {
            break;
        }
    }
    for (; i < n && s[i] < 0x80; i++) {
        if (s[i] == NAME_VALUE_SEPARATOR || s[i] == PROPERTY_SEPARATOR) {
            return 0;
        }
    }
    return i == n || (valid_utf8(s + i, n - i, 0) && !memchr(s + i, NAME_VALUE_SEPARATOR, (size_t)(n - i)) &&
                      !memchr(s + i, PROPERTY_SEPARATOR, (size_t)(n - i)));
}

/* s[0:n] as int() reads a plain decimal ('-'? ASCII digits, as Arrow's cast to int64 takes them)
   within [lo, hi]; 0 for anything else. */
static int
parse_decimal(const uint8_t *s, int32_t n, int64_t lo, int64_t hi, int64_t *out)
{
    const int negative = n > 0 && s[0] == '-';
    int32_t k = negative;
    if (n - k < 1) {
        return 0;
    }
    while (n - k > 1 && s[k] == '0') {     /* leading zeros: at most 19 digits left fit in a uint64 */
        k++;
    }
    if (n - k > 19) {
        return 0;
    }
    uint64_t u = 0;
    for (int32_t i = k; i < n; i++) {
        unsigned digit = (unsigned)s[i] - '0';
        if (digit > 9) {
            return 0;
        }
        u = u * 10 + digit;
    }
    int64_t v;
    if (negative) {
        if (u > (uint64_t)INT64_MAX + 1) {
            return 0;
        }
        v = u == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)u;
    } else {
        if (u > (uint64_t)INT64_MAX) {
            return 0;
        }
        v = (int64_t)u;
    }
    if (v < lo || v > hi) {
        return 0;
    }
    *out = v;
    return 1;
}

/* s[0:n] as Host.parse reads "a.b.c.d:port" (octets without leading zeros, as ipaddress wants them;
   a port of digits in 0..65535); 0 for anything else, IPv6 included. */
static int
parse_ipv4_host(const uint8_t *s, int32_t n, uint8_t ip[IPV4_LEN], int64_t *port)
{
    int32_t colon = n - 1;
    while (colon >= 0 && s[colon] != ':') {
        colon--;
    }
    if (colon < 0) {
        return 0;
    }
    int32_t k = 0;
    for (int o = 0; o < IPV4_LEN; o++) {
        int32_t first = k;
        unsigned v = 0;
        while (k < colon && k - first < 3 && s[k] >= '0' && s[k] <= '9') {
            v = v * 10 + (unsigned)(s[k] - '0');
            k++;
        }
        if (k == first || v > 255 || (k - first > 1 && s[first] == '0')) {
            return 0;
        }
        ip[o] = (uint8_t)v;
        if (o < IPV4_LEN - 1) {
            if (k >= colon || s[k] != '.') {
                return 0;
            }
            k++;
        }
    }
    int64_t p;
    if (k != colon || n - colon - 1 > 9 || !parse_decimal(s + colon + 1, n - colon - 1, 0, 0xFFFF, &p) ||
        s[colon + 1] == '-') {
        return 0;
    }
    *port = p;
    return 1;
}

/*
 * restore_headers(item_offsets, key_offsets, keys, value_offsets, values, value_valid, names, prefix,
 *                 trailing_text, ints, ips, ports, trailing, places, prop_offsets, prop_data)
 *     -> (status, prop_bytes, topic_repeated, queue_repeated)
 *
 * The RocketMQ fields of n rows of a conversion's header lists (row i's headers are items
 * item_offsets[i]:item_offsets[i + 1]; keys and values as int32 Arrow offsets and data; value_valid
 * one byte per item, empty for no nulls), in one pass: the rmq.* headers named by names
 * (RH_FIELDS texts in the enum's order) parsed into ints (RH_INTS rows of n int64, the defaults
 * left where a row lacks an optional one), ips (born then store, n x 4 bytes each), ports (2 x n)
 * and trailing (n bytes); places (2 x n int64) the item of each row's rmq.topic and rmq.queue_id or
 * -1; and each row's prefix+NAME headers encoded as its properties (NAME 0x01 VALUE joined by 0x02,
 * a 0x02 after the last where trailing; a null value as empty) into prop_offsets (n + 1 int32) and
 * prop_data (room for keys + values + 2 per item).  status RH_OK, or why the run needs the
 * reference path: a required header missing, a header repeated, an int or host that does not
 * parse, rmq.magic, a null value, a property name repeated or not UTF-8 or with a separator, or
 * properties over MAX_PROPERTIES_BYTES.  ValueError for outputs of other sizes.  O(items), but a
 * row's property names are compared pairwise.  Releases the GIL.
 */
/*
 * first_headers(rows, key_offsets, keys, value_offsets, values, valid, name, marked, numbers) -> int
 *
 * Per row of a list<struct<key, value>> column (rows: n + 1 int64 item offsets from 0; the items'
 * Arrow buffers, int32 offsets; valid: b"" or one byte per item), whether its first header is
 * keyed ``name`` (marked[i], uint8) and that header's value as a plain decimal int64 (numbers[i];
 * -1 for a row not marked).  Returns how many marked rows hold a value that is not a plain decimal
 * in int64 (null included): their numbers[i] is -1 and the caller reads them as int() does.  The
 * walk runs without the GIL.  O(rows).
 */
static PyObject *
first_headers(PyObject *module, PyObject *args)
{
    Py_buffer b[9];
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*y*y*w*w*", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5], &b[6], &b[7],
                          &b[8])) {
        return NULL;
    }
    const int64_t *rows = b[0].buf;
    const int32_t *ko = b[1].buf, *vo = b[3].buf;
    const uint8_t *kd = b[2].buf, *vd = b[4].buf, *valid = b[5].buf, *name = b[6].buf;
    uint8_t *marked = b[7].buf;
    int64_t *numbers = b[8].buf;
    Py_ssize_t n = b[7].len, items = b[1].len / 4 - 1, name_len = b[6].len;
    int ok = b[0].len == (n + 1) * 8 && b[8].len == n * 8 && items >= 0 && b[3].len == b[1].len &&
             (b[5].len == 0 || b[5].len == items) && rows[0] >= 0 && rows[n] <= items;
    for (Py_ssize_t i = 0; ok && i < n; i++) {
        ok = rows[i + 1] >= rows[i];
    }
    Py_ssize_t unread = 0;
    if (ok) {
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; ok && i < n; i++) {
            int64_t j = rows[i];
            marked[i] = 0;
            numbers[i] = -1;
            if (j == rows[i + 1]) {
                continue;
            }
            /* only each row's first item is read: only its offsets are checked */
            ok = ko[j] >= 0 && ko[j + 1] >= ko[j] && ko[j + 1] <= b[2].len && vo[j] >= 0 && vo[j + 1] >= vo[j] &&
                 vo[j + 1] <= b[4].len;
            marked[i] = ok && ko[j + 1] - ko[j] == name_len && same_text(kd + ko[j], name, name_len);
            if (marked[i] && ((b[5].len && !valid[j]) ||
                              !parse_decimal(vd + vo[j], vo[j + 1] - vo[j], INT64_MIN, INT64_MAX, &numbers[i]))) {
                numbers[i] = -1;
                unread++;
            }
        }
        Py_END_ALLOW_THREADS
    }
    for (int k = 0; k < 9; k++) {
        PyBuffer_Release(&b[k]);
    }
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "expected header lists inside their buffers and outputs of n rows");
        return NULL;
    }
    return PyLong_FromSsize_t(unread);
}

static PyObject *
restore_headers(PyObject *module, PyObject *args)
{
    Py_buffer b[15];
    PyObject *names;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*y*O!y*y*w*w*w*w*w*w*w*", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5],
                          &PyTuple_Type, &names, &b[6], &b[7], &b[8], &b[9], &b[10], &b[11], &b[12], &b[13],
                          &b[14])) {
        return NULL;
    }
    const int64_t *rows = b[0].buf;
    const int32_t *ko = b[1].buf, *vo = b[3].buf;
    const uint8_t *kd = b[2].buf, *vd = b[4].buf, *valid = b[5].buf, *prefix = b[6].buf, *trail = b[7].buf;
    int64_t *ints = b[8].buf, *ports = b[10].buf, *places = b[12].buf;
    uint8_t *ips = b[9].buf, *trailing = b[11].buf, *pd = b[14].buf;
    int32_t *po = b[13].buf;
    Py_ssize_t n = b[11].len, items = b[1].len / 4 - 1, plen = b[6].len, tlen = b[7].len, cap = b[14].len;
    const uint8_t *name[RH_FIELDS];
    Py_ssize_t name_len[RH_FIELDS];
    int ok = texts_of(names, RH_FIELDS, name, name_len) && b[0].len == (n + 1) * 8 && items >= 0 &&
             b[3].len == b[1].len && (b[5].len == 0 || b[5].len == items) && b[8].len == RH_INTS * n * 8 &&
             b[9].len == 2 * n * IPV4_LEN && b[10].len == 2 * n * 8 && b[12].len == 2 * n * 8 &&
             b[13].len == (n + 1) * 4;
    if (ok && n > 0) {
        ok = rows[0] >= 0 && rows[n] <= items && span_ok(ko, items, b[2].len) && span_ok(vo, items, b[4].len);
        for (Py_ssize_t i = 0; ok && i < n; i++) {
            ok = rows[i + 1] >= rows[i];
        }
    }
    if (!ok) {
        for (int k = 0; k < 15; k++) {
            PyBuffer_Release(&b[k]);
        }
        PyErr_SetString(PyExc_ValueError, "expected header lists inside their buffers and outputs of the documented sizes");
        return NULL;
    }
    static const int64_t lo[RH_INTS] = {INT64_MIN, INT64_MIN, INT64_MIN, INT32_MIN, INT32_MIN, INT32_MIN,
                                        INT64_MIN, INT64_MIN};
    static const int64_t hi[RH_INTS] = {INT64_MAX, INT64_MAX, INT64_MAX, INT32_MAX, INT32_MAX, INT32_MAX,
                                        INT64_MAX, INT64_MAX};
    int status = RH_OK, topic_repeated = 0, queue_repeated = 0;
    Py_ssize_t at = 0;
    /* The field each header position held in the row before (RH_FIELDS: none): rows that to_entry
     * made list their headers in one order, so the guess spares the search through the names. */
    uint8_t guess[RH_GUESSES];
    memset(guess, RH_FIELDS, sizeof(guess));
    Py_BEGIN_ALLOW_THREADS
    po[0] = 0;
    for (Py_ssize_t i = 0; status == RH_OK && i < n; i++) {
        uint32_t seen = 0;
        Py_ssize_t start = at;
        int props = 0;
        int64_t prop_items[RH_ROW_PROPERTIES];   /* this row's property headers so far (the first ones) */
        places[i] = places[n + i] = -1;
        trailing[i] = 0;
        for (int64_t j = rows[i]; status == RH_OK && j < rows[i + 1]; j++) {
            const uint8_t *key = kd + ko[j], *value = vd + vo[j];
            int32_t kl = ko[j + 1] - ko[j], vl = vo[j + 1] - vo[j];
            int null = b[5].len && !valid[j];
            int64_t position = j - rows[i];
            if (kl >= plen && same_text(key, prefix, plen)) {
                const uint8_t *pn = key + plen;
                int32_t nl = kl - (int32_t)plen;
                /* the same name earlier in the row: only a property can have it (its prefix) */
                if (props <= RH_ROW_PROPERTIES) {
                    for (int e = 0; e < props; e++) {
                        int64_t p = prop_items[e];
                        if (ko[p + 1] - ko[p] == kl && same_text(kd + ko[p], key, kl)) {
                            status = RH_BAD_PROPERTY;
                            break;
                        }
                    }
                } else {
                    for (int64_t e = rows[i]; e < j; e++) {
                        if (ko[e + 1] - ko[e] == kl && same_text(kd + ko[e], key, kl)) {
                            status = RH_BAD_PROPERTY;
                            break;
                        }
                    }
                }
                if (props < RH_ROW_PROPERTIES) {
                    prop_items[props] = j;
                }
                if (position < RH_GUESSES) {
                    guess[position] = RH_FIELDS;
                }
                if (null) {
                    vl = 0;
                }
                if (status != RH_OK || !property_text(pn, nl) || !property_text(value, vl)) {
                    status = RH_BAD_PROPERTY;
                    break;
                }
                if ((at - start) + (props > 0) + nl + 1 + vl > MAX_PROPERTIES_BYTES || at + 2 + nl + vl > cap ||
                    at + 2 + nl + vl > INT32_MAX) {     /* prop_offsets are int32 */
                    status = RH_TOO_LONG;
                    break;
                }
                if (props++) {
                    pd[at++] = PROPERTY_SEPARATOR;
                }
                copy_short(pd + at, pn, (size_t)nl);
                at += nl;
                pd[at++] = NAME_VALUE_SEPARATOR;
                copy_short(pd + at, value, (size_t)vl);
                at += vl;
                continue;
            }
            int f = position < RH_GUESSES ? guess[position] : RH_FIELDS;
            if (f == RH_FIELDS || !(name_len[f] == kl && same_text(name[f], key, kl))) {
                f = 0;
                while (f < RH_FIELDS && !(name_len[f] == kl && same_text(name[f], key, kl))) {
                    f++;
                }
                if (position < RH_GUESSES) {
                    guess[position] = (uint8_t)f;
                }
            }
            if (f == RH_FIELDS) {
                continue;       /* rmq.msg_id (derived from the store) or another peer's header */
            }
            if (seen & (1u << f)) {
                if (f == RH_TOPIC || f == RH_QUEUE_ID) {
                    *(f == RH_TOPIC ? &topic_repeated : &queue_repeated) = 1;
                    continue;
                }
                status = RH_REPEATED;
                break;
            }
            seen |= 1u << f;
            if (f == RH_TOPIC || f == RH_QUEUE_ID) {
                places[(f == RH_QUEUE_ID) * n + i] = j;
                continue;
            }
            if (f == RH_MAGIC) {
                status = RH_V2;
            } else if (null) {
                status = RH_NULL;
            } else if (f < RH_INTS) {
                if (!parse_decimal(value, vl, lo[f], hi[f], &ints[f * n + i])) {
                    status = RH_BAD_INT;
                }
            } else if (f == RH_BORN_HOST || f == RH_STORE_HOST) {
                int h = f == RH_STORE_HOST;
                if (!parse_ipv4_host(value, vl, ips + (h * n + i) * IPV4_LEN, &ports[h * n + i])) {
                    status = RH_BAD_HOST;
                }
            } else {        /* RH_TRAILING */
                trailing[i] = vl == tlen && memcmp(value, trail, (size_t)tlen) == 0;
            }
        }
        if (status == RH_OK && (seen & RH_REQUIRED) != RH_REQUIRED) {
            status = RH_MISSING;
        }
        if (status == RH_OK && props && trailing[i]) {
            if (at - start + 1 > MAX_PROPERTIES_BYTES || at + 1 > cap || at + 1 > INT32_MAX) {
                status = RH_TOO_LONG;
            } else {
                pd[at++] = PROPERTY_SEPARATOR;
            }
        }
        po[i + 1] = (int32_t)at;
    }
    Py_END_ALLOW_THREADS
    for (int k = 0; k < 15; k++) {
        PyBuffer_Release(&b[k]);
    }
    return Py_BuildValue("inii", status, at, topic_repeated, queue_repeated);
}

/*
 * The properties from_entry (conversion.py) gives a record of a peer's own (not one converted from
 * RocketMQ), fields NP_* in its insertion order; the store writes them in Java HashMap order, which
 * depends only on which fields a row has (``orders``: NP_ORDERS rows of NP_FIELDS field numbers, by
 * the bit mask of the row's fields, 0xFF past its last).
 */
enum {
    NP_OFFSET, NP_KEYS, NP_KEY, NP_NULL_VALUE, NP_TIMESTAMP_TYPE, NP_HEADERS, NP_TXN, NP_PRODUCER, NP_CONTROL,
    NP_FIELDS
};
#define NP_ORDERS (1 << NP_FIELDS)
/* Why native_properties declined a run (the entry path then decides): its status, 0 for none. */
enum { NP_OK, NP_TOO_LONG, NP_BAD_TEXT, NP_NO_ROOM };

/* Whether a record key goes into KEYS as it is (conversion._plain_key): UTF-8, not empty, none of
   the key separator ' ', 0x01, 0x02, \t \n \v \f \r. */
static int
plain_record_key(const uint8_t *s, Py_ssize_t n)
{
    if (n == 0 || !valid_utf8(s, n, 0)) {
        return 0;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        uint8_t c = s[i];
        if (c == ' ' || c == NAME_VALUE_SEPARATOR || c == PROPERTY_SEPARATOR || (c >= '\t' && c <= '\r')) {
            return 0;
        }
    }
    return 1;
}

/*
 * native_properties(offsets, key_offsets, key_data, key_valid, null_value, log_append, item_rows,
 *                   hk_offsets, hk_data, hv_offsets, hv_data, hv_valid, txn, control, producers, names,
 *                   orders, log_append_text, trailing, prop_offsets, prop_data) -> (status, used)
 *
 * The encoded properties of n records of a peer's own (conversion.from_entry, then the store's
 * HashMap order and the version's trailing 0x02), in one pass: offsets int64[n]; the keys as Arrow
 * binary (int32 offsets, data, key_valid b"" or uint8[n]); null_value, log_append, txn, control
 * uint8[n]; item_rows int64[n + 1], each row's header items; the items' names (hk_*) and values
 * (hv_*, hv_valid b"" or uint8[items]); producers int64[2n] (ids, then epochs); names the NP_FIELDS
 * property names; orders (see NP_ORDERS); log_append_text the timestamp type's text.  Written into
 * prop_offsets (int32[n + 1]) and prop_data (used bytes of it).  status NP_OK, or why the run needs
 * the entry path: properties of MAX_PROPERTIES_BYTES or more, a header name not UTF-8, or
 * prop_data too small.  ValueError for inputs of other sizes.  O(bytes).  Releases the GIL.
 */
static PyObject *
native_properties(PyObject *module, PyObject *args)
{
    enum { NB = 19 };
    Py_buffer b[NB];
    PyObject *names;
    int trailing;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*y*y*y*y*y*y*y*y*y*y*O!y*y*pw*w*", &b[0], &b[1], &b[2], &b[3], &b[4],
                          &b[5], &b[6], &b[7], &b[8], &b[9], &b[10], &b[11], &b[12], &b[13], &b[14], &PyTuple_Type,
                          &names, &b[15], &b[16], &trailing, &b[17], &b[18])) {
        return NULL;
    }
    const int64_t *offsets = b[0].buf, *rows = b[6].buf, *producers = b[14].buf;
    const int32_t *ko = b[1].buf, *hko = b[7].buf, *hvo = b[9].buf;
    const uint8_t *kd = b[2].buf, *kvalid = b[3].buf, *null_value = b[4].buf, *log_append = b[5].buf,
                  *hkd = b[8].buf, *hvd = b[10].buf, *hvalid = b[11].buf, *txn = b[12].buf, *control = b[13].buf,
                  *orders = b[15].buf, *lat = b[16].buf;
    int32_t *po = b[17].buf;
    uint8_t *pd = b[18].buf;
    Py_ssize_t n = b[0].len / 8, items = b[7].len / 4 - 1, cap = b[18].len, lat_len = b[16].len;
    const uint8_t *name[NP_FIELDS];
    Py_ssize_t name_len[NP_FIELDS], names_total = 0;
    int ok = texts_of(names, NP_FIELDS, name, name_len) && b[0].len == n * 8 && b[1].len == (n + 1) * 4 &&
             (b[3].len == 0 || b[3].len == n) && b[4].len == n && b[5].len == n && b[6].len == (n + 1) * 8 &&
             items >= 0 && b[9].len == b[7].len && (b[11].len == 0 || b[11].len == items) && b[12].len == n &&
             b[13].len == n && b[14].len == 2 * n * 8 && b[15].len == NP_ORDERS * NP_FIELDS &&
             b[17].len == (n + 1) * 4;
    for (int f = 0; ok && f < NP_FIELDS; f++) {
        names_total += name_len[f];
    }
    if (ok) {
        ok = span_ok(ko, n, b[2].len) && span_ok(hko, items, b[8].len) && span_ok(hvo, items, b[10].len) &&
             (n == 0 || (rows[0] >= 0 && rows[n] <= items));
        for (Py_ssize_t i = 0; ok && i < n; i++) {
            ok = rows[i + 1] >= rows[i];
        }
    }
    if (!ok) {
        for (int k = 0; k < NB; k++) {
            PyBuffer_Release(&b[k]);
        }
        PyErr_SetString(PyExc_ValueError, "expected record columns inside their buffers and outputs of n rows");
        return NULL;
    }
    int status = NP_OK;
    Py_ssize_t at = 0;
    Py_BEGIN_ALLOW_THREADS
    po[0] = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        const uint8_t *key = kd + ko[i];
        Py_ssize_t kl = ko[i + 1] - ko[i];
        int has_key = !b[3].len || kvalid[i];
        int64_t first = rows[i], last = rows[i + 1];
        unsigned mask = 1u << NP_OFFSET;
        if (has_key) {
            mask |= 1u << (plain_record_key(key, kl) ? NP_KEYS : NP_KEY);
        }
        mask |= (unsigned)(null_value[i] != 0) << NP_NULL_VALUE | (unsigned)(log_append[i] != 0) << NP_TIMESTAMP_TYPE |
                (unsigned)(last > first) << NP_HEADERS | (unsigned)(control[i] != 0) << NP_CONTROL;
        if (txn[i]) {
            mask |= 1u << NP_TXN;
        } else if (producers[i] != -1 || producers[n + i] != -1) {
            mask |= 1u << NP_PRODUCER;
        }
        /* the most this row can take: names, separators, numbers, the key as base64 (4/3 + 4), each
           header's name escaped (6x) and value as base64 */
        Py_ssize_t bound = names_total + 2 * NP_FIELDS + 20 + 2 * kl + 4 + lat_len + 41 + 1 + 2;
        for (int64_t j = first; j < last; j++) {
            bound += 6 * (Py_ssize_t)(hko[j + 1] - hko[j]) + 2 * (Py_ssize_t)(hvo[j + 1] - hvo[j]) + 16;
        }
        if (at + bound > cap) {
            status = NP_NO_ROOM;
            break;
        }
        Py_ssize_t start = at;
        const uint8_t *order = orders + (Py_ssize_t)mask * NP_FIELDS;
        for (int k = 0; k < NP_FIELDS && order[k] != 0xFF; k++) {
            int f = order[k];
            if (k) {
                pd[at++] = PROPERTY_SEPARATOR;
            }
            memcpy(pd + at, name[f], (size_t)name_len[f]);
            at += name_len[f];
            pd[at++] = NAME_VALUE_SEPARATOR;
            switch (f) {
            case NP_OFFSET:
                at += decimal_text(offsets[i], (char *)pd + at);
                break;
            case NP_KEYS:
                memcpy(pd + at, key, (size_t)kl);
                at += kl;
                break;
            case NP_KEY:
                at = put_base64(pd + at, key, kl) - pd;
                break;
            case NP_NULL_VALUE:
            case NP_CONTROL:
                pd[at++] = '1';
                break;
            case NP_TIMESTAMP_TYPE:
                memcpy(pd + at, lat, (size_t)lat_len);
                at += lat_len;
                break;
            case NP_HEADERS:
                pd[at++] = '[';
                for (int64_t j = first; j < last; j++) {
                    const uint8_t *hn = hkd + hko[j];
                    Py_ssize_t hl = hko[j + 1] - hko[j];
                    if (!valid_utf8(hn, hl, 0)) {
                        status = NP_BAD_TEXT;
                        break;
                    }
                    if (j > first) {
                        pd[at++] = ',';
                    }
                    uint8_t *o = put_json_string(pd + at + 1, hn, hl);     /* ["name", */
                    pd[at] = '[';
                    *o++ = ',';
                    if (b[11].len && !hvalid[j]) {
                        o = put_text(o, "null");
                    } else {
                        *o++ = '"';
                        o = put_base64(o, hvd + hvo[j], hvo[j + 1] - hvo[j]);
                        *o++ = '"';
                    }
                    *o++ = ']';
                    at = o - pd;
                }
                pd[at++] = ']';
                break;
            default:        /* NP_TXN, NP_PRODUCER */
                at += decimal_text(producers[i], (char *)pd + at);
                pd[at++] = ',';
                at += decimal_text(producers[n + i], (char *)pd + at);
            }
            if (status != NP_OK) {
                break;
            }
        }
        if (status != NP_OK) {
            break;
        }
        if (trailing) {
            pd[at++] = PROPERTY_SEPARATOR;
        }
        /* the entry path decides the last byte's case (from_entry checks without the trailing 0x02) */
        if (at - start >= MAX_PROPERTIES_BYTES) {
            status = NP_TOO_LONG;
            break;
        }
        po[i + 1] = (int32_t)at;
    }
    Py_END_ALLOW_THREADS
    for (int k = 0; k < NB; k++) {
        PyBuffer_Release(&b[k]);
    }
    return Py_BuildValue("in", status, at);
}

static PyMethodDef methods[] = {
    {"init", init, METH_O, "init(AppendResult): the slots dataclass encode_plain builds."},
    {"encode_plain", (PyCFunction)(void (*)(void))encode_plain, METH_FASTCALL,
     "encode_plain(items, topic_fields, next_offsets, keys_first, store_ts, store_ip, store_port, start, "
     "file_size, limit, with_index, dest[, trailing[, dest_start]]) -> None | str | (data, blanks, results, "
     "cq_rows, queues, index, end)"},
    {"index_put", (PyCFunction)(void (*)(void))index_put, METH_FASTCALL,
     "index_put(head, slots, entries, slot_num, header, hashes, phys, stamps) -> (header, count)"},
    {"decode_region", decode_region, METH_VARARGS,
     "decode_region(view, pos, stop, limit, base, i8, i4, u8, strict) -> (n, pos, status, blank_size)"},
    {"decode_at", decode_at, METH_VARARGS, "decode_at(view, positions, limit, base, i8, i4, u8, strict) -> n"},
    {"body_crcs", body_crcs, METH_VARARGS, "body_crcs(view, starts, lengths, out): stored body CRCs."},
    {"gather", gather, METH_VARARGS, "gather(view, starts, lengths, offsets, out): the slices one after another."},
    {"gather_parts", gather_parts, METH_VARARGS,
     "gather_parts(parts, starts, lengths, out) -> bytes written: rows of one slice from each part."},
    {"gather_columns", gather_columns, METH_VARARGS,
     "gather_columns(view, rows, chunk, specs): several gathers, a chunk of rows at a time through all."},
    {"split_properties", split_properties, METH_VARARGS,
     "split_properties(view, starts, lengths, item_offsets, names, name_lens, values, value_lens, tags, "
     "tags_lens, token_offsets, tokens, token_lens) -> (items, tokens)"},
    {"property_columns", property_columns, METH_VARARGS,
     "property_columns(view, starts, lengths, item_offsets, names, name_data, values, value_data, tags, tag_data, "
     "tag_valid, token_offsets, tokens, token_data, keys, key_data, key_valid) -> (items, tokens, tag_nulls, "
     "key_nulls)"},
    {"tags_hashes", tags_hashes, METH_VARARGS, "tags_hashes(view, props_pos, props_len, out): TAGS hashes."},
    {"index_entries", index_entries, METH_VARARGS,
     "index_entries(view, topic_pos, topic_len, props_pos, props_len, sys_flag, counts, hashes, tags) -> total"},
    {"topic_codes", topic_codes, METH_VARARGS,
     "topic_codes(view, topic_pos, topic_len, codes) -> first rows: the rows' topics numbered by first appearance"},
    {"json_lines", json_lines, METH_VARARGS,
     "json_lines(view, i8, i4, u8, n, tags_codes, ..., out) -> bytes written, or -(bytes needed)"},
    {"header_lists", header_lists, METH_VARARGS,
     "header_lists(n, slots, props) -> the five buffers of a list<struct<key, value>> column"},
    {"format_hosts", format_hosts, METH_VARARGS, "format_hosts(i8, i4, u8, n, which, offsets, out) -> bytes used"},
    {"first_headers", first_headers, METH_VARARGS,
     "first_headers(rows, key_offsets, keys, value_offsets, values, valid, name, marked, numbers) -> "
     "rows whose value is not a plain decimal"},
    {"restore_headers", restore_headers, METH_VARARGS,
     "restore_headers(item_offsets, key_offsets, keys, value_offsets, values, value_valid, names, prefix, "
     "trailing_text, ints, ips, ports, trailing, places, prop_offsets, prop_data) -> (status, prop_bytes, "
     "topic_repeated, queue_repeated)"},
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
    for (int i = 0; i < N_HEADER; i++) {
        header_str[i] = PyUnicode_InternFromString(HEADER_NAMES[i]);
        if (header_str[i] == NULL) {
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
