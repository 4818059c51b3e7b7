/*
 * segstore_kafka._speedups: CRC-32C, the v2 batch checksum, crc32c (batch.py's _crc32c, the crc32c
 * package, is the reference).
 *
 * Included by _speedups.c (one translation unit): the layouts, constants and helpers defined
 * there, and in the files included before this one, are this file's.
 */

/* ------------------------------------------------------------------------------ */
/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78): the v2 batch checksum */

static uint32_t crc32c_table[256];
static int crc32c_hardware = 0;

/* The hardware path runs three independent CRCs over three adjacent blocks at once (the
 * crc32 instruction has a latency of three cycles and a throughput of one), then joins
 * them.  Joining needs the CRC state after ``length`` more zero bytes, which is linear in
 * the state over GF(2): four tables of 256 words per block length, built at import. */
#define CRC32C_LONG 8192
#define CRC32C_SHORT 256
_Static_assert(CRC32C_LONG % CRC32C_SHORT == 0, "the long shift is a power of the short one");
static uint32_t crc32c_shift_long[4][256];
static uint32_t crc32c_shift_short[4][256];

/* The raw (uninverted) state after ``zeros`` zero bytes from state ``c``, bit by bit:
 * only used to build the tables. */
static uint32_t
crc32c_zeros_slow(uint32_t c, size_t zeros)
{
    while (zeros-- > 0) {
        c = crc32c_table[c & 0xFF] ^ (c >> 8);
    }
    return c;
}

/* The four tables of the linear map whose value at each single bit is ``basis[bit]``. */
static void
crc32c_shift_tables(uint32_t table[4][256], const uint32_t basis[32])
{
    for (int k = 0; k < 4; k++) {
        for (uint32_t b = 0; b < 256; b++) {
            uint32_t out = 0;
            for (int bit = 0; bit < 8; bit++) {
                if (b & (1u << bit)) {
                    out ^= basis[8 * k + bit];
                }
            }
            table[k][b] = out;
        }
    }
}

static inline uint32_t
crc32c_shift(const uint32_t table[4][256], uint32_t c)
{
    return table[0][c & 0xFF] ^ table[1][(c >> 8) & 0xFF] ^ table[2][(c >> 16) & 0xFF] ^ table[3][c >> 24];
}

/* The short shift's tables from the bytewise step, then the long shift's as the short one applied
 * CRC32C_LONG / CRC32C_SHORT times (the maps are linear: the long one is the short one's power), so
 * that module init walks 32 * CRC32C_SHORT zero bytes, not 32 * (CRC32C_SHORT + CRC32C_LONG): 1.5M
 * instructions at every import before. */
static void
crc32c_shift_init(void)
{
    uint32_t basis[32];
    for (int bit = 0; bit < 32; bit++) {
        basis[bit] = crc32c_zeros_slow(1u << bit, CRC32C_SHORT);
    }
    crc32c_shift_tables(crc32c_shift_short, basis);
    for (int bit = 0; bit < 32; bit++) {
        uint32_t c = 1u << bit;
        for (int i = 0; i < CRC32C_LONG / CRC32C_SHORT; i++) {
            c = crc32c_shift(crc32c_shift_short, c);
        }
        basis[bit] = c;
    }
    crc32c_shift_tables(crc32c_shift_long, basis);
}

static void
crc32c_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) {
            c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        }
        crc32c_table[i] = c;
    }
    crc32c_shift_init();
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    crc32c_hardware = __builtin_cpu_supports("sse4.2");
#endif
}

static uint32_t
crc32c_software(uint32_t crc, const uint8_t *p, Py_ssize_t n)
{
    crc = ~crc;
    while (n-- > 0) {
        crc = crc32c_table[(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    }
    return ~crc;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>

static inline uint64_t
crc32c_load64(const uint8_t *p)
{
    uint64_t word;
    memcpy(&word, p, 8);
    return word;
}

/* Three blocks of ``block`` bytes from ``c``: the state after all three. */
__attribute__((target("sse4.2"))) static inline uint32_t
crc32c_sse42_three(uint32_t c, const uint8_t *p, size_t block, const uint32_t shift[4][256])
{
    uint64_t c0 = c, c1 = 0, c2 = 0;
    for (size_t i = 0; i < block; i += 8) {
        c0 = _mm_crc32_u64(c0, crc32c_load64(p + i));
        c1 = _mm_crc32_u64(c1, crc32c_load64(p + block + i));
        c2 = _mm_crc32_u64(c2, crc32c_load64(p + 2 * block + i));
    }
    uint32_t joined = crc32c_shift(shift, (uint32_t)c0) ^ (uint32_t)c1;
    return crc32c_shift(shift, joined) ^ (uint32_t)c2;
}

__attribute__((target("sse4.2"))) static uint32_t
crc32c_sse42(uint32_t crc, const uint8_t *p, Py_ssize_t n)
{
    uint32_t c = ~crc;
    while (n >= 3 * CRC32C_LONG) {
        c = crc32c_sse42_three(c, p, CRC32C_LONG, crc32c_shift_long);
        p += 3 * CRC32C_LONG;
        n -= 3 * CRC32C_LONG;
    }
    while (n >= 3 * CRC32C_SHORT) {
        c = crc32c_sse42_three(c, p, CRC32C_SHORT, crc32c_shift_short);
        p += 3 * CRC32C_SHORT;
        n -= 3 * CRC32C_SHORT;
    }
    uint64_t c64 = c;
    while (n >= 8) {
        c64 = _mm_crc32_u64(c64, crc32c_load64(p));
        p += 8;
        n -= 8;
    }
    c = (uint32_t)c64;
    while (n-- > 0) {
        c = _mm_crc32_u8(c, *p++);
    }
    return ~c;
}
#endif

static uint32_t
crc32c(uint32_t crc, const uint8_t *p, Py_ssize_t n)
{
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (crc32c_hardware) {
        return crc32c_sse42(crc, p, n);
    }
#endif
    return crc32c_software(crc, p, n);
}

static PyObject *
crc32c_py(PyObject *module, PyObject *args)
{
    Py_buffer view;
    unsigned int crc = 0;
    if (!PyArg_ParseTuple(args, "y*|I", &view, &crc)) {
        return NULL;
    }
    uint32_t out = crc32c(crc, view.buf, view.len);
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(out);
}

/* valid_v2_end(buf, start, rising=0) -> int: batch.py's _valid_v2_end_py (the reference) in C: from
 * ``start``, skip whole v2 batches (magic 2, a length holding at least the 61-byte header, inside the
 * buffer) whose stored CRC-32C is that of their bytes from the attributes on (and, ``rising``, whose last
 * offset, baseOffset + lastOffsetDelta as Java's long sum wraps, is above the last one's); the position of
 * the first entry that is not one, or the buffer's end.  O(bytes), the GIL released over the walk. */
static PyObject *
valid_v2_end(PyObject *module, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t start;
    int rising = 0;
    if (!PyArg_ParseTuple(args, "y*n|p", &view, &start, &rising)) {
        return NULL;
    }
    const uint8_t *p = view.buf;
    Py_ssize_t end = view.len, pos = start < 0 ? 0 : start;
    int first = 1;
    uint64_t previous = 0;
    Py_BEGIN_ALLOW_THREADS
    while (end - pos >= 61) {
        const uint8_t *b = p + pos;
        int32_t length = (int32_t)(((uint32_t)b[8] << 24) | ((uint32_t)b[9] << 16)
                                   | ((uint32_t)b[10] << 8) | b[11]);
        if (b[16] != 2 || length < 61 - 12 || (Py_ssize_t)length + 12 > end - pos) {
            break;
        }
        if (rising) {
            uint64_t base = 0;
            for (int i = 0; i < 8; i++) {
                base = (base << 8) | b[i];
            }
            int32_t delta = (int32_t)(((uint32_t)b[23] << 24) | ((uint32_t)b[24] << 16)
                                      | ((uint32_t)b[25] << 8) | b[26]);
            uint64_t last = base + (uint64_t)(int64_t)delta;       /* wraps as Java's long sum */
            if (!first && (int64_t)last <= (int64_t)previous) {
                break;
            }
            first = 0;
            previous = last;
        }
        uint32_t stored = ((uint32_t)b[17] << 24) | ((uint32_t)b[18] << 16) | ((uint32_t)b[19] << 8) | b[20];
        if (crc32c(0, b + 21, (Py_ssize_t)length + 12 - 21) != stored) {
            break;
        }
        pos += (Py_ssize_t)length + 12;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    return PyLong_FromSsize_t(pos > end ? end : pos);
}
