/*
 * Helpers every format plugin's C accelerator shares (each _speedups.c under formats/ includes it; setup.py
 * adds this directory to the include path, and a build's SOURCE_HASH covers this file too:
 * segstore.speedups.stale).  Header-only, static inline: each extension gets its own copy.
 */
#ifndef SEGSTORE_SPEEDUPS_COMMON_H
#define SEGSTORE_SPEEDUPS_COMMON_H

#include <stdint.h>
#include <string.h>

/* Included after Python.h (Py_ssize_t). */

/* The high bit of each byte of a word: none set, eight ASCII bytes (the UTF-8 checks' fast step). */
#define ASCII_MASK 0x8080808080808080ull

static const char BASE64_ALPHABET[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* base64.b64encode(s[0:n]) at o, padded: 4 * ((n + 2) / 3) bytes.  Returns the end. */
static inline uint8_t *
put_base64(uint8_t *o, const uint8_t *s, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = ((uint32_t)s[i] << 16) | ((uint32_t)s[i + 1] << 8) | s[i + 2];
        *o++ = (uint8_t)BASE64_ALPHABET[v >> 18];
        *o++ = (uint8_t)BASE64_ALPHABET[(v >> 12) & 63];
        *o++ = (uint8_t)BASE64_ALPHABET[(v >> 6) & 63];
        *o++ = (uint8_t)BASE64_ALPHABET[v & 63];
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)s[i] << 16;
        *o++ = (uint8_t)BASE64_ALPHABET[v >> 18];
        *o++ = (uint8_t)BASE64_ALPHABET[(v >> 12) & 63];
        *o++ = '=';
        *o++ = '=';
    } else if (n - i == 2) {
        uint32_t v = ((uint32_t)s[i] << 16) | ((uint32_t)s[i + 1] << 8);
        *o++ = (uint8_t)BASE64_ALPHABET[v >> 18];
        *o++ = (uint8_t)BASE64_ALPHABET[(v >> 12) & 63];
        *o++ = (uint8_t)BASE64_ALPHABET[(v >> 6) & 63];
        *o++ = '=';
    }
    return o;
}

/* The longest decimal of an int64: "-9223372036854775808". */
#define DECIMAL_BOUND 20

static const char HEX_LOWER[] = "0123456789abcdef";

/* v in decimal at o, as str(v) writes it (at most DECIMAL_BOUND bytes).  Returns the end. */
static inline uint8_t *
put_decimal(uint8_t *o, int64_t v)
{
    char tmp[DECIMAL_BOUND];
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
 * Copy n bytes (short ones, as topics, property names, keys and header values mostly are) without
 * a call: two overlapping loads and stores of the widest size that fits, memcpy beyond 32 bytes.
 * Reads and writes only src[0:n] and dst[0:n].
 */
static inline void
copy_short(uint8_t *dst, const uint8_t *src, size_t n)
{
    if (n > 32) {
        memcpy(dst, src, n);
    } else if (n >= 16) {
        uint64_t a[2], b[2];
        memcpy(a, src, 16);
        memcpy(b, src + n - 16, 16);
        memcpy(dst, a, 16);
        memcpy(dst + n - 16, b, 16);
    } else if (n >= 8) {
        uint64_t a, b;
        memcpy(&a, src, 8);
        memcpy(&b, src + n - 8, 8);
        memcpy(dst, &a, 8);
        memcpy(dst + n - 8, &b, 8);
    } else if (n >= 4) {
        uint32_t a, b;
        memcpy(&a, src, 4);
        memcpy(&b, src + n - 4, 4);
        memcpy(dst, &a, 4);
        memcpy(dst + n - 4, &b, 4);
    } else if (n) {
        dst[0] = src[0];
        dst[n / 2] = src[n / 2];
        dst[n - 1] = src[n - 1];
    }
}

/* The most cache lines prefetch_span starts loading. */
enum { SPAN_PREFETCH_LINES = 8 };

/* Start loading the cache lines of p[0:len], at most SPAN_PREFETCH_LINES of them (a long value is
 * left to the hardware prefetcher past them; nothing for len <= 0).  A prefetch never faults: the
 * caller may pass offsets it has not checked yet (it checks them before it reads). */
static inline void
prefetch_span(const uint8_t *p, int64_t len)
{
    if (len <= 0) {
        return;
    }
    uintptr_t line = (uintptr_t)p & ~(uintptr_t)63, last = ((uintptr_t)p + (uintptr_t)len - 1) & ~(uintptr_t)63;
    for (int i = 0; i < SPAN_PREFETCH_LINES && line <= last; i++, line += 64) {
        __builtin_prefetch((const void *)line);
    }
}

/* Whether a[0:n] == b[0:n], in word loads and no call (names: mostly a few to 31 bytes). */
static inline int
same_text(const uint8_t *a, const uint8_t *b, Py_ssize_t n)
{
    if (n >= 8) {
        uint64_t x, y;
        for (Py_ssize_t k = 0; k + 8 <= n; k += 8) {
            memcpy(&x, a + k, 8);
            memcpy(&y, b + k, 8);
            if (x != y) {
                return 0;
            }
        }
        memcpy(&x, a + n - 8, 8);
        memcpy(&y, b + n - 8, 8);
        return x == y;
    }
    if (n >= 4) {
        uint32_t x, y, u, v;
        memcpy(&x, a, 4);
        memcpy(&y, b, 4);
        memcpy(&u, a + n - 4, 4);
        memcpy(&v, b + n - 4, 4);
        return x == y && u == v;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        if (a[k] != b[k]) {
            return 0;
        }
    }
    return 1;
}

/* valid_utf8 past its all-ASCII checks: from s[0] on, a byte or 8 at a time (kept out of line). */
static __attribute__((noinline, unused)) int
valid_utf8_from(const uint8_t *s, Py_ssize_t n, int allow_surrogates)
{
    Py_ssize_t i = 0;
    while (i < n) {
        uint64_t word;
        if (n - i >= 8 && (memcpy(&word, s + i, 8), (word & ASCII_MASK) == 0)) {   /* 8 ASCII bytes */
            i += 8;
            continue;
        }
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        int len;
        uint32_t cp;
        if (c >= 0xC2 && c <= 0xDF) {
            len = 2;
            cp = c & 0x1F;
        } else if (c >= 0xE0 && c <= 0xEF) {
            len = 3;
            cp = c & 0x0F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            len = 4;
            cp = c & 0x07;
        } else {
            return 0;
        }
        if (n - i < len) {
            return 0;
        }
        for (int k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80) {
                return 0;
            }
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
            (!allow_surrogates && cp >= 0xD800 && cp <= 0xDFFF)) {
            return 0;
        }
        i += len;
    }
    return 1;
}

/* Whether s[0:n] is UTF-8 as Python's strict decoder accepts it (surrogates too with allow_surrogates).
 * Its all-ASCII checks inline where it is called (the RocketMQ decode calls it twice a message: out of
 * line with the loop it cost a call each), the rest a call. */
static inline __attribute__((always_inline)) int
valid_utf8(const uint8_t *s, Py_ssize_t n, int allow_surrogates)
{
    if (n >= 8) {       /* all ASCII (the common case): one OR over the words, the last overlapping */
        uint64_t acc = 0, word;
        for (Py_ssize_t k = 0; k + 8 <= n; k += 8) {
            memcpy(&word, s + k, 8);
            acc |= word;
        }
        memcpy(&word, s + n - 8, 8);
        if (((acc | word) & ASCII_MASK) == 0) {
            return 1;
        }
    } else if (n >= 4) {    /* a short one (a topic): two overlapping words; a byte at a time took 70
                             * instructions for a 5-byte topic */
        uint32_t head, tail;
        memcpy(&head, s, 4);
        memcpy(&tail, s + n - 4, 4);
        if (((head | tail) & 0x80808080u) == 0) {
            return 1;
        }
    }
    return valid_utf8_from(s, n, allow_surrogates);
}

/* Where a slots class keeps its members ``names`` (writable object slots), into offsets: the C paths
 * that build results set their fields there directly.  Included after structmember.h. */
static inline int
slot_offsets(PyObject *cls, const char *const *names, int n, Py_ssize_t *offsets)
{
    if (!PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "expected a class");
        return -1;
    }
    for (int i = 0; i < n; i++) {
        PyObject *descr = PyObject_GetAttrString(cls, names[i]);
        if (descr == NULL) {
            return -1;
        }
        int ok = Py_IS_TYPE(descr, &PyMemberDescr_Type) &&
                 ((PyMemberDescrObject *)descr)->d_member->type == T_OBJECT_EX &&
                 !(((PyMemberDescrObject *)descr)->d_member->flags & READONLY);
        if (ok) {
            offsets[i] = ((PyMemberDescrObject *)descr)->d_member->offset;
        }
        Py_DECREF(descr);
        if (!ok) {
            PyErr_Format(PyExc_TypeError, "%s.%s must be a __slots__ member", ((PyTypeObject *)cls)->tp_name, names[i]);
            return -1;
        }
    }
    return 0;
}

/*
 * The Arrow C data interface's array (arrow/c/abi.h, an ABI fixed by the Arrow project): what both
 * plugins' exports (Kafka export_chunk, RocketMQ export_arrays) hand pyarrow to import.
 */
#ifndef ARROW_C_DATA_INTERFACE
#define ARROW_C_DATA_INTERFACE
struct ArrowArray {
    int64_t length;
    int64_t null_count;
    int64_t offset;
    int64_t n_buffers;
    int64_t n_children;
    const void **buffers;
    struct ArrowArray **children;
    struct ArrowArray *dictionary;
    void (*release)(struct ArrowArray *);
    void *private_data;
};
#endif

/* The release of an exported child array: its memory is its root's, freed by the root's release. */
static inline void
arrow_release_child(struct ArrowArray *array)
{
    array->release = NULL;
}

#endif
