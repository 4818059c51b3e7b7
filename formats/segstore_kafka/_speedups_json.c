/*
 * segstore_kafka._speedups: the dump --json lines of those buffers, json_lines (store.py:
 * KafkaStore.to_json).
 *
 * Included by _speedups.c (one translation unit): the layouts, constants and helpers defined
 * there, and in the files included before this one, are this file's.
 */

/* ------------------------------------------------------------------------------ */
/* dump --json lines from the column buffers
 *
 * json_lines(prefix, timestamp_types, tails, buffers, n_rows, n_batches) -> bytes: one line per
 * row, byte for byte what json.dumps gives for KafkaStore.to_json (ensure_ascii,
 * ", " and ": " separators, base64 keys and values):
 *
 *   prefix + offset + ', "timestamp": ' + ts + ', "timestamp_type": ' + timestamp_types[b]
 *   + ', "key": ' + key + ', "value": ' + value + ', "headers": [...]' + tails[b]
 *
 * where b is the row's batch; prefix, timestamp_types and tails are the JSON the
 * caller formatted once per partition and per batch.
 */

/* The writers below write at w, which the caller sized by the bounds of json_lines' first pass. */

static inline uint8_t *
put(uint8_t *w, const void *p, Py_ssize_t n)
{
    memcpy(w, p, n);
    return w + n;
}

#define PUT_LITERAL(w, s) put((w), (s), sizeof(s) - 1)
static inline Py_ssize_t
b64_bound(Py_ssize_t n)
{
    return 2 + (n + 2) / 3 * 4; /* quoted; "null" is shorter */
}

/* "base64" or null. */
static uint8_t *
put_b64(uint8_t *w, const uint8_t *p, Py_ssize_t n, int valid)
{
    if (!valid) {
        return PUT_LITERAL(w, "null");
    }
    *w++ = '"';
    w = put_base64(w, p, n);
    *w++ = '"';
    return w;
}

static uint8_t *
put_u_escape(uint8_t *w, uint32_t unit)
{
    *w++ = '\\';
    *w++ = 'u';
    *w++ = (uint8_t)HEX_LOWER[(unit >> 12) & 15];
    *w++ = (uint8_t)HEX_LOWER[(unit >> 8) & 15];
    *w++ = (uint8_t)HEX_LOWER[(unit >> 4) & 15];
    *w++ = (uint8_t)HEX_LOWER[unit & 15];
    return w;
}

/* A JSON string of valid UTF-8 as json.dumps(ensure_ascii=True) writes it: at most 2 + 6n bytes
 * (a 4-byte sequence becomes two 6-byte escapes, 3 bytes one, a control byte one). */
static uint8_t *
put_json_str(uint8_t *w, const uint8_t *s, Py_ssize_t n)
{
    *w++ = '"';
    Py_ssize_t i = 0;
    while (i < n) {
        uint32_t cp = s[i];
        if (cp >= 0xF0) {
            cp = ((cp & 0x07) << 18) | ((uint32_t)(s[i + 1] & 0x3F) << 12) | ((uint32_t)(s[i + 2] & 0x3F) << 6) |
                 (s[i + 3] & 0x3F);
            i += 4;
        } else if (cp >= 0xE0) {
            cp = ((cp & 0x0F) << 12) | ((uint32_t)(s[i + 1] & 0x3F) << 6) | (s[i + 2] & 0x3F);
            i += 3;
        } else if (cp >= 0xC0) {
            cp = ((cp & 0x1F) << 6) | (s[i + 1] & 0x3F);
            i += 2;
        } else {
            i += 1;
        }
        if (cp == '"' || cp == '\\') {
            *w++ = '\\';
            *w++ = (uint8_t)cp;
        } else if (cp >= 0x20 && cp <= 0x7E) {
            *w++ = (uint8_t)cp;
        } else if (cp == '\n' || cp == '\r' || cp == '\t' || cp == '\b' || cp == '\f') {
            *w++ = '\\';
            *w++ = cp == '\n' ? 'n' : cp == '\r' ? 'r' : cp == '\t' ? 't' : cp == '\b' ? 'b' : 'f';
        } else if (cp > 0xFFFF) {
            uint32_t v = cp - 0x10000;
            w = put_u_escape(w, 0xD800 + (v >> 10));
            w = put_u_escape(w, 0xDC00 + (v & 0x3FF));
        } else {
            w = put_u_escape(w, cp);
        }
    }
    *w++ = '"';
    return w;
}

static inline int
bit(const uint8_t *bitmap, Py_ssize_t i)
{
    return (bitmap[i >> 3] >> (i & 7)) & 1;
}

/* offsets[i] .. offsets[i + 1] is a slice of a buffer of ``size`` bytes. */
static inline int
within(const int32_t *offsets, Py_ssize_t i, Py_ssize_t size)
{
    return 0 <= offsets[i] && offsets[i] <= offsets[i + 1] && offsets[i + 1] <= size;
}

static const char K_TIMESTAMP[] = ", \"timestamp\": ", K_TYPE[] = ", \"timestamp_type\": ", K_KEY[] = ", \"key\": ",
                  K_VALUE[] = ", \"value\": ", K_HEADERS[] = ", \"headers\": [", K_HKEY[] = "{\"key\": ";

/* A run of bytes json_lines copies (a Python bytes object's, read without the GIL). */
typedef struct {
    const char *data;
    Py_ssize_t len;
} Slice;

static PyObject *
json_lines(PyObject *module, PyObject *args)
{
    Py_buffer prefix;
    PyObject *types, *tails, *buffers;
    Py_ssize_t n_rows, n_batches;
    if (!PyArg_ParseTuple(args, "y*O!O!Onn", &prefix, &PyList_Type, &types, &PyList_Type, &tails, &buffers,
                          &n_rows, &n_batches)) {
        return NULL;
    }
    Cols c;
    memset(&c, 0, sizeof(c));
    c.want = WANT_KEY | WANT_VALUE | WANT_HEADERS;
    PyObject *result = NULL;
    Slice *per_batch = NULL;    /* each batch's timestamp type, then its tail: read without the GIL */
    if (get_cols(buffers, &c, 0) < 0) {
        PyBuffer_Release(&prefix);
        return NULL;
    }
    if (n_rows < 0 || n_rows > c.cap.rows || n_batches < 0 || n_batches > c.cap.batches ||
        PyList_GET_SIZE(types) < n_batches || PyList_GET_SIZE(tails) < n_batches) {
        PyErr_SetString(PyExc_ValueError, "row and batch counts within the buffers and the per-batch lists");
        goto done;
    }
    per_batch = PyMem_Malloc(sizeof(Slice) * 2 * (size_t)(n_batches ? n_batches : 1));
    if (per_batch == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t b = 0; b < n_batches; b++) {
        PyObject *type = PyList_GET_ITEM(types, b), *tail = PyList_GET_ITEM(tails, b);
        if (!PyBytes_Check(type) || !PyBytes_Check(tail)) {
            PyErr_SetString(PyExc_TypeError, "timestamp types and tails as bytes");
            goto done;
        }
        /* the lists hold the bytes (immutable) until this returns, whatever another thread does */
        per_batch[2 * b] = (Slice){PyBytes_AS_STRING(type), PyBytes_GET_SIZE(type)};
        per_batch[2 * b + 1] = (Slice){PyBytes_AS_STRING(tail), PyBytes_GET_SIZE(tail)};
    }
    Py_ssize_t n_headers = n_rows ? c.header_off[n_rows] : 0;
    if (n_headers > c.cap.headers) {
        PyErr_SetString(PyExc_ValueError, "header counts within the buffers");
        goto done;
    }
    /* First pass: check every slice and bound the output, so the second writes without checks.
     * Both passes touch no Python object: another thread runs meanwhile (several dump threads). */
    Py_ssize_t bound = 0;
    const char *bad = NULL;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t r = 0; r < n_rows && bad == NULL; r++) {
        int32_t b = c.row_batch[r];
        if (b < 0 || b >= n_batches || !within(c.key_off, r, c.cap.key) || !within(c.value_off, r, c.cap.value) ||
            !within(c.header_off, r, n_headers)) {
            bad = "row batches and offsets within the buffers";
            break;
        }
        bound += prefix.len + 2 * DECIMAL_BOUND + sizeof(K_TIMESTAMP) + sizeof(K_TYPE) + sizeof(K_KEY) +
                 sizeof(K_VALUE) + sizeof(K_HEADERS) + 1 + per_batch[2 * b].len + per_batch[2 * b + 1].len +
                 b64_bound(c.key_off[r + 1] - c.key_off[r]) + b64_bound(c.value_off[r + 1] - c.value_off[r]);
        for (int32_t h = c.header_off[r]; h < c.header_off[r + 1]; h++) {
            if (!within(c.hkey_off, h, c.cap.hkey) || !within(c.hvalue_off, h, c.cap.hvalue) ||
                !valid_utf8(c.hkey_data + c.hkey_off[h], c.hkey_off[h + 1] - c.hkey_off[h], 0)) {
                bad = "header offsets within the buffers, UTF-8 keys";
                break;
            }
            bound += 2 + sizeof(K_HKEY) + 2 + 6 * (Py_ssize_t)(c.hkey_off[h + 1] - c.hkey_off[h]) +
                     sizeof(K_VALUE) + b64_bound(c.hvalue_off[h + 1] - c.hvalue_off[h]) + 1;
        }
    }
    Py_END_ALLOW_THREADS
    if (bad != NULL) {
        PyErr_SetString(PyExc_ValueError, bad);
        goto done;
    }
    /* Written straight into the bytes returned (ASCII: json.dumps escapes the rest), then shrunk;
     * no other thread sees it before it is returned. */
    result = PyBytes_FromStringAndSize(NULL, bound);
    if (result == NULL) {
        goto done;
    }
    uint8_t *start = (uint8_t *)PyBytes_AS_STRING(result);
    uint8_t *w = start;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t r = 0; r < n_rows; r++) {
        int32_t b = c.row_batch[r];
        w = put(w, prefix.buf, prefix.len);
        w = put_decimal(w, c.offset[r]);
        w = PUT_LITERAL(w, K_TIMESTAMP);
        w = put_decimal(w, c.timestamp[r]);
        w = PUT_LITERAL(w, K_TYPE);
        w = put(w, per_batch[2 * b].data, per_batch[2 * b].len);
        w = PUT_LITERAL(w, K_KEY);
        w = put_b64(w, c.key_data + c.key_off[r], c.key_off[r + 1] - c.key_off[r], bit(c.key_valid, r));
        w = PUT_LITERAL(w, K_VALUE);
        w = put_b64(w, c.value_data + c.value_off[r], c.value_off[r + 1] - c.value_off[r], bit(c.value_valid, r));
        w = PUT_LITERAL(w, K_HEADERS);
        for (int32_t h = c.header_off[r]; h < c.header_off[r + 1]; h++) {
            if (h > c.header_off[r]) {
                w = PUT_LITERAL(w, ", ");
            }
            w = PUT_LITERAL(w, K_HKEY);
            w = put_json_str(w, c.hkey_data + c.hkey_off[h], c.hkey_off[h + 1] - c.hkey_off[h]);
            w = PUT_LITERAL(w, K_VALUE);
            w = put_b64(w, c.hvalue_data + c.hvalue_off[h], c.hvalue_off[h + 1] - c.hvalue_off[h],
                        bit(c.hvalue_valid, h));
            *w++ = '}';
        }
        *w++ = ']';
        w = put(w, per_batch[2 * b + 1].data, per_batch[2 * b + 1].len);
    }
    Py_END_ALLOW_THREADS
    _PyBytes_Resize(&result, w - start); /* on failure it clears result and sets the error */
done:
    PyMem_Free(per_batch);
    release_cols(&c);
    PyBuffer_Release(&prefix);
    return result;
}
