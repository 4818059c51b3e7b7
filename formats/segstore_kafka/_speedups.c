/*
 * segstore_kafka._speedups: the hot loops of the Kafka RecordBatch v2 codec.
 *
 * decode_records(region, count, base_offset, base_timestamp, log_append_time, base_sequence)
 *     -> list[Record]: decode an uncompressed record region (the bytes after the
 *     61-byte batch header, or the decompressed stream).
 * encode_records(records, offset_deltas) -> (region bytes, base_timestamp, max_timestamp)
 * init(Record): remember the Record dataclass (slots) and where its slots live.
 *
 * These mirror _decode_records_py / _encode_records_py in batch.py exactly: the
 * same results, the same ValueError(message, position) on malformed input.  Every
 * read is bounds-checked against the end of the current record, so malformed
 * input raises and never reads out of bounds.  Record layout (DefaultRecord.java):
 *
 *     varint   length of the rest
 *     int8     attributes
 *     varlong  timestampDelta
 *     varint   offsetDelta
 *     varint   keyLength (<0: null), key
 *     varint   valueLength (<0: null), value
 *     varint   headerCount, then per header:
 *              varint keyLength (>= 0), UTF-8 key, varint valueLength (<0: null), value
 *
 * Varints are zigzag-encoded, 7 bits per byte, least significant group first.
 * The functions hold the GIL throughout and keep no state besides the Record
 * type set once by init(); they are safe to call from any thread.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>

#define MAX_VARINT_BYTES 5
#define MAX_VARLONG_BYTES 10
#define NULL_LENGTH (-1)
#define NO_SEQUENCE (-1)
#define NO_TIMESTAMP (-1)
/* The smallest record: length, attributes, timestampDelta, offsetDelta, keyLength,
 * valueLength and headerCount of one byte each. */
#define MIN_RECORD_SIZE 7

enum { F_OFFSET, F_TIMESTAMP, F_KEY, F_VALUE, F_HEADERS, F_ATTRIBUTES, F_SIZE, F_SEQUENCE, N_FIELDS };
static const char *const FIELD_NAMES[N_FIELDS] = {
    "offset", "timestamp", "key", "value", "headers", "attributes", "size_in_bytes", "sequence",
};

static PyTypeObject *record_type = NULL;
static Py_ssize_t field_offset[N_FIELDS];

/* ------------------------------------------------------------------------------ */
/* varints */

enum { VARINT_OK = 0, VARINT_SHORT = 1, VARINT_BAD = 2 };

/* Unsigned 7-bit groups at buf[*pos], at most max_bytes of them, not past end. */
static int
read_unsigned(const uint8_t *buf, Py_ssize_t end, Py_ssize_t *pos, int max_bytes, uint64_t *out)
{
    uint64_t raw = 0;
    Py_ssize_t p = *pos;
    for (int i = 0; i < max_bytes; i++) {
        if (p >= end) {
            return VARINT_SHORT;
        }
        uint8_t byte = buf[p++];
        if (i == MAX_VARLONG_BYTES - 1 && (byte & 0x7E)) {
            return VARINT_BAD; /* more than 64 bits */
        }
        raw |= (uint64_t)(byte & 0x7F) << (7 * i);
        if (!(byte & 0x80)) {
            *pos = p;
            *out = raw;
            return VARINT_OK;
        }
    }
    return VARINT_BAD; /* max_bytes bytes, the last still saying "more follows" */
}

static int
read_varlong(const uint8_t *buf, Py_ssize_t end, Py_ssize_t *pos, int64_t *out)
{
    uint64_t raw;
    int rc = read_unsigned(buf, end, pos, MAX_VARLONG_BYTES, &raw);
    if (rc == VARINT_OK) {
        *out = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
    }
    return rc;
}

static int
read_varint(const uint8_t *buf, Py_ssize_t end, Py_ssize_t *pos, int32_t *out)
{
    uint64_t raw;
    int rc = read_unsigned(buf, end, pos, MAX_VARINT_BYTES, &raw);
    if (rc != VARINT_OK) {
        return rc;
    }
    if (raw > UINT32_MAX) {
        return VARINT_BAD;
    }
    *out = (int32_t)((uint32_t)(raw >> 1) ^ -(uint32_t)(raw & 1));
    return VARINT_OK;
}

static inline uint64_t
zigzag64(int64_t value)
{
    return ((uint64_t)value << 1) ^ (uint64_t)(value >> 63);
}

static inline int
unsigned_size(uint64_t raw)
{
    int n = 1;
    while (raw > 0x7F) {
        raw >>= 7;
        n++;
    }
    return n;
}

static inline uint8_t *
write_unsigned(uint8_t *out, uint64_t raw)
{
    while (raw > 0x7F) {
        *out++ = (uint8_t)((raw & 0x7F) | 0x80);
        raw >>= 7;
    }
    *out++ = (uint8_t)raw;
    return out;
}

/* ------------------------------------------------------------------------------ */
/* decode */

/* Producer sequences wrap past int32 max to 0 (DefaultRecordBatch.incrementSequence). */
static int64_t
increment_sequence(int64_t sequence, int64_t increment)
{
    if (sequence > INT32_MAX - increment) {
        return increment - (INT32_MAX - sequence) - 1;
    }
    return sequence + increment;
}

/* Raise ValueError(message, position): the shape batch.py turns into CorruptDataError. */
static void
set_problem(Py_ssize_t position, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    PyObject *message = PyUnicode_FromFormatV(format, args);
    va_end(args);
    if (message == NULL) {
        return;
    }
    PyObject *args_tuple = Py_BuildValue("(Nn)", message, position);
    if (args_tuple != NULL) {
        PyErr_SetObject(PyExc_ValueError, args_tuple);
        Py_DECREF(args_tuple);
    }
}

/* Outcome of decoding one record body. */
enum { BODY_OK = 0, BODY_PAST, BODY_VARINT, BODY_HCOUNT, BODY_HKEY, BODY_UTF8, BODY_LEFT, BODY_ERROR };

/* Bytes (or None for a negative length) at body[*pos]. */
static int
read_blob(const uint8_t *body, Py_ssize_t end, Py_ssize_t *pos, PyObject **out)
{
    int32_t length;
    int rc = read_varint(body, end, pos, &length);
    if (rc != VARINT_OK) {
        return rc == VARINT_SHORT ? BODY_PAST : BODY_VARINT;
    }
    if (length < 0) {
        Py_INCREF(Py_None);
        *out = Py_None;
        return BODY_OK;
    }
    if (length > end - *pos) {
        return BODY_PAST;
    }
    *out = PyBytes_FromStringAndSize((const char *)body + *pos, length);
    if (*out == NULL) {
        return BODY_ERROR;
    }
    *pos += length;
    return BODY_OK;
}

typedef struct {
    int attributes;
    int64_t ts_delta;
    int32_t offset_delta;
    int32_t bad_count; /* the negative header count or key length, for the message */
    Py_ssize_t left;   /* bytes after the fields */
    PyObject *key, *value, *headers;
} Body;

static void
clear_body(Body *b)
{
    Py_CLEAR(b->key);
    Py_CLEAR(b->value);
    Py_CLEAR(b->headers);
}

static int
decode_body(const uint8_t *body, Py_ssize_t end, Body *b)
{
    Py_ssize_t pos = 0;
    int32_t count, key_length;
    int rc;
    if (end < 1) {
        return BODY_PAST;
    }
    b->attributes = body[pos++];
    if ((rc = read_varlong(body, end, &pos, &b->ts_delta)) != VARINT_OK ||
        (rc = read_varint(body, end, &pos, &b->offset_delta)) != VARINT_OK) {
        return rc == VARINT_SHORT ? BODY_PAST : BODY_VARINT;
    }
    if ((rc = read_blob(body, end, &pos, &b->key)) != BODY_OK ||
        (rc = read_blob(body, end, &pos, &b->value)) != BODY_OK) {
        return rc;
    }
    if ((rc = read_varint(body, end, &pos, &count)) != VARINT_OK) {
        return rc == VARINT_SHORT ? BODY_PAST : BODY_VARINT;
    }
    if (count < 0) {
        b->bad_count = count;
        return BODY_HCOUNT;
    }
    b->headers = PyList_New(0);
    if (b->headers == NULL) {
        return BODY_ERROR;
    }
    for (int32_t i = 0; i < count; i++) {
        if ((rc = read_varint(body, end, &pos, &key_length)) != VARINT_OK) {
            return rc == VARINT_SHORT ? BODY_PAST : BODY_VARINT;
        }
        if (key_length < 0) {
            b->bad_count = key_length;
            return BODY_HKEY;
        }
        if (key_length > end - pos) {
            return BODY_PAST;
        }
        PyObject *header_key = PyUnicode_DecodeUTF8((const char *)body + pos, key_length, "strict");
        if (header_key == NULL) {
            if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
                PyErr_Clear();
                return BODY_UTF8;
            }
            return BODY_ERROR;
        }
        pos += key_length;
        PyObject *header_value = NULL;
        rc = read_blob(body, end, &pos, &header_value);
        if (rc != BODY_OK) {
            Py_DECREF(header_key);
            return rc;
        }
        PyObject *pair = PyTuple_New(2);
        if (pair == NULL) {
            Py_DECREF(header_key);
            Py_DECREF(header_value);
            return BODY_ERROR;
        }
        PyTuple_SET_ITEM(pair, 0, header_key);
        PyTuple_SET_ITEM(pair, 1, header_value);
        int appended = PyList_Append(b->headers, pair);
        Py_DECREF(pair);
        if (appended < 0) {
            return BODY_ERROR;
        }
    }
    if (pos != end) {
        b->left = end - pos;
        return BODY_LEFT;
    }
    return BODY_OK;
}

static inline void
set_slot(PyObject *obj, int field, PyObject *value)
{
    *(PyObject **)((char *)obj + field_offset[field]) = value; /* steals the reference */
}

/* A Record built without running its __init__: every slot set, references owned. */
static PyObject *
make_record(int64_t offset, PyObject *timestamp, Body *b, Py_ssize_t size, int64_t sequence)
{
    PyObject *obj = record_type->tp_alloc(record_type, 0);
    if (obj == NULL) {
        Py_DECREF(timestamp);
        return NULL;
    }
    PyObject *values[N_FIELDS] = {
        PyLong_FromLongLong(offset), timestamp, b->key, b->value, b->headers,
        PyLong_FromLong(b->attributes), PyLong_FromSsize_t(size), PyLong_FromLongLong(sequence),
    };
    b->key = b->value = b->headers = NULL; /* moved into the record */
    int failed = 0;
    for (int i = 0; i < N_FIELDS; i++) {
        if (values[i] == NULL) {
            failed = 1;
        }
        set_slot(obj, i, values[i]);
    }
    if (failed) {
        Py_DECREF(obj); /* slots left NULL are skipped by the dealloc */
        return NULL;
    }
    return obj;
}

static PyObject *
decode_records(PyObject *module, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t count;
    long long base_offset, base_timestamp, base_sequence;
    PyObject *log_append_time;
    if (record_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "segstore_kafka._speedups.init(Record) was not called");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "y*nLLOL", &view, &count, &base_offset, &base_timestamp,
                          &log_append_time, &base_sequence)) {
        return NULL;
    }
    const uint8_t *buf = view.buf;
    const Py_ssize_t end = view.len;
    int has_append_time = log_append_time != Py_None;
    long long append_time = 0;
    if (has_append_time) {
        append_time = PyLong_AsLongLong(log_append_time);
        if (append_time == -1 && PyErr_Occurred()) {
            PyBuffer_Release(&view);
            return NULL;
        }
    }
    /* A record takes at least MIN_RECORD_SIZE bytes: a huge count cannot allocate more. */
    Py_ssize_t capacity = count < 0 ? 0 : count;
    if (capacity > end / MIN_RECORD_SIZE + 1) {
        capacity = end / MIN_RECORD_SIZE + 1;
    }
    PyObject *out = PyList_New(capacity);
    if (out == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    Py_ssize_t pos = 0;
    Py_ssize_t index = 0;
    for (; index < count; index++) {
        Py_ssize_t start = pos;
        int32_t length;
        int rc = read_varint(buf, end, &pos, &length);
        if (rc == VARINT_SHORT) {
            set_problem(start, "%zd records within %zd bytes, found record %zd of %zd runs past them",
                        count, end, index, count);
            goto fail;
        }
        if (rc == VARINT_BAD) {
            set_problem(start, "record %zd of %zd: well-formed varints, found one too long or out of range",
                        index, count);
            goto fail;
        }
        if (length < 0) {
            set_problem(start, "record %zd of %zd: a length >= 0, found %d", index, count, (int)length);
            goto fail;
        }
        if (length > end - pos) {
            set_problem(start, "%zd records within %zd bytes, found record %zd of %zd runs past them",
                        count, end, index, count);
            goto fail;
        }
        if (index >= capacity) { /* unreachable: records are >= MIN_RECORD_SIZE bytes; kept as a guard */
            set_problem(start, "%zd records within %zd bytes, found record %zd of %zd runs past them",
                        count, end, index, count);
            goto fail;
        }
        Body b = {0};
        rc = decode_body(buf + pos, length, &b);
        if (rc != BODY_OK) {
            clear_body(&b);
            switch (rc) {
            case BODY_PAST:
                set_problem(start, "record %zd of %zd: fields within its %d bytes, found one running past them",
                            index, count, (int)length);
                break;
            case BODY_VARINT:
                set_problem(start, "record %zd of %zd: well-formed varints, found one too long or out of range",
                            index, count);
                break;
            case BODY_HCOUNT:
                set_problem(start, "record %zd of %zd: a header count >= 0, found %d", index, count,
                            (int)b.bad_count);
                break;
            case BODY_HKEY:
                set_problem(start, "record %zd of %zd: a header key length >= 0, found %d", index, count,
                            (int)b.bad_count);
                break;
            case BODY_UTF8:
                set_problem(start, "record %zd of %zd: UTF-8 header keys, found invalid UTF-8", index, count);
                break;
            case BODY_LEFT:
                set_problem(start, "record %zd of %zd: fields filling its %d bytes, found %zd bytes after them",
                            index, count, (int)length, b.left);
                break;
            default: /* BODY_ERROR: a Python exception (memory) is already set */
                break;
            }
            goto fail;
        }
        pos += length;
        long long offset, timestamp;
        int overflow = __builtin_add_overflow(base_offset, (long long)b.offset_delta, &offset);
        if (has_append_time) {
            timestamp = append_time;
        } else {
            overflow |= __builtin_add_overflow(base_timestamp, (long long)b.ts_delta, &timestamp);
        }
        if (overflow) {
            clear_body(&b);
            set_problem(start, "record %zd of %zd: an offset and timestamp within int64, found them past it",
                        index, count);
            goto fail;
        }
        int64_t sequence = base_sequence == NO_SEQUENCE ? NO_SEQUENCE
                           : increment_sequence(base_sequence, b.offset_delta);
        PyObject *ts_obj = PyLong_FromLongLong(timestamp);
        PyObject *record = ts_obj == NULL ? NULL : make_record(offset, ts_obj, &b, pos - start, sequence);
        if (record == NULL) {
            clear_body(&b);
            goto fail;
        }
        PyList_SET_ITEM(out, index, record);
    }
    if (pos != end) {
        set_problem(pos, "%zd records filling %zd bytes, found %zd bytes after them", count, end, end - pos);
        goto fail;
    }
    PyBuffer_Release(&view);
    return out;
fail:
    PyBuffer_Release(&view);
    Py_DECREF(out); /* unset items are NULL; list dealloc skips them */
    return NULL;
}

/* ------------------------------------------------------------------------------ */
/* encode */

typedef struct {
    uint8_t *data;
    Py_ssize_t len, cap;
} Out;

static int
reserve(Out *o, Py_ssize_t extra)
{
    if (o->len + extra <= o->cap) {
        return 0;
    }
    Py_ssize_t cap = o->cap ? o->cap : 4096;
    while (cap < o->len + extra) {
        if (cap > PY_SSIZE_T_MAX / 2) {
            PyErr_NoMemory();
            return -1;
        }
        cap *= 2;
    }
    uint8_t *grown = PyMem_Realloc(o->data, cap);
    if (grown == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    o->data = grown;
    o->cap = cap;
    return 0;
}

/* A key, value or header value as bytes: None (len -1), bytes, str (UTF-8) or a buffer. */
typedef struct {
    const char *p;
    Py_ssize_t len;
    Py_buffer view;
    int has_view;
} Blob;

static int
get_blob(PyObject *obj, Blob *blob, const char *what)
{
    blob->has_view = 0;
    if (obj == Py_None) {
        blob->p = NULL;
        blob->len = NULL_LENGTH;
    } else if (PyBytes_Check(obj)) {
        blob->p = PyBytes_AS_STRING(obj);
        blob->len = PyBytes_GET_SIZE(obj);
    } else if (PyUnicode_Check(obj)) {
        blob->p = PyUnicode_AsUTF8AndSize(obj, &blob->len);
        if (blob->p == NULL) {
            return -1;
        }
    } else if (PyObject_CheckBuffer(obj)) {
        if (PyObject_GetBuffer(obj, &blob->view, PyBUF_SIMPLE) < 0) {
            return -1;
        }
        blob->has_view = 1;
        blob->p = blob->view.buf;
        blob->len = blob->view.len;
    } else {
        PyErr_Format(PyExc_TypeError, "%s as bytes, str or None, found %.100s", what, Py_TYPE(obj)->tp_name);
        return -1;
    }
    if (blob->len > INT32_MAX) {
        if (blob->has_view) {
            PyBuffer_Release(&blob->view);
        }
        PyErr_Format(PyExc_ValueError, "%s of at most %d bytes, found %zd", what, INT32_MAX, blob->len);
        return -1;
    }
    return 0;
}

static void
release_blob(Blob *blob)
{
    if (blob->has_view) {
        PyBuffer_Release(&blob->view);
        blob->has_view = 0;
    }
}

static int
write_blob(Out *o, const Blob *blob)
{
    uint64_t raw = zigzag64(blob->len);
    if (reserve(o, MAX_VARINT_BYTES + (blob->len > 0 ? blob->len : 0)) < 0) {
        return -1;
    }
    uint8_t *p = write_unsigned(o->data + o->len, raw);
    if (blob->len > 0) {
        memcpy(p, blob->p, blob->len);
        p += blob->len;
    }
    o->len = p - o->data;
    return 0;
}

static int
write_varlong(Out *o, int64_t value)
{
    if (reserve(o, MAX_VARLONG_BYTES) < 0) {
        return -1;
    }
    o->len = write_unsigned(o->data + o->len, zigzag64(value)) - o->data;
    return 0;
}

static PyObject *str_key, *str_value, *str_timestamp, *str_headers;

/* (key, value, timestamp, headers) of a 3/4-tuple or list, or of an object's attributes; new refs. */
static int
record_fields(PyObject *record, PyObject *fields[4])
{
    if (PyTuple_Check(record) || PyList_Check(record)) {
        Py_ssize_t n = PySequence_Fast_GET_SIZE(record);
        if (n != 3 && n != 4) {
            PyErr_Format(PyExc_ValueError, "a record tuple (key, value, timestamp[, headers]), found %zd items", n);
            return -1;
        }
        PyObject **items = PySequence_Fast_ITEMS(record);
        for (int i = 0; i < 4; i++) {
            fields[i] = i < n ? items[i] : Py_None;
            Py_INCREF(fields[i]);
        }
        return 0;
    }
    PyObject *names[4] = {str_key, str_value, str_timestamp, str_headers};
    for (int i = 0; i < 4; i++) {
        fields[i] = PyObject_GetAttr(record, names[i]);
        if (fields[i] == NULL) {
            while (i-- > 0) {
                Py_DECREF(fields[i]);
            }
            return -1;
        }
    }
    return 0;
}

static int
encode_headers(Out *o, PyObject *headers)
{
    if (headers == Py_None) {
        return write_varlong(o, 0);
    }
    PyObject *seq = PySequence_Fast(headers, "headers as a sequence of (str, bytes | None) pairs");
    if (seq == NULL) {
        return -1;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    int rc = n > INT32_MAX ? -1 : write_varlong(o, n);
    if (n > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "at most 2**31-1 headers");
    }
    for (Py_ssize_t i = 0; rc == 0 && i < n; i++) {
        /* a new reference: a list or tuple itself, or a list made from another sequence; the item is
         * held while that runs, as arbitrary code could change the headers list */
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
        Py_INCREF(item);
        PyObject *pair = PySequence_Fast(item, "a header as a (key, value) pair");
        Py_DECREF(item);
        if (pair == NULL) {
            rc = -1;
            break;
        }
        if (PySequence_Fast_GET_SIZE(pair) != 2) {
            PyErr_SetString(PyExc_ValueError, "a header as a (key, value) pair");
            Py_DECREF(pair);
            rc = -1;
            break;
        }
        PyObject *key = PySequence_Fast_GET_ITEM(pair, 0);
        PyObject *value = PySequence_Fast_GET_ITEM(pair, 1);
        Blob kb, vb;
        if (!PyUnicode_Check(key)) {
            PyErr_Format(PyExc_TypeError, "a str header key, found %.100s", Py_TYPE(key)->tp_name);
            rc = -1;
        } else if (get_blob(key, &kb, "header key") < 0 || get_blob(value, &vb, "header value") < 0) {
            rc = -1; /* a str key holds no buffer view to release */
        } else {
            rc = write_blob(o, &kb);
            if (rc == 0) {
                rc = write_blob(o, &vb);
            }
            release_blob(&vb);
        }
        Py_DECREF(pair);
    }
    Py_DECREF(seq);
    return rc;
}

static PyObject *
encode_records(PyObject *module, PyObject *args)
{
    PyObject *records, *offset_deltas;
    if (!PyArg_ParseTuple(args, "OO", &records, &offset_deltas)) {
        return NULL;
    }
    PyObject *seq = PySequence_Fast(records, "records as a sequence");
    if (seq == NULL) {
        return NULL;
    }
    PyObject *deltas = NULL;
    if (offset_deltas != Py_None) {
        deltas = PySequence_Fast(offset_deltas, "offset deltas as a sequence of ints");
        if (deltas == NULL) {
            Py_DECREF(seq);
            return NULL;
        }
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (deltas != NULL && PySequence_Fast_GET_SIZE(deltas) < n) {
        PyErr_SetString(PyExc_ValueError, "an offset delta for every record");
        goto fail_early;
    }
    Out o = {NULL, 0, 0};
    long long base_timestamp = NO_TIMESTAMP, max_timestamp = NO_TIMESTAMP;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *fields[4];
        PyObject *record = PySequence_Fast_GET_ITEM(seq, i);
        Py_INCREF(record); /* held while attribute lookups run arbitrary code */
        int got = record_fields(record, fields);
        Py_DECREF(record);
        if (got < 0) {
            goto fail;
        }
        long long timestamp = NO_TIMESTAMP;
        long long offset_delta = i;
        int ok = 1;
        if (fields[2] != Py_None) {
            timestamp = PyLong_AsLongLong(fields[2]);
            ok = !(timestamp == -1 && PyErr_Occurred());
        }
        if (ok && deltas != NULL) {
            PyObject *delta = PySequence_Fast_GET_ITEM(deltas, i);
            Py_INCREF(delta);
            offset_delta = PyLong_AsLongLong(delta);
            Py_DECREF(delta);
            ok = !(offset_delta == -1 && PyErr_Occurred());
        }
        if (ok && (offset_delta < INT32_MIN || offset_delta > INT32_MAX)) {
            PyErr_Format(PyExc_ValueError, "varint must fit in int32, found %lld", offset_delta);
            ok = 0;
        }
        if (ok && i == 0) {
            base_timestamp = timestamp;
        }
        long long ts_delta = 0;
        if (ok && __builtin_sub_overflow(timestamp, base_timestamp, &ts_delta)) {
            PyErr_Format(PyExc_ValueError, "varlong must fit in int64, found a timestamp delta of %lld - %lld",
                         timestamp, base_timestamp);
            ok = 0;
        }
        if (timestamp > max_timestamp) {
            max_timestamp = timestamp;
        }
        /* Body at start + MAX_VARINT_BYTES, then moved down behind its length varint. */
        Py_ssize_t start = o.len;
        Blob kb, vb;
        kb.has_view = vb.has_view = 0;
        ok = ok && get_blob(fields[0], &kb, "key") == 0;
        ok = ok && get_blob(fields[1], &vb, "value") == 0;
        ok = ok && reserve(&o, MAX_VARINT_BYTES + 1) == 0;
        if (ok) {
            o.len += MAX_VARINT_BYTES;
            o.data[o.len++] = 0; /* attributes */
        }
        ok = ok && write_varlong(&o, ts_delta) == 0 && write_varlong(&o, offset_delta) == 0;
        ok = ok && write_blob(&o, &kb) == 0 && write_blob(&o, &vb) == 0;
        release_blob(&kb);
        release_blob(&vb);
        ok = ok && encode_headers(&o, fields[3]) == 0;
        for (int f = 0; f < 4; f++) {
            Py_DECREF(fields[f]);
        }
        if (!ok) {
            goto fail;
        }
        Py_ssize_t body = o.len - start - MAX_VARINT_BYTES;
        if (body > INT32_MAX) {
            PyErr_SetString(PyExc_ValueError, "a record of at most 2**31-1 bytes");
            goto fail;
        }
        uint8_t length[MAX_VARINT_BYTES];
        int length_size = (int)(write_unsigned(length, zigzag64(body)) - length);
        memmove(o.data + start + length_size, o.data + start + MAX_VARINT_BYTES, body);
        memcpy(o.data + start, length, length_size);
        o.len = start + length_size + body;
    }
    Py_DECREF(seq);
    Py_XDECREF(deltas);
    PyObject *region = PyBytes_FromStringAndSize((const char *)o.data, o.len);
    PyMem_Free(o.data);
    if (region == NULL) {
        return NULL;
    }
    return Py_BuildValue("(NLL)", region, base_timestamp, max_timestamp);
fail:
    PyMem_Free(o.data);
fail_early:
    Py_DECREF(seq);
    Py_XDECREF(deltas);
    return NULL;
}

/* ------------------------------------------------------------------------------ */
/* init */

static PyObject *
init(PyObject *module, PyObject *cls)
{
    if (!PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "init() takes the Record class");
        return NULL;
    }
    Py_ssize_t offsets[N_FIELDS];
    for (int i = 0; i < N_FIELDS; i++) {
        PyObject *descr = PyObject_GetAttrString(cls, FIELD_NAMES[i]);
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
            PyErr_Format(PyExc_TypeError, "Record.%s must be a __slots__ member", FIELD_NAMES[i]);
            return NULL;
        }
    }
    memcpy(field_offset, offsets, sizeof(offsets));
    Py_INCREF(cls);
    Py_XSETREF(record_type, (PyTypeObject *)cls);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"init", init, METH_O, "init(Record): the slots dataclass decode_records builds."},
    {"decode_records", decode_records, METH_VARARGS,
     "decode_records(region, count, base_offset, base_timestamp, log_append_time, base_sequence) -> list"},
    {"encode_records", encode_records, METH_VARARGS,
     "encode_records(records, offset_deltas) -> (region, base_timestamp, max_timestamp)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "segstore_kafka._speedups",
    "C loops of the Kafka RecordBatch v2 record codec (see batch.py for the reference).", -1, methods,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    str_key = PyUnicode_InternFromString("key");
    str_value = PyUnicode_InternFromString("value");
    str_timestamp = PyUnicode_InternFromString("timestamp");
    str_headers = PyUnicode_InternFromString("headers");
    if (!str_key || !str_value || !str_timestamp || !str_headers) {
        return NULL;
    }
    return PyModule_Create(&module_def);
}
