/*
 * segstore_kafka._speedups: the hot loops of the Kafka RecordBatch v2 codec.
 *
 * decode_records(region, count, base_offset, base_timestamp, log_append_time, base_sequence)
 *     -> list[Record]: decode an uncompressed record region (the bytes after the
 *     61-byte batch header, or the decompressed stream).
 * encode_records(records, offset_deltas) -> (region bytes, base_timestamp, max_timestamp)
 * init(Record): remember the Record dataclass (slots) and where its slots live.
 * crc32c(data, crc=0) -> int: CRC-32C (SSE 4.2 on three blocks at once where the CPU has it, else a table).
 * decode_columns(log, pos, end, want, decompress, buffers): a log region's v2 batches into
 *     the column buffers of columnar.py (see there and the section below).
 * json_lines(prefix, timestamp_types, tails, buffers, n_rows, n_batches) -> bytes: the
 *     dump --json lines of those buffers (ASCII).
 * text_lines(heads, timestamp_types, tails, buffers, n_rows, n_batches, start) -> bytes: the text
 *     dump's batch and record lines of those buffers (_speedups_text.c).
 * encode_columns / encode_batch: a records region / a whole batch from Arrow column buffers
 *     (arrowencode.py).
 * plain_groups / encode_plain / plain_results / init_results(AppendResult): append_batch of
 *     plain dicts (dictappend.py): grouped by partition, one whole batch per partition, results.
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

#include "speedups_common.h"

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
static inline int
read_unsigned(const uint8_t *buf, Py_ssize_t end, Py_ssize_t *pos, int max_bytes, uint64_t *out)
{
    uint64_t raw = 0;
    Py_ssize_t p = *pos;
    if (p < end && buf[p] < 0x80) {     /* one byte: header lengths, deltas of small batches */
        *pos = p + 1;
        *out = buf[p];
        return VARINT_OK;
    }
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

static inline int
read_varlong(const uint8_t *buf, Py_ssize_t end, Py_ssize_t *pos, int64_t *out)
{
    uint64_t raw;
    int rc = read_unsigned(buf, end, pos, MAX_VARLONG_BYTES, &raw);
    if (rc == VARINT_OK) {
        *out = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
    }
    return rc;
}

static inline int
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

/* A C pass that gives up the GIL keeps its thread state in *released (NULL while it holds the
 * GIL): take_gil takes the GIL back from it, drop_gil gives the GIL up into it. */
static inline void
take_gil(PyThreadState **released)
{
    PyEval_RestoreThread(*released);
    *released = NULL;
}

static inline void
drop_gil(PyThreadState **released)
{
    *released = PyEval_SaveThread();
}

typedef struct {
    uint8_t *data;
    Py_ssize_t len, cap;
    PyObject *bytes;    /* when set, data is this bytes object's buffer (grown with _PyBytes_Resize) */
    PyThreadState *released;    /* when set, the GIL is released: reserve takes it back to grow */
} Out;

static int grow(Out *o, Py_ssize_t extra);

static inline int
reserve(Out *o, Py_ssize_t extra)
{
    if (o->len + extra <= o->cap) {
        return 0;
    }
    if (o->released == NULL) {
        return grow(o, extra);
    }
    take_gil(&o->released);
    int rc = grow(o, extra);
    if (rc == 0) {
        drop_gil(&o->released);
    }
    return rc;      /* -1: the GIL held, the error set */
}

static int
grow(Out *o, Py_ssize_t extra)
{
    Py_ssize_t cap = o->cap ? o->cap : 4096;
    while (cap < o->len + extra) {
        if (cap > PY_SSIZE_T_MAX / 2) {
            PyErr_NoMemory();
            return -1;
        }
        cap *= 2;
    }
    if (o->bytes != NULL) {
        if (_PyBytes_Resize(&o->bytes, cap) < 0) {
            o->data = NULL;
            return -1;
        }
        o->data = (uint8_t *)PyBytes_AS_STRING(o->bytes);
        o->cap = cap;
        return 0;
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
/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78): the v2 batch checksum */

static uint32_t crc32c_table[256];
static int crc32c_hardware = 0;

/* The hardware path runs three independent CRCs over three adjacent blocks at once (the
 * crc32 instruction has a latency of three cycles and a throughput of one), then joins
 * them.  Joining needs the CRC state after ``length`` more zero bytes, which is linear in
 * the state over GF(2): four tables of 256 words per block length, built at import. */
#define CRC32C_LONG 8192
#define CRC32C_SHORT 256
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

static void
crc32c_shift_init(uint32_t table[4][256], size_t zeros)
{
    uint32_t basis[32];
    for (int bit = 0; bit < 32; bit++) {
        basis[bit] = crc32c_zeros_slow(1u << bit, zeros);
    }
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
    crc32c_shift_init(crc32c_shift_long, CRC32C_LONG);
    crc32c_shift_init(crc32c_shift_short, CRC32C_SHORT);
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

/* ------------------------------------------------------------------------------ */
/* columnar decode: a log region's v2 batches into column buffers (columnar.py)
 *
 * decode_columns(log, pos, end, want, decompress, buffers) walks the batches
 * that start in [pos, end) of the .log bytes ``log`` and fills the column
 * buffers of columnar.py (BUFFERS names them, in order).  A batch is taken only
 * whole and only when everything the reference path checks holds: the entry
 * lies inside ``log``, magic 2, the v2 minimum length, the CRC-32C, a record
 * count >= 0, its (decompressed) records filling the region exactly with valid
 * varints, UTF-8 header keys and offsets/timestamps within int64.  Any other
 * batch (a legacy v0/v1 entry, a torn or corrupt one) stops the walk *before* it
 * with STOP_DECLINE: columnar.py then hands that batch to the reference codec in
 * batch.py, which decodes it or raises its typed error, so errors and their
 * positions are the reference's by construction.  A batch that does not fit in
 * what is left of a buffer stops the walk before it with STOP_FULL and the mask
 * of the buffers that were short.
 *
 * Compressed batches are inflated by calling ``decompress(codec, region, pos)``
 * (columnar.py's one call into compression.py); an exception from it is left to
 * the reference path to raise again (STOP_DECLINE).  Keys, values and headers are
 * copied (memcpy) into one contiguous data buffer per column.
 */

enum { STOP_END = 0, STOP_FULL = 1, STOP_DECLINE = 2 };
enum { WANT_KEY = 1, WANT_VALUE = 2, WANT_HEADERS = 4 };
enum {
    NEED_BATCHES = 1, NEED_ROWS = 2, NEED_KEY = 4, NEED_VALUE = 8, NEED_HEADERS = 16, NEED_HKEY = 32,
    NEED_HVALUE = 64,
};

/* One row per batch (columnar.BATCH_DTYPE, native byte order). */
typedef struct {
    int64_t base_offset;
    int64_t position;
    int64_t base_timestamp;
    int64_t max_timestamp;
    int64_t producer_id;
    int64_t last_offset_delta; /* a legacy wrapper's offset span is not bounded by int32 */
    int32_t size;
    int32_t leader_epoch;
    int32_t base_sequence;
    int32_t record_count;
    uint32_t crc;
    int32_t first_row;
    int16_t attributes;
    int16_t producer_epoch;
    int8_t magic;
    int8_t pad_[3];
} BatchRow;
_Static_assert(sizeof(BatchRow) == 80, "BatchRow is columnar.BATCH_DTYPE");

/* The buffers, in columnar.BUFFERS order. */
enum {
    B_BATCHES, B_OFFSET, B_TIMESTAMP, B_SEQUENCE, B_ROW_BATCH,
    B_KEY_OFFSETS, B_KEY_VALID, B_KEY_DATA, B_VALUE_OFFSETS, B_VALUE_VALID, B_VALUE_DATA,
    B_HEADER_OFFSETS, B_HKEY_OFFSETS, B_HKEY_DATA, B_HVALUE_OFFSETS, B_HVALUE_VALID, B_HVALUE_DATA,
    N_BUFFERS,
};

typedef struct {
    Py_ssize_t batches, rows, key, value, headers, hkey, hvalue, key_nulls, value_nulls, hvalue_nulls;
} Counts;

typedef struct {
    Py_buffer views[N_BUFFERS];
    int held;
    BatchRow *batch;
    int64_t *offset, *timestamp;
    int32_t *sequence, *row_batch, *key_off, *value_off, *header_off, *hkey_off, *hvalue_off;
    uint8_t *key_valid, *value_valid, *hvalue_valid, *key_data, *value_data, *hkey_data, *hvalue_data;
    Counts cap, n;
    int want;
} Cols;

static void
release_cols(Cols *c)
{
    for (int i = 0; i < c->held; i++) {
        PyBuffer_Release(&c->views[i]);
    }
    c->held = 0;
}

/* Capacities from the buffer sizes; offsets arrays hold one more entry than their rows. */
static int
get_cols(PyObject *buffers, Cols *c, int writable)
{
    if (!PyTuple_Check(buffers) || PyTuple_GET_SIZE(buffers) != N_BUFFERS) {
        PyErr_Format(PyExc_TypeError, "a tuple of %d column buffers", N_BUFFERS);
        return -1;
    }
    for (int i = 0; i < N_BUFFERS; i++) {
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(buffers, i), &c->views[i],
                               (writable ? PyBUF_WRITABLE : 0) | PyBUF_C_CONTIGUOUS) < 0) {
            release_cols(c);
            return -1;
        }
        c->held = i + 1;
    }
    Py_buffer *v = c->views;
    c->batch = v[B_BATCHES].buf;
    c->offset = v[B_OFFSET].buf;
    c->timestamp = v[B_TIMESTAMP].buf;
    c->sequence = v[B_SEQUENCE].buf;
    c->row_batch = v[B_ROW_BATCH].buf;
    c->key_off = v[B_KEY_OFFSETS].buf;
    c->key_valid = v[B_KEY_VALID].buf;
    c->key_data = v[B_KEY_DATA].buf;
    c->value_off = v[B_VALUE_OFFSETS].buf;
    c->value_valid = v[B_VALUE_VALID].buf;
    c->value_data = v[B_VALUE_DATA].buf;
    c->header_off = v[B_HEADER_OFFSETS].buf;
    c->hkey_off = v[B_HKEY_OFFSETS].buf;
    c->hkey_data = v[B_HKEY_DATA].buf;
    c->hvalue_off = v[B_HVALUE_OFFSETS].buf;
    c->hvalue_valid = v[B_HVALUE_VALID].buf;
    c->hvalue_data = v[B_HVALUE_DATA].buf;
    Py_ssize_t rows = v[B_OFFSET].len / 8;
#define MIN_CAP(x, y) ((x) < (y) ? (x) : (y))
    rows = MIN_CAP(rows, v[B_TIMESTAMP].len / 8);
    rows = MIN_CAP(rows, v[B_SEQUENCE].len / 4);
    rows = MIN_CAP(rows, v[B_ROW_BATCH].len / 4);
    rows = MIN_CAP(rows, v[B_HEADER_OFFSETS].len / 4 - 1);
    if (c->want & WANT_KEY) {
        rows = MIN_CAP(rows, MIN_CAP(v[B_KEY_OFFSETS].len / 4 - 1, v[B_KEY_VALID].len * 8));
    }
    if (c->want & WANT_VALUE) {
        rows = MIN_CAP(rows, MIN_CAP(v[B_VALUE_OFFSETS].len / 4 - 1, v[B_VALUE_VALID].len * 8));
    }
    Py_ssize_t headers = MIN_CAP(v[B_HKEY_OFFSETS].len / 4 - 1, v[B_HVALUE_OFFSETS].len / 4 - 1);
    headers = MIN_CAP(headers, v[B_HVALUE_VALID].len * 8);
#undef MIN_CAP
    c->cap.batches = v[B_BATCHES].len / (Py_ssize_t)sizeof(BatchRow);
    c->cap.rows = rows < 0 ? 0 : rows;
    c->cap.key = v[B_KEY_DATA].len;
    c->cap.value = v[B_VALUE_DATA].len;
    c->cap.headers = (c->want & WANT_HEADERS) && headers > 0 ? headers : 0;
    c->cap.hkey = v[B_HKEY_DATA].len;
    c->cap.hvalue = v[B_HVALUE_DATA].len;
    if (v[B_HEADER_OFFSETS].len < 4 || ((c->want & WANT_KEY) && v[B_KEY_OFFSETS].len < 4) ||
        ((c->want & WANT_VALUE) && v[B_VALUE_OFFSETS].len < 4) ||
        ((c->want & WANT_HEADERS) && (v[B_HKEY_OFFSETS].len < 4 || v[B_HVALUE_OFFSETS].len < 4))) {
        PyErr_SetString(PyExc_ValueError, "offsets buffers of at least one entry");
        release_cols(c);
        return -1;
    }
    memset(&c->n, 0, sizeof(c->n));
    if (!writable) {
        return 0;
    }
    c->header_off[0] = 0;
    if (c->want & WANT_KEY) {
        c->key_off[0] = 0;
    }
    if (c->want & WANT_VALUE) {
        c->value_off[0] = 0;
    }
    if (c->want & WANT_HEADERS) {
        c->hkey_off[0] = 0;
        c->hvalue_off[0] = 0;
    }
    return 0;
}

static inline void
set_bit(uint8_t *bitmap, Py_ssize_t i, int on)
{
    if (on) {
        bitmap[i >> 3] |= (uint8_t)(1u << (i & 7));
    } else {
        bitmap[i >> 3] &= (uint8_t)~(1u << (i & 7));
    }
}

static inline uint32_t
be32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static inline uint16_t
be16(const uint8_t *p)
{
    return (uint16_t)(((uint16_t)p[0] << 8) | p[1]);
}

static inline uint64_t
be64(const uint8_t *p)
{
    return ((uint64_t)be32(p) << 32) | be32(p + 4);
}

/* A blob (length varint, bytes) at body[pos]: -1 when bad, else 0 with its start and length (< 0: null). */
static inline int
col_blob(const uint8_t *body, Py_ssize_t end, Py_ssize_t *pos, Py_ssize_t *start, int32_t *length)
{
    if (read_varint(body, end, pos, length) != VARINT_OK) {
        return -1;
    }
    if (*length < 0) {
        return 0;
    }
    if (*length > end - *pos) {
        return -1;
    }
    *start = *pos;
    *pos += *length;
    return 0;
}

/* Outcome of one batch's records: OK, DECLINE (the reference decides), or FULL with c->need. */
enum { REC_OK = 0, REC_DECLINE = 1, REC_FULL = 2 };

static int
decode_column_records(const uint8_t *buf, Py_ssize_t end, const BatchRow *batch, int log_append_time,
                      Cols *c, int *need)
{
    const int want = c->want;
    Py_ssize_t pos = 0;
    for (int32_t index = 0; index < batch->record_count; index++) {
        int32_t length;
        if (read_varint(buf, end, &pos, &length) != VARINT_OK || length < 0 || length > end - pos ||
            length < 1) {
            return REC_DECLINE;
        }
        const uint8_t *body = buf + pos;
        Py_ssize_t bp = 1;
        int64_t ts_delta;
        int32_t offset_delta, key_len, value_len, header_count;
        Py_ssize_t key_at = 0, value_at = 0;
        if (read_varlong(body, length, &bp, &ts_delta) != VARINT_OK ||
            read_varint(body, length, &bp, &offset_delta) != VARINT_OK ||
            col_blob(body, length, &bp, &key_at, &key_len) < 0 ||
            col_blob(body, length, &bp, &value_at, &value_len) < 0 ||
            read_varint(body, length, &bp, &header_count) != VARINT_OK || header_count < 0) {
            return REC_DECLINE;
        }
        Py_ssize_t row = c->n.rows;
        if (row >= c->cap.rows) {
            *need |= NEED_ROWS;
            return REC_FULL;
        }
        if (want & WANT_HEADERS) {
            if (header_count > c->cap.headers - c->n.headers) {
                *need |= NEED_HEADERS;
                return REC_FULL;
            }
        }
        for (int32_t h = 0; h < header_count; h++) {
            int32_t hkey_len, hvalue_len;
            Py_ssize_t hkey_at = 0, hvalue_at = 0;
            if (read_varint(body, length, &bp, &hkey_len) != VARINT_OK || hkey_len < 0 ||
                hkey_len > length - bp) {
                return REC_DECLINE;
            }
            hkey_at = bp;
            bp += hkey_len;
            if (!valid_utf8(body + hkey_at, hkey_len, 0) || col_blob(body, length, &bp, &hvalue_at, &hvalue_len) < 0) {
                return REC_DECLINE;
            }
            if (want & WANT_HEADERS) {
                Py_ssize_t hi = c->n.headers;
                if (hkey_len > c->cap.hkey - c->n.hkey) {
                    *need |= NEED_HKEY;
                    return REC_FULL;
                }
                if (hvalue_len > c->cap.hvalue - c->n.hvalue) {
                    *need |= NEED_HVALUE;
                    return REC_FULL;
                }
                copy_short(c->hkey_data + c->n.hkey, body + hkey_at, (size_t)hkey_len);
                c->n.hkey += hkey_len;
                c->hkey_off[hi + 1] = (int32_t)c->n.hkey;
                set_bit(c->hvalue_valid, hi, hvalue_len >= 0);
                if (hvalue_len >= 0) {
                    copy_short(c->hvalue_data + c->n.hvalue, body + hvalue_at, (size_t)hvalue_len);
                    c->n.hvalue += hvalue_len;
                } else {
                    c->n.hvalue_nulls++;
                }
                c->hvalue_off[hi + 1] = (int32_t)c->n.hvalue;
                c->n.headers = hi + 1;
            }
        }
        if (bp != length) {
            return REC_DECLINE;
        }
        int64_t offset, timestamp;
        int overflow = __builtin_add_overflow(batch->base_offset, (int64_t)offset_delta, &offset);
        if (log_append_time) {
            timestamp = batch->max_timestamp;
        } else {
            overflow |= __builtin_add_overflow(batch->base_timestamp, ts_delta, &timestamp);
        }
        if (overflow) {
            return REC_DECLINE;
        }
        if (want & WANT_KEY) {
            if (key_len > c->cap.key - c->n.key) {
                *need |= NEED_KEY;
                return REC_FULL;
            }
            set_bit(c->key_valid, row, key_len >= 0);
            if (key_len >= 0) {
                memcpy(c->key_data + c->n.key, body + key_at, key_len);
                c->n.key += key_len;
            } else {
                c->n.key_nulls++;
            }
            c->key_off[row + 1] = (int32_t)c->n.key;
        }
        if (want & WANT_VALUE) {
            if (value_len > c->cap.value - c->n.value) {
                *need |= NEED_VALUE;
                return REC_FULL;
            }
            set_bit(c->value_valid, row, value_len >= 0);
            if (value_len >= 0) {
                memcpy(c->value_data + c->n.value, body + value_at, value_len);
                c->n.value += value_len;
            } else {
                c->n.value_nulls++;
            }
            c->value_off[row + 1] = (int32_t)c->n.value;
        }
        c->offset[row] = offset;
        c->timestamp[row] = timestamp;
        c->sequence[row] = (int32_t)(batch->base_sequence == NO_SEQUENCE
                                         ? NO_SEQUENCE
                                         : increment_sequence(batch->base_sequence, offset_delta));
        c->row_batch[row] = (int32_t)c->n.batches;
        c->header_off[row + 1] = (int32_t)c->n.headers;
        c->n.rows = row + 1;
        pos += length;
    }
    return pos == end ? REC_OK : REC_DECLINE;
}

#define V2_HEADER_SIZE 61
#define V2_MIN_LENGTH (V2_HEADER_SIZE - 12)
#define LEGACY_MIN_LENGTH 14
#define CRC_COVERED_FROM 21
#define CODEC_MASK 0x07
#define MAX_CODEC 4
#define TIMESTAMP_TYPE_FLAG 0x08

/* One batch at log[pos]: REC_OK (added, *size set), REC_DECLINE, REC_FULL, or -1 (exception set).
 * Called without the GIL (*released): it is taken only around the decompress call, and held on
 * return when -1. */
static int
decode_column_batch(const uint8_t *log, Py_ssize_t log_len, Py_ssize_t pos, PyObject *decompress, Cols *c,
                    Py_ssize_t *size, int *need, PyThreadState **released)
{
    Py_ssize_t remaining = log_len - pos;
    if (remaining < 17) {
        return REC_DECLINE;
    }
    const uint8_t *p = log + pos;
    int32_t length = (int32_t)be32(p + 8);
    if (length < LEGACY_MIN_LENGTH || (Py_ssize_t)length + 12 > remaining || p[16] != 2 || length < V2_MIN_LENGTH) {
        return REC_DECLINE;
    }
    *size = (Py_ssize_t)length + 12;
    BatchRow b;
    memset(&b, 0, sizeof(b));
    b.crc = be32(p + 17);
    if (crc32c(0, p + CRC_COVERED_FROM, *size - CRC_COVERED_FROM) != b.crc) {
        return REC_DECLINE;
    }
    b.base_offset = (int64_t)be64(p);
    b.position = pos;
    b.size = (int32_t)*size;
    b.leader_epoch = (int32_t)be32(p + 12);
    b.magic = 2;
    b.attributes = (int16_t)be16(p + 21);
    b.last_offset_delta = (int32_t)be32(p + 23);
    b.base_timestamp = (int64_t)be64(p + 27);
    b.max_timestamp = (int64_t)be64(p + 35);
    b.producer_id = (int64_t)be64(p + 43);
    b.producer_epoch = (int16_t)be16(p + 51);
    b.base_sequence = (int32_t)be32(p + 53);
    b.record_count = (int32_t)be32(p + 57);
    b.first_row = (int32_t)c->n.rows;
    int codec = b.attributes & CODEC_MASK;
    if (b.record_count < 0 || codec > MAX_CODEC) {
        return REC_DECLINE;
    }
    if (c->n.batches >= c->cap.batches) {
        *need |= NEED_BATCHES;
        return REC_FULL;
    }
    const uint8_t *region = p + V2_HEADER_SIZE;
    Py_ssize_t region_len = *size - V2_HEADER_SIZE;
    PyObject *inflated = NULL;
    Py_buffer inflated_view;
    if (codec != 0) {
        take_gil(released);
        PyObject *view = PyMemoryView_FromMemory((char *)region, region_len, PyBUF_READ);
        if (view == NULL) {
            return -1;
        }
        inflated = PyObject_CallFunction(decompress, "iOn", codec, view, pos + V2_HEADER_SIZE);
        Py_DECREF(view);
        if (inflated == NULL) {
            if (PyErr_ExceptionMatches(PyExc_Exception)) {
                PyErr_Clear(); /* the reference path raises it again, typed */
                drop_gil(released);
                return REC_DECLINE;
            }
            return -1;
        }
        if (PyObject_GetBuffer(inflated, &inflated_view, PyBUF_SIMPLE) < 0) {
            Py_DECREF(inflated);
            return -1;
        }
        drop_gil(released);     /* inflated is held: its bytes stay while the records are read */
        region = inflated_view.buf;
        region_len = inflated_view.len;
    }
    int rc;
    /* Every record takes MIN_RECORD_SIZE bytes: a larger count cannot decode (and must not be
     * answered by growing the buffers). */
    if (b.record_count > region_len / MIN_RECORD_SIZE + 1) {
        rc = REC_DECLINE;
    } else if (b.record_count > c->cap.rows - c->n.rows) {
        *need |= NEED_ROWS;
        rc = REC_FULL;
    } else {
        Counts saved = c->n;
        rc = decode_column_records(region, region_len, &b, b.attributes & TIMESTAMP_TYPE_FLAG, c, need);
        if (rc != REC_OK) {
            c->n = saved;
        } else {
            c->batch[c->n.batches++] = b;
        }
    }
    if (inflated != NULL) {
        take_gil(released);
        PyBuffer_Release(&inflated_view);
        Py_DECREF(inflated);
        drop_gil(released);
    }
    return rc;
}

static PyObject *
decode_columns(PyObject *module, PyObject *args)
{
    Py_buffer log;
    Py_ssize_t pos, end;
    int want;
    PyObject *decompress, *buffers;
    if (!PyArg_ParseTuple(args, "y*nniOO", &log, &pos, &end, &want, &decompress, &buffers)) {
        return NULL;
    }
    Cols c;
    memset(&c, 0, sizeof(c));
    c.want = want;
    if (get_cols(buffers, &c, 1) < 0) {
        PyBuffer_Release(&log);
        return NULL;
    }
    if (end > log.len) {
        end = log.len;
    }
    int status = STOP_END, need = 0;
    /* The walk holds no Python object but a compressed batch's inflated bytes (the GIL taken
     * back for the decompress call): another thread runs meanwhile (segstore.overlap). */
    PyThreadState *released;
    drop_gil(&released);
    while (pos < end) {
        Py_ssize_t size = 0;
        int rc = decode_column_batch(log.buf, log.len, pos, decompress, &c, &size, &need, &released);
        if (rc < 0) {       /* the GIL held */
            release_cols(&c);
            PyBuffer_Release(&log);
            return NULL;
        }
        if (rc == REC_DECLINE) {
            status = STOP_DECLINE;
            break;
        }
        if (rc == REC_FULL) {
            status = STOP_FULL;
            break;
        }
        pos += size;
    }
    take_gil(&released);
    release_cols(&c);
    PyBuffer_Release(&log);
    Counts *n = &c.n;
    return Py_BuildValue("(in(nnnnnnnnnn)i)", status, pos, n->batches, n->rows, n->key, n->value,
                         n->headers, n->hkey, n->hvalue, n->key_nulls, n->value_nulls, n->hvalue_nulls, need);
}

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
#define INT_BOUND 20 /* "-9223372036854775808" */

static uint8_t *
put_int(uint8_t *w, int64_t v)
{
    char tmp[INT_BOUND];
    int n = 0;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0) {
        *w++ = '-';
    }
    while (n) {
        *w++ = (uint8_t)tmp[--n];
    }
    return w;
}

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

static const char HEX[] = "0123456789abcdef";

static uint8_t *
put_u_escape(uint8_t *w, uint32_t unit)
{
    *w++ = '\\';
    *w++ = 'u';
    *w++ = (uint8_t)HEX[(unit >> 12) & 15];
    *w++ = (uint8_t)HEX[(unit >> 8) & 15];
    *w++ = (uint8_t)HEX[(unit >> 4) & 15];
    *w++ = (uint8_t)HEX[unit & 15];
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
        bound += prefix.len + 2 * INT_BOUND + sizeof(K_TIMESTAMP) + sizeof(K_TYPE) + sizeof(K_KEY) +
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
        w = put_int(w, c.offset[r]);
        w = PUT_LITERAL(w, K_TIMESTAMP);
        w = put_int(w, c.timestamp[r]);
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

#include "_speedups_text.c"
#include "_speedups_spread.c"

/* ------------------------------------------------------------------------------ */
/* init */

/* Slots class ``cls`` (at most MAX_SLOT_FIELDS ``names``): its members' offsets into ``offsets_out``
 * and the class into ``*type_out``; both left as they were where it is not one. */
#define MAX_SLOT_FIELDS 8
static PyObject *
take_slots_class(PyObject *cls, const char *const *names, int n, Py_ssize_t *offsets_out,
                 PyTypeObject **type_out)
{
    Py_ssize_t offsets[MAX_SLOT_FIELDS];
    if (n > MAX_SLOT_FIELDS) {
        PyErr_Format(PyExc_SystemError, "take_slots_class: %d fields, room for %d", n, MAX_SLOT_FIELDS);
        return NULL;
    }
    if (slot_offsets(cls, names, n, offsets) < 0) {
        return NULL;
    }
    memcpy(offsets_out, offsets, (size_t)n * sizeof(Py_ssize_t));
    Py_INCREF(cls);
    Py_XSETREF(*type_out, (PyTypeObject *)cls);
    Py_RETURN_NONE;
}

static PyObject *
init(PyObject *module, PyObject *cls)
{
    return take_slots_class(cls, FIELD_NAMES, N_FIELDS, field_offset, &record_type);
}


/* ------------------------------------------------------------------------------ */
/* encode from columns (a conversion's Arrow batches; batch.encode_columns_py is the reference) */

typedef struct {
    Py_buffer view;
    int held;
} Buf;

static int
get_buf(PyObject *obj, Buf *b, Py_ssize_t itemsize, Py_ssize_t want, const char *what)
{
    b->held = 0;
    if (PyObject_GetBuffer(obj, &b->view, PyBUF_SIMPLE) < 0) {
        return -1;
    }
    b->held = 1;
    if (want >= 0 && b->view.len < want * itemsize) {
        PyErr_Format(PyExc_ValueError, "%s of %zd items, found %zd bytes", what, want, b->view.len);
        return -1;
    }
    return 0;
}

static void
release_buf(Buf *b)
{
    if (b->held) {
        PyBuffer_Release(&b->view);
        b->held = 0;
    }
}

static void
blob_error(const int32_t *offsets, Py_ssize_t data_len, Py_ssize_t i)
{
    PyErr_Format(PyExc_ValueError, "a value offset range inside its data, found [%lld, %lld) of %zd",
                 (long long)offsets[i], (long long)offsets[i + 1], data_len);
}

/* Length of blob i of a column: -1 when null; checked to lie inside its data (else -1, the GIL
 * taken back from *released first when the caller gave it up, and the error set). */
static inline int
column_blob(const uint8_t *valid, const int32_t *offsets, Py_ssize_t data_len, Py_ssize_t i,
            const uint8_t *data, const uint8_t **p, int64_t *len, PyThreadState **released)
{
    if (valid != NULL && !valid[i]) {
        *p = NULL;
        *len = NULL_LENGTH;
        return 0;
    }
    int64_t start = offsets[i], end = offsets[i + 1];
    if (start < 0 || end < start || end > data_len || end - start > INT32_MAX) {
        if (*released != NULL) {
            take_gil(released);
        }
        blob_error(offsets, data_len, i);
        return -1;
    }
    *p = data + start;
    *len = end - start;
    return 0;
}

static inline Py_ssize_t
blob_size(int64_t len)
{
    return unsigned_size(zigzag64(len)) + (len > 0 ? len : 0);
}

static inline uint8_t *
put_blob(uint8_t *o, const uint8_t *p, int64_t len)
{
    o = write_unsigned(o, zigzag64(len));
    if (len > 0) {
        copy_short(o, p, (size_t)len);
        o += len;
    }
    return o;
}

/* How far ahead columns_region starts loading a row's bytes (rows). */
enum { PREFETCH_ROWS = 8 };

/* The columns' objects in encode_columns' argument order, after (n, base_timestamp): */
enum { RW, KV, KO, KD, VV, VO, VD, TS, DL, HO, HKO, HKD, HVV, HVO, HVD, N_COLUMNS };

/* Append the records region of the chosen rows to ``o``; *max_ts: their largest timestamp. */
static int
columns_region(PyObject *objs[N_COLUMNS], Py_ssize_t rows_n, long long base, Out *o, long long *max_ts_out)
{
    Buf b[N_COLUMNS];
    memset(b, 0, sizeof(b));
    int rc = -1;
    if (get_buf(objs[RW], &b[RW], 8, -1, "rows") < 0) {
        goto done;
    }
    Py_ssize_t n = b[RW].view.len / 8; /* rows chosen */
    /* rows_n: rows in the batch's columns */
    if (rows_n < 0 || get_buf(objs[KV], &b[KV], 1, rows_n, "key validity") < 0
        || get_buf(objs[KO], &b[KO], 4, rows_n + 1, "key offsets") < 0
        || get_buf(objs[KD], &b[KD], 1, -1, "key data") < 0
        || get_buf(objs[VV], &b[VV], 1, rows_n, "value validity") < 0
        || get_buf(objs[VO], &b[VO], 4, rows_n + 1, "value offsets") < 0
        || get_buf(objs[VD], &b[VD], 1, -1, "value data") < 0
        || get_buf(objs[TS], &b[TS], 8, rows_n, "timestamps") < 0
        || get_buf(objs[DL], &b[DL], 8, n, "offset deltas") < 0
        || get_buf(objs[HO], &b[HO], 4, rows_n + 1, "header offsets") < 0) {
        goto done;
    }
    const int64_t *rw = b[RW].view.buf;
    const int32_t *hoff = b[HO].view.buf;
    Py_ssize_t m = (Py_ssize_t)hoff[rows_n];
    if (hoff[0] != 0 || m < 0) {
        PyErr_SetString(PyExc_ValueError, "header offsets from 0");
        goto done;
    }
    if (get_buf(objs[HKO], &b[HKO], 4, m + 1, "header key offsets") < 0
        || get_buf(objs[HKD], &b[HKD], 1, -1, "header key data") < 0
        || get_buf(objs[HVV], &b[HVV], 1, m, "header value validity") < 0
        || get_buf(objs[HVO], &b[HVO], 4, m + 1, "header value offsets") < 0
        || get_buf(objs[HVD], &b[HVD], 1, -1, "header value data") < 0) {
        goto done;
    }
    const uint8_t *kv = b[KV].view.buf, *vv = b[VV].view.buf, *hvv = b[HVV].view.buf;
    const int64_t *ts = b[TS].view.buf, *dl = b[DL].view.buf;
    const int32_t *ko = b[KO].view.buf, *vo = b[VO].view.buf, *hko = b[HKO].view.buf, *hvo = b[HVO].view.buf;
    const uint8_t *kd = b[KD].view.buf, *vd = b[VD].view.buf, *hkd = b[HKD].view.buf, *hvdp = b[HVD].view.buf;
    long long max_ts = NO_TIMESTAMP;
    /* The walk holds no Python object: the GIL is released (a conversion reads its next batch
     * meanwhile; segstore.overlap), taken back to grow o or to say an error. */
    drop_gil(&o->released);
    for (Py_ssize_t k = 0; k < n; k++) {
        /* The rows are a partition's among many in log order: each one's bytes lie in another
         * cache line, often another page, of a region too large for the caches.  Their addresses
         * are known ahead (the row numbers), so the loads are started early: the offsets of the
         * row PREFETCH_ROWS * 2 ahead, the bytes of the one PREFETCH_ROWS ahead (a prefetch never
         * faults; the offsets read here are the checked ones, the rows' range checked first). */
        if (k + 2 * PREFETCH_ROWS < n) {
            int64_t j = rw[k + 2 * PREFETCH_ROWS];
            if (j >= 0 && j < rows_n) {
                __builtin_prefetch(ko + j);
                __builtin_prefetch(vo + j);
                __builtin_prefetch(hoff + j);
            }
        }
        if (k + PREFETCH_ROWS < n) {
            int64_t j = rw[k + PREFETCH_ROWS];
            if (j >= 0 && j < rows_n) {
                const uint8_t *v = vd + vo[j];
                __builtin_prefetch(kd + ko[j]);
                __builtin_prefetch(v);
                __builtin_prefetch(v + 64);
                __builtin_prefetch(ts + j);
                int64_t h = hoff[j];
                if (h >= 0 && h < m) {
                    __builtin_prefetch(hkd + hko[h]);
                    __builtin_prefetch(hvdp + hvo[h]);
                }
            }
        }
        int64_t i = rw[k];
        if (i < 0 || i >= rows_n) {
            take_gil(&o->released);
            PyErr_Format(PyExc_ValueError, "rows within the batch's %zd, found %lld", rows_n, (long long)i);
            goto done;
        }
        const uint8_t *kp, *vp;
        int64_t klen, vlen;
        if (column_blob(kv, ko, b[KD].view.len, i, kd, &kp, &klen, &o->released) < 0
            || column_blob(vv, vo, b[VD].view.len, i, vd, &vp, &vlen, &o->released) < 0) {
            goto done;      /* the GIL taken back */
        }
        int64_t h0 = hoff[i], h1 = hoff[i + 1];
        if (h0 < 0 || h1 < h0 || h1 > m || h1 - h0 > INT32_MAX) {
            take_gil(&o->released);
            PyErr_SetString(PyExc_ValueError, "header offsets that increase within the headers");
            goto done;
        }
        if (dl[k] < INT32_MIN || dl[k] > INT32_MAX) {
            take_gil(&o->released);
            PyErr_SetString(PyExc_ValueError, "offset deltas within int32");
            goto done;
        }
        long long ts_delta;
        if (__builtin_sub_overflow((long long)ts[i], base, &ts_delta)) {
            take_gil(&o->released);
            PyErr_Format(PyExc_ValueError, "varlong must fit in int64, found a timestamp delta of %lld - %lld",
                         (long long)ts[i], base);
            goto done;
        }
        if (ts[i] > max_ts) {
            max_ts = ts[i];
        }
        Py_ssize_t size = 1 + unsigned_size(zigzag64(ts_delta)) + unsigned_size(zigzag64(dl[k]))
                          + blob_size(klen) + blob_size(vlen) + unsigned_size(zigzag64(h1 - h0));
        for (int64_t h = h0; h < h1; h++) {
            const uint8_t *p;
            int64_t klen_h, vlen_h;
            if (column_blob(NULL, hko, b[HKD].view.len, h, hkd, &p, &klen_h, &o->released) < 0
                || column_blob(hvv, hvo, b[HVD].view.len, h, hvdp, &p, &vlen_h, &o->released) < 0) {
                goto done;  /* the GIL taken back */
            }
            size += blob_size(klen_h) + blob_size(vlen_h);
        }
        if (size > INT32_MAX) {
            take_gil(&o->released);
            PyErr_SetString(PyExc_ValueError, "records of at most 2**31-1 bytes");
            goto done;
        }
        if (reserve(o, MAX_VARINT_BYTES + size) < 0) {
            goto done;      /* the GIL taken back */
        }
        uint8_t *w = write_unsigned(o->data + o->len, zigzag64(size));
        *w++ = 0; /* attributes */
        w = write_unsigned(w, zigzag64(ts_delta));
        w = write_unsigned(w, zigzag64(dl[k]));
        w = put_blob(w, kp, klen);
        w = put_blob(w, vp, vlen);
        w = write_unsigned(w, zigzag64(h1 - h0));
        for (int64_t h = h0; h < h1; h++) {
            w = put_blob(w, hkd + hko[h], (int64_t)hko[h + 1] - hko[h]);
            w = put_blob(w, hvdp + hvo[h], hvv[h] ? (int64_t)hvo[h + 1] - hvo[h] : NULL_LENGTH);
        }
        o->len = w - o->data;
    }
    take_gil(&o->released);
    *max_ts_out = max_ts;
    rc = 0;
done:
    for (int i = 0; i < N_COLUMNS; i++) {
        release_buf(&b[i]);
    }
    return rc;
}

/*
 * encode_columns(n, base_timestamp, rows, key valid/offsets/data, value valid/offsets/data, timestamps,
 *                deltas, header offsets, header key offsets/data, header value valid/offsets/data)
 *     -> (region, max_ts)
 *
 * The records region of the chosen rows (int64 row numbers into the n rows of the columns) at
 * these int64 offset deltas.  Offsets are int32 as Arrow keeps them (the data buffers' own, no
 * widened copy): key, value and header key/value offsets into their data, header offsets per
 * row from 0; validity one byte per value.
 */
static PyObject *
encode_columns(PyObject *module, PyObject *args)
{
    Py_ssize_t rows_n;
    long long base;
    PyObject *objs[N_COLUMNS];
    if (!PyArg_ParseTuple(args, "nLOOOOOOOOOOOOOOO", &rows_n, &base, &objs[0], &objs[1], &objs[2], &objs[3],
                          &objs[4], &objs[5], &objs[6], &objs[7], &objs[8], &objs[9], &objs[10], &objs[11],
                          &objs[12], &objs[13], &objs[14])) {
        return NULL;
    }
    Out o = {NULL, 0, 0};
    long long max_ts;
    PyObject *result = NULL;
    if (columns_region(objs, rows_n, base, &o, &max_ts) == 0) {
        PyObject *region = PyBytes_FromStringAndSize((const char *)o.data, o.len);
        if (region != NULL) {
            result = Py_BuildValue("(NL)", region, max_ts);
        }
    }
    PyMem_Free(o.data);
    return result;
}

/* The RecordBatch v2 header (batch.HEADER), big-endian, written at p[0:61]. */
enum {
    H_BASE_OFFSET = 0, H_LENGTH = 8, H_LEADER_EPOCH = 12, H_MAGIC = 16, H_CRC = 17, H_ATTRIBUTES = 21,
    H_LAST_DELTA = 23, H_BASE_TS = 27, H_MAX_TS = 35, H_PRODUCER_ID = 43, H_PRODUCER_EPOCH = 51,
    H_BASE_SEQUENCE = 53, H_COUNT = 57, HEADER_SIZE = 61, LENGTH_BASE = 12,
};

static inline void
put_be(uint8_t *p, uint64_t v, int n)
{
    for (int i = n - 1; i >= 0; i--) {
        p[i] = (uint8_t)v;
        v >>= 8;
    }
}

/* encode_batch(n, base_timestamp, <the 15 columns of encode_columns>, header, compress) -> bytes
 *
 * One whole RecordBatch v2 of the chosen rows: their records region (as encode_columns), the
 * header and its CRC-32C, and, when ``compress`` is not None, the region replaced by
 * ``compress(region)`` first (compression.py's codec, called once).  ``header`` is
 * (base_offset, leader_epoch, attributes, last_offset_delta, max_timestamp or None for the rows'
 * largest, producer_id, producer_epoch, base_sequence); base_timestamp is the header's too.  The
 * caller checks the header fields' ranges (batch._build's typed errors). */
/*
 * An upper bound of the records region columns_region writes for these columns (0 when a buffer
 * is not what columns_region checks for: it then reports the error itself).  Per record at most
 * 36 bytes of varints and attributes besides its key, value and header bytes, and 10 per header.
 */
static Py_ssize_t
region_bound(PyObject *objs[N_COLUMNS], Py_ssize_t rows_n)
{
    Py_buffer rw, ko, vo, ho, hko, hvo;
    PyObject *which[6] = {objs[RW], objs[KO], objs[VO], objs[HO], objs[HKO], objs[HVO]};
    Py_buffer *views[6] = {&rw, &ko, &vo, &ho, &hko, &hvo};
    int got = 0;
    Py_ssize_t bound = 0;
    for (; got < 6; got++) {
        if (PyObject_GetBuffer(which[got], views[got], PyBUF_SIMPLE) < 0) {
            PyErr_Clear();
            goto done;
        }
    }
    if (rows_n < 0 || ko.len < (rows_n + 1) * 4 || vo.len < (rows_n + 1) * 4 || ho.len < (rows_n + 1) * 4) {
        goto done;
    }
    const int64_t *r = rw.buf;
    const int32_t *k = ko.buf, *v = vo.buf, *h = ho.buf, *hk = hko.buf, *hv = hvo.buf;
    Py_ssize_t n = rw.len / 8, m = hko.len / 4 - 1;
    if (m < 0 || hvo.len / 4 - 1 < m) {
        goto done;
    }
    int64_t total = 0;
    for (Py_ssize_t j = 0; j < n; j++) {
        int64_t i = r[j];
        if (i < 0 || i >= rows_n) {
            total = 0;
            break;
        }
        int64_t h0 = h[i], h1 = h[i + 1];
        if (h0 < 0 || h1 < h0 || h1 > m) {
            total = 0;
            break;
        }
        total += 36 + ((int64_t)k[i + 1] - k[i]) + ((int64_t)v[i + 1] - v[i]) + ((int64_t)hk[h1] - hk[h0])
                 + ((int64_t)hv[h1] - hv[h0]) + 10 * (h1 - h0);
        if (total < 0 || total > INT32_MAX) {
            total = 0;
            break;
        }
    }
    bound = (Py_ssize_t)total;
done:
    for (int i = 0; i < got; i++) {
        PyBuffer_Release(views[i]);
    }
    return bound;
}

/* The fields of encode_batch's ``header`` tuple. */
typedef struct {
    long long base_offset, last_delta, producer_id;
    int leader_epoch, attributes, producer_epoch, base_sequence;
    PyObject *max_obj;  /* borrowed: None for the records' largest timestamp */
} BatchHeader;

static int
parse_header(PyObject *header, BatchHeader *h)
{
    return PyArg_ParseTuple(header, "LiiLOLii", &h->base_offset, &h->leader_epoch, &h->attributes, &h->last_delta,
                            &h->max_obj, &h->producer_id, &h->producer_epoch, &h->base_sequence) ? 0 : -1;
}

/* An Out for a batch's bytes: with no codec the records go straight into the batch's bytes object,
 * sized ``bound`` (an upper bound of the records region, 0 when unknown), else into memory the
 * codec's input is copied from.  The header's 61 bytes are reserved. */
static int
start_batch(Out *o, int in_bytes, Py_ssize_t bound)
{
    memset(o, 0, sizeof(*o));
    if (in_bytes) {
        o->bytes = PyBytes_FromStringAndSize(NULL, HEADER_SIZE + (bound > 0 ? bound : 4096));
        if (o->bytes == NULL) {
            return -1;
        }
        o->data = (uint8_t *)PyBytes_AS_STRING(o->bytes);
        o->cap = PyBytes_GET_SIZE(o->bytes);
    }
    if (reserve(o, HEADER_SIZE) < 0) {
        return -1;
    }
    o->len = HEADER_SIZE;
    return 0;
}

static void
drop_batch(Out *o, int in_bytes)
{
    if (in_bytes) {
        Py_CLEAR(o->bytes);
    } else {
        PyMem_Free(o->data);
        o->data = NULL;
    }
}

/*
 * The batch of the records region o->data[61:o->len] (start_batch's Out, always released here):
 * compressed by ``compress`` (None: none), the header written, the CRC-32C over it.  The caller
 * checked the header fields' ranges (batch._build's typed errors).
 */
static PyObject *
finish_batch(Out *o, int in_bytes, const BatchHeader *h, Py_ssize_t count, long long base, long long max_ts,
             PyObject *compress)
{
    PyObject *result = NULL, *region = NULL, *body = NULL;
    if (h->max_obj != Py_None) {
        max_ts = PyLong_AsLongLong(h->max_obj);
        if (max_ts == -1 && PyErr_Occurred()) {
            goto done;
        }
    }
    const uint8_t *payload = o->data + HEADER_SIZE;
    Py_ssize_t payload_len = o->len - HEADER_SIZE;
    if (compress != Py_None) {
        region = PyBytes_FromStringAndSize((const char *)payload, payload_len);
        if (region == NULL) {
            goto done;
        }
        body = PyObject_CallOneArg(compress, region);
        if (body == NULL) {
            goto done;
        }
        if (!PyBytes_Check(body)) {
            PyErr_SetString(PyExc_TypeError, "compress() returning bytes");
            goto done;
        }
        payload = (const uint8_t *)PyBytes_AS_STRING(body);
        payload_len = PyBytes_GET_SIZE(body);
    }
    if (payload_len > INT32_MAX - (HEADER_SIZE - LENGTH_BASE)) {
        PyErr_SetString(PyExc_ValueError, "a batch of at most 2**31-1 bytes");
        goto done;
    }
    if (in_bytes) {
        if (_PyBytes_Resize(&o->bytes, o->len) < 0) {
            goto done;
        }
        result = o->bytes;
        o->bytes = NULL;
    } else {
        result = PyBytes_FromStringAndSize(NULL, HEADER_SIZE + payload_len);
        if (result == NULL) {
            goto done;
        }
        memcpy(PyBytes_AS_STRING(result) + HEADER_SIZE, payload, (size_t)payload_len);
    }
    uint8_t *p = (uint8_t *)PyBytes_AS_STRING(result);
    put_be(p + H_BASE_OFFSET, (uint64_t)h->base_offset, 8);
    put_be(p + H_LENGTH, (uint64_t)(HEADER_SIZE - LENGTH_BASE + payload_len), 4);
    put_be(p + H_LEADER_EPOCH, (uint64_t)(int64_t)h->leader_epoch, 4);
    p[H_MAGIC] = 2;
    put_be(p + H_ATTRIBUTES, (uint64_t)(int64_t)h->attributes, 2);
    put_be(p + H_LAST_DELTA, (uint64_t)h->last_delta, 4);
    put_be(p + H_BASE_TS, (uint64_t)base, 8);
    put_be(p + H_MAX_TS, (uint64_t)max_ts, 8);
    put_be(p + H_PRODUCER_ID, (uint64_t)h->producer_id, 8);
    put_be(p + H_PRODUCER_EPOCH, (uint64_t)(int64_t)h->producer_epoch, 2);
    put_be(p + H_BASE_SEQUENCE, (uint64_t)(int64_t)h->base_sequence, 4);
    put_be(p + H_COUNT, (uint64_t)count, 4);
    uint32_t crc;
    Py_BEGIN_ALLOW_THREADS
    crc = crc32c(0, p + H_ATTRIBUTES, HEADER_SIZE + payload_len - H_ATTRIBUTES);
    Py_END_ALLOW_THREADS
    put_be(p + H_CRC, crc, 4);
done:
    Py_XDECREF(region);
    Py_XDECREF(body);
    drop_batch(o, in_bytes);    /* o->bytes is NULL once it became the result */
    return result;
}

static PyObject *
encode_batch(PyObject *module, PyObject *args)
{
    Py_ssize_t rows_n;
    long long base;
    PyObject *objs[N_COLUMNS], *header, *compress;
    if (!PyArg_ParseTuple(args, "nLOOOOOOOOOOOOOOOOO", &rows_n, &base, &objs[0], &objs[1], &objs[2], &objs[3],
                          &objs[4], &objs[5], &objs[6], &objs[7], &objs[8], &objs[9], &objs[10], &objs[11],
                          &objs[12], &objs[13], &objs[14], &header, &compress)) {
        return NULL;
    }
    BatchHeader h;
    if (parse_header(header, &h) < 0) {
        return NULL;
    }
    Out o;
    int in_bytes = compress == Py_None;
    /* uncompressed: the records are written straight into the batch's bytes, sized once */
    if (start_batch(&o, in_bytes, in_bytes ? region_bound(objs, rows_n) : 0) < 0) {
        drop_batch(&o, in_bytes);
        return NULL;
    }
    long long max_ts;
    Py_buffer rows;
    if (columns_region(objs, rows_n, base, &o, &max_ts) < 0 || PyObject_GetBuffer(objs[RW], &rows, PyBUF_SIMPLE) < 0) {
        drop_batch(&o, in_bytes);
        return NULL;
    }
    Py_ssize_t count = rows.len / 8;
    PyBuffer_Release(&rows);
    return finish_batch(&o, in_bytes, &h, count, base, max_ts, compress);
}

/* ------------------------------------------------------------------------------ */
/* plain dicts: KafkaStore.append_batch's fast path (dictappend.py; its *_py functions are the reference)
 *
 * A plain item is an exact dict whose keys are among topic, partition, key, value, timestamp and
 * headers (or a Message whose those fields are so; its offset and timestamp_type are not written), with ``topic`` an exact str and ``value`` present, ``partition`` an exact int in
 * [0, 2**31) (absent: 0), ``key``/``value`` None, bytes or a UTF-8 encodable str, ``timestamp`` an
 * exact int within int64 (absent: -1; below 0: the append's time), ``headers`` absent, None or a
 * list/tuple of 2-item lists/tuples of a UTF-8 encodable str and None, bytes or such a str.
 * Anything else is the store's general path (Message.coerce), which raises the typed errors.
 */

static PyObject *str_topic, *str_partition;
static PyTypeObject *result_type = NULL, *message_type = NULL;
/* a Message's slots, in plain_field's order */
enum { N_MESSAGE_FIELDS = 6 };
static const char *const MESSAGE_NAMES[N_MESSAGE_FIELDS] = {"topic", "partition", "key", "value", "timestamp",
                                                            "headers"};
static Py_ssize_t message_offset[N_MESSAGE_FIELDS];
enum { R_TOPIC, R_PARTITION, R_OFFSET, R_POSITION, R_SIZE, R_EXTRA, N_RESULT_FIELDS };
static const char *const RESULT_NAMES[N_RESULT_FIELDS] = {"topic", "partition", "offset", "position", "size",
                                                          "extra"};
static Py_ssize_t result_offset[N_RESULT_FIELDS];

typedef struct {
    PyObject *topic;        /* borrowed, as every object here: the items list holds them */
    PyObject *key, *value, *headers;
    long partition;
    long long timestamp;
    Py_ssize_t klen, vlen;      /* encoded lengths, -1: null */
} Plain;

enum { PLAIN = 0, NOT_PLAIN = 1 };

/* Which field a dict key names (-1: none), by identity first (interned literals), else by value. */
static int
plain_field(PyObject *name)
{
    PyObject *names[6] = {str_topic, str_partition, str_key, str_value, str_timestamp, str_headers};
    for (int f = 0; f < 6; f++) {
        if (name == names[f]) {
            return f;
        }
    }
    if (!PyUnicode_CheckExact(name)) {
        return -1;
    }
    for (int f = 0; f < 6; f++) {
        if (PyUnicode_Compare(name, names[f]) == 0) {
            return f;
        }
    }
    return -1;
}

/* The encoded length of a key, value or header value (-1: null); NOT_PLAIN for another type or
 * a str UTF-8 cannot encode (its error cleared).  A str's UTF-8 is cached in the str. */
static int
plain_blob(PyObject *obj, Py_ssize_t *len)
{
    if (obj == Py_None) {
        *len = NULL_LENGTH;
    } else if (PyBytes_CheckExact(obj)) {
        *len = PyBytes_GET_SIZE(obj);
    } else if (PyUnicode_CheckExact(obj)) {
        if (PyUnicode_AsUTF8AndSize(obj, len) == NULL) {
            PyErr_Clear();
            return NOT_PLAIN;
        }
    } else {
        return NOT_PLAIN;
    }
    return *len > INT32_MAX ? NOT_PLAIN : PLAIN;
}

static inline const uint8_t *
blob_bytes(PyObject *obj)
{
    if (obj == Py_None) {
        return NULL;
    }
    if (PyBytes_CheckExact(obj)) {
        return (const uint8_t *)PyBytes_AS_STRING(obj);
    }
    return (const uint8_t *)PyUnicode_AsUTF8AndSize(obj, NULL);  /* cached by plain_blob */
}

/* Check a plain item's headers (None, or a list/tuple of 2-item lists/tuples of a str and a
 * key/value-like value); *size grows by their encoded bytes, at most. */
static int
plain_headers(PyObject *headers, int64_t *size)
{
    if (headers == Py_None) {
        return PLAIN;
    }
    if (!PyList_CheckExact(headers) && !PyTuple_CheckExact(headers)) {
        return NOT_PLAIN;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(headers);
    PyObject **pairs = PySequence_Fast_ITEMS(headers);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *pair = pairs[i];
        if ((!PyList_CheckExact(pair) && !PyTuple_CheckExact(pair)) || PySequence_Fast_GET_SIZE(pair) != 2) {
            return NOT_PLAIN;
        }
        PyObject *hk = PySequence_Fast_GET_ITEM(pair, 0), *hv = PySequence_Fast_GET_ITEM(pair, 1);
        Py_ssize_t hklen, hvlen;
        if (!PyUnicode_CheckExact(hk) || plain_blob(hk, &hklen) != PLAIN || plain_blob(hv, &hvlen) != PLAIN) {
            return NOT_PLAIN;
        }
        *size += 2 * MAX_VARINT_BYTES + hklen + (hvlen > 0 ? hvlen : 0);
    }
    return PLAIN;
}

/* One field of a plain item (index as plain_field's) into *p; NOT_PLAIN for a value of another type. */
static inline int
plain_value(int field, PyObject *v, Plain *p)
{
    int overflow;
    switch (field) {
    case 0:
        if (!PyUnicode_CheckExact(v)) {
            return NOT_PLAIN;
        }
        p->topic = v;
        return PLAIN;
    case 1: {
        if (!PyLong_CheckExact(v)) {
            return NOT_PLAIN;
        }
        long long n = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (overflow || n < 0 || n > INT32_MAX) {
            return NOT_PLAIN;
        }
        p->partition = (long)n;
        return PLAIN;
    }
    case 2:
        p->key = v;
        return PLAIN;
    case 3:
        p->value = v;
        return PLAIN;
    case 4:
        if (!PyLong_CheckExact(v)) {
            return NOT_PLAIN;
        }
        p->timestamp = PyLong_AsLongLongAndOverflow(v, &overflow);
        return overflow ? NOT_PLAIN : PLAIN;
    case 5:
        p->headers = v;
        return PLAIN;
    default:
        return NOT_PLAIN;
    }
}

/* Parse a plain item (an exact dict, or a Message: init_message's class) into *p; *bound: an upper
 * bound of its encoded record's size.  PLAIN or NOT_PLAIN (never an error: the general path says
 * what is wrong). */
static int
parse_plain(PyObject *item, Plain *p, Py_ssize_t *bound)
{
    p->topic = NULL;
    p->key = Py_None;
    p->value = NULL;
    p->headers = Py_None;
    p->partition = 0;
    p->timestamp = NO_TIMESTAMP;
    if (PyDict_CheckExact(item)) {
        Py_ssize_t pos = 0;
        PyObject *name, *v;
        while (PyDict_Next(item, &pos, &name, &v)) {
            if (plain_value(plain_field(name), v, p) != PLAIN) {
                return NOT_PLAIN;
            }
        }
    } else if (message_type != NULL && Py_IS_TYPE(item, message_type)) {
        /* a Message's offset and timestamp_type are not written (the log assigns both) */
        for (int f = 0; f < N_MESSAGE_FIELDS; f++) {
            PyObject *v = *(PyObject **)((char *)item + message_offset[f]);
            if (v == NULL || plain_value(f, v, p) != PLAIN) {     /* NULL: a slot never set */
                return NOT_PLAIN;
            }
        }
    } else {
        return NOT_PLAIN;
    }
    if (p->topic == NULL || p->value == NULL) {
        return NOT_PLAIN;
    }
    if (plain_blob(p->key, &p->klen) != PLAIN || plain_blob(p->value, &p->vlen) != PLAIN) {
        return NOT_PLAIN;
    }
    Py_ssize_t klen = p->klen, vlen = p->vlen;
    /* length, attributes, timestampDelta, offsetDelta, key and value lengths, header count */
    int64_t size = MAX_VARINT_BYTES + 1 + MAX_VARLONG_BYTES + 3 * MAX_VARINT_BYTES + MAX_VARINT_BYTES
                   + (klen > 0 ? klen : 0) + (vlen > 0 ? vlen : 0);
    if (plain_headers(p->headers, &size) != PLAIN) {
        return NOT_PLAIN;
    }
    if (size > INT32_MAX) {
        return NOT_PLAIN;
    }
    *bound = (Py_ssize_t)size;
    return PLAIN;
}

/*
 * What plain_groups read of each item, for encode_plain to write without reading the dicts again:
 * the topic, key, value and headers held (bytes and str cannot change; the headers, a list, are
 * checked again as they are written), the partition, timestamp and lengths copied.
 */
typedef struct {
    Py_ssize_t n;
    Plain items[];
} Snapshot;

static const char SNAPSHOT_NAME[] = "segstore_kafka._speedups.snapshot";

static void
snapshot_clear(Snapshot *snap)
{
    for (Py_ssize_t i = 0; i < snap->n; i++) {
        Plain *p = &snap->items[i];
        Py_DECREF(p->topic);
        Py_DECREF(p->key);
        Py_DECREF(p->value);
        Py_DECREF(p->headers);
    }
    PyMem_Free(snap);
}

static void
snapshot_free(PyObject *capsule)
{
    Snapshot *snap = PyCapsule_GetPointer(capsule, SNAPSHOT_NAME);
    if (snap != NULL) {
        snapshot_clear(snap);
    }
}

static inline int
same_group(const Plain *a, PyObject *topic, long partition)
{
    return a->partition == partition && (a->topic == topic || PyUnicode_Compare(a->topic, topic) == 0);
}

/*
 * plain_groups(items: list) -> None (an item is not plain) or ([(topic, partition, rows, bound)],
 * snapshot): one entry per (topic, partition) in first-seen order, ``rows`` the indices of its items (int64
 * bytes, in order), ``bound`` an upper bound of its records region's size (at most 2**31-1 - 61,
 * else None: the general path); ``snapshot`` what was read of each item (Snapshot, for
 * encode_plain).  Runs no Python code but what the collector may run.
 */
static PyObject *
plain_groups(PyObject *module, PyObject *items)
{
    if (!PyList_Check(items)) {
        PyErr_SetString(PyExc_TypeError, "expected items as a list");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(items);
    int32_t *gid = PyMem_Malloc((n ? n : 1) * sizeof(int32_t));
    Plain *firsts = PyMem_Malloc((n ? n : 1) * sizeof(Plain));    /* each group's first item */
    int64_t *bounds = PyMem_Calloc(n ? n : 1, sizeof(int64_t)), *counts = PyMem_Calloc(n ? n : 1, sizeof(int64_t));
    Snapshot *snap = PyMem_Malloc(sizeof(Snapshot) + (n ? n : 1) * sizeof(Plain));
    PyObject *keys = PyDict_New(), *out = NULL, *capsule = NULL;
    Py_ssize_t groups = 0;
    if (snap != NULL) {
        snap->n = 0;
    }
    if (gid == NULL || firsts == NULL || bounds == NULL || counts == NULL || keys == NULL || snap == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    int32_t last = -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        Plain p;
        Py_ssize_t bound;
        /* a key tuple's allocation may run the collector, and a finalizer may change the list: then
         * the general path takes it (the topics kept in firsts are held by the keys dict) */
        if (PyList_GET_SIZE(items) != n || parse_plain(PyList_GET_ITEM(items, i), &p, &bound) != PLAIN) {
            out = Py_NewRef(Py_None);
            goto done;
        }
        Py_INCREF(p.topic);
        Py_INCREF(p.key);
        Py_INCREF(p.value);
        Py_INCREF(p.headers);
        snap->items[snap->n++] = p;     /* held before the allocations below may run the collector */
        int32_t g = last;
        if (g < 0 || !same_group(&firsts[g], p.topic, p.partition)) {
            PyObject *key = Py_BuildValue("(Ol)", p.topic, p.partition);
            if (key == NULL) {
                goto done;
            }
            PyObject *found = PyDict_GetItemWithError(keys, key);
            if (found != NULL) {
                g = (int32_t)PyLong_AsLong(found);
            } else if (PyErr_Occurred()) {
                Py_DECREF(key);
                goto done;
            } else {
                g = (int32_t)groups++;
                firsts[g] = p;
                PyObject *index = PyLong_FromLong(g);
                int rc = index == NULL ? -1 : PyDict_SetItem(keys, key, index);
                Py_XDECREF(index);
                if (rc < 0) {
                    Py_DECREF(key);
                    goto done;
                }
            }
            Py_DECREF(key);
            last = g;
        }
        gid[i] = g;
        counts[g]++;
        bounds[g] += bound;
    }
    out = PyList_New(groups);
    if (out == NULL) {
        goto done;
    }
    for (Py_ssize_t g = 0; g < groups; g++) {
        PyObject *rows = PyBytes_FromStringAndSize(NULL, counts[g] * (Py_ssize_t)sizeof(int64_t));
        PyObject *bound = bounds[g] <= INT32_MAX - HEADER_SIZE ? PyLong_FromLongLong(bounds[g]) : Py_NewRef(Py_None);
        PyObject *entry = rows == NULL || bound == NULL ? NULL
                          : Py_BuildValue("(OlNN)", firsts[g].topic, firsts[g].partition, rows, bound);
        if (entry == NULL) {
            if (rows == NULL || bound == NULL) {
                Py_XDECREF(rows);
                Py_XDECREF(bound);
            }
            Py_CLEAR(out);
            goto done;
        }
        PyList_SET_ITEM(out, g, entry);
        counts[g] = 0;  /* now the rows filled */
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        int32_t g = gid[i];
        PyObject *rows = PyTuple_GET_ITEM(PyList_GET_ITEM(out, g), 2);
        ((int64_t *)PyBytes_AS_STRING(rows))[counts[g]++] = i;
    }
    capsule = PyCapsule_New(snap, SNAPSHOT_NAME, snapshot_free);
    if (capsule == NULL) {
        Py_CLEAR(out);
        goto done;
    }
    snap = NULL;    /* the capsule's */
    out = Py_BuildValue("(NN)", out, capsule);     /* steals both */
done:
    if (snap != NULL) {
        snapshot_clear(snap);
    }
    PyMem_Free(gid);
    PyMem_Free(firsts);
    PyMem_Free(bounds);
    PyMem_Free(counts);
    Py_XDECREF(keys);
    return out;
}

static inline uint8_t *
put_plain_blob(uint8_t *w, PyObject *obj)
{
    Py_ssize_t len;
    plain_blob(obj, &len);      /* checked plain: cannot fail */
    return put_blob(w, blob_bytes(obj), len);
}

/* The encoded size of a plain record's body (after its length varint). */
static inline Py_ssize_t
plain_body_size(const Plain *p, long long ts_delta, Py_ssize_t offset_delta, Py_ssize_t nh)
{
    Py_ssize_t size = 1 + unsigned_size(zigzag64(ts_delta)) + unsigned_size(zigzag64(offset_delta))
                      + blob_size(p->klen) + blob_size(p->vlen) + unsigned_size(zigzag64(nh));
    for (Py_ssize_t j = 0; j < nh; j++) {
        PyObject *pair = PySequence_Fast_ITEMS(p->headers)[j];
        Py_ssize_t hk, hv;
        plain_blob(PySequence_Fast_GET_ITEM(pair, 0), &hk);     /* checked plain: cannot fail */
        plain_blob(PySequence_Fast_GET_ITEM(pair, 1), &hv);
        size += blob_size(hk) + blob_size(hv);
    }
    return size;
}

/*
 * encode_plain(items, snapshot, rows, bound, now, header, compress) -> bytes: one RecordBatch v2 of
 * the plain items at ``rows`` (int64 indices, plain_groups'), as plain_groups' ``snapshot`` holds
 * them (None: read from ``items`` again), offset deltas 0, 1, ..., a timestamp below 0 being
 * ``now`` (>= 0); ``bound`` plain_groups' size bound (the buffer grows past it if the items
 * changed since); ``header`` and ``compress`` as encode_batch's.  ValueError: an item not plain.
 */
static PyObject *
encode_plain(PyObject *module, PyObject *args)
{
    PyObject *items, *snapshot, *rows_obj, *header, *compress;
    Py_ssize_t bound_arg;
    long long now;
    if (!PyArg_ParseTuple(args, "O!OOnLOO", &PyList_Type, &items, &snapshot, &rows_obj, &bound_arg, &now, &header,
                          &compress)) {
        return NULL;
    }
    const Snapshot *snap = NULL;
    if (snapshot != Py_None) {
        snap = PyCapsule_GetPointer(snapshot, SNAPSHOT_NAME);
        if (snap == NULL) {
            return NULL;
        }
    }
    if (now < 0) {
        PyErr_SetString(PyExc_ValueError, "now >= 0");
        return NULL;
    }
    BatchHeader h;
    if (parse_header(header, &h) < 0) {
        return NULL;
    }
    Py_buffer rows;
    if (PyObject_GetBuffer(rows_obj, &rows, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    const int64_t *rw = rows.buf;
    Py_ssize_t count = rows.len / 8, n_items = PyList_GET_SIZE(items);
    int in_bytes = compress == Py_None;
    Out o;
    long long base = NO_TIMESTAMP, max_ts = NO_TIMESTAMP;
    if (count - 1 > INT32_MAX || start_batch(&o, in_bytes, bound_arg > 0 ? bound_arg : 0) < 0) {
        if (count - 1 > INT32_MAX) {
            PyErr_SetString(PyExc_ValueError, "at most 2**31 records");
        } else {
            drop_batch(&o, in_bytes);
        }
        PyBuffer_Release(&rows);
        return NULL;
    }
    if (!in_bytes && bound_arg > 0 && reserve(&o, bound_arg) < 0) {
        goto fail;
    }
    for (Py_ssize_t k = 0; k < count; k++) {
        Plain p;
        Py_ssize_t bound;
        int64_t headers_size = 0;
        int ok;
        if (snap != NULL) {     /* as read by plain_groups; a headers list may have changed since */
            ok = rw[k] >= 0 && rw[k] < snap->n;
            if (ok) {
                p = snap->items[rw[k]];
                ok = plain_headers(p.headers, &headers_size) == PLAIN;
            }
        } else {
            ok = rw[k] >= 0 && rw[k] < n_items && parse_plain(PyList_GET_ITEM(items, rw[k]), &p, &bound) == PLAIN;
        }
        if (!ok) {
            PyErr_SetString(PyExc_ValueError, "rows of plain items (the items changed?)");
            goto fail;
        }
        long long ts = p.timestamp >= 0 ? p.timestamp : now;
        if (k == 0) {
            base = ts;
        }
        if (ts > max_ts) {
            max_ts = ts;
        }
        Py_ssize_t nh = p.headers == Py_None ? 0 : PySequence_Fast_GET_SIZE(p.headers);
        Py_ssize_t body = plain_body_size(&p, ts - base, k, nh);     /* both >= 0: no overflow */
        if (o.len + MAX_VARINT_BYTES + body > INT32_MAX) {
            PyErr_SetString(PyExc_ValueError, "a batch of at most 2**31-1 bytes");
            goto fail;
        }
        if (reserve(&o, MAX_VARINT_BYTES + body) < 0) {   /* within the bound: no growth */
            goto fail;
        }
        uint8_t *w = write_unsigned(o.data + o.len, zigzag64(body));
        *w++ = 0;   /* attributes */
        w = write_unsigned(w, zigzag64(ts - base));
        w = write_unsigned(w, zigzag64(k));
        w = put_blob(w, blob_bytes(p.key), p.klen);
        w = put_blob(w, blob_bytes(p.value), p.vlen);
        w = write_unsigned(w, zigzag64(nh));
        for (Py_ssize_t j = 0; j < nh; j++) {
            PyObject *pair = PySequence_Fast_ITEMS(p.headers)[j];
            w = put_plain_blob(w, PySequence_Fast_GET_ITEM(pair, 0));
            w = put_plain_blob(w, PySequence_Fast_GET_ITEM(pair, 1));
        }
        o.len = w - o.data;
    }
    PyBuffer_Release(&rows);
    return finish_batch(&o, in_bytes, &h, count, base, max_ts, compress);
fail:
    drop_batch(&o, in_bytes);
    PyBuffer_Release(&rows);
    return NULL;
}

/*
 * plain_results(results, rows, topic, partition, base_offset, position, size, extra): results[rows[k]]
 * = AppendResult(topic, partition, base_offset + k, position, size, extra) for each k (the class
 * given to init_results, built without running its __init__; ``extra`` the batch's one dict).
 */
static PyObject *
plain_results(PyObject *module, PyObject *args)
{
    PyObject *results, *rows_obj, *topic, *partition, *position, *size, *extra;
    long long base_offset;
    if (!PyArg_ParseTuple(args, "O!OOOLOOO", &PyList_Type, &results, &rows_obj, &topic, &partition, &base_offset,
                          &position, &size, &extra)) {
        return NULL;
    }
    if (result_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "init_results(AppendResult) was not called");
        return NULL;
    }
    Py_buffer rows;
    if (PyObject_GetBuffer(rows_obj, &rows, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    const int64_t *rw = rows.buf;
    Py_ssize_t count = rows.len / 8;
    int ok = 1;
    for (Py_ssize_t k = 0; k < count; k++) {
        if (rw[k] < 0 || rw[k] >= PyList_GET_SIZE(results)) {
            PyErr_SetString(PyExc_ValueError, "rows within the results");
            ok = 0;
            break;
        }
        PyObject *obj = result_type->tp_alloc(result_type, 0);
        PyObject *offset = PyLong_FromLongLong(base_offset + k);
        if (obj == NULL || offset == NULL) {
            Py_XDECREF(obj);
            Py_XDECREF(offset);
            ok = 0;
            break;
        }
        PyObject *values[N_RESULT_FIELDS] = {Py_NewRef(topic), Py_NewRef(partition), offset, Py_NewRef(position),
                                             Py_NewRef(size), Py_NewRef(extra)};
        for (int f = 0; f < N_RESULT_FIELDS; f++) {
            *(PyObject **)((char *)obj + result_offset[f]) = values[f];
        }
        /* A result refers to a str, ints and the batch's extra dict, none of which can refer back
         * to it: it is never part of a cycle, so the collector need not visit it (as CPython
         * untracks tuples and dicts of atomic values).  A million live results tracked made each
         * collection walk them all: 30% of an append_batch of 1,000 dicts. */
        PyObject_GC_UnTrack(obj);
        PyList_SetItem(results, rw[k], obj);    /* steals obj, drops what was there */
    }
    PyBuffer_Release(&rows);
    if (!ok) {
        return NULL;
    }
    Py_RETURN_NONE;
}


static PyObject *
init_message(PyObject *module, PyObject *cls)
{
    return take_slots_class(cls, MESSAGE_NAMES, N_MESSAGE_FIELDS, message_offset, &message_type);
}

static PyObject *
init_results(PyObject *module, PyObject *cls)
{
    return take_slots_class(cls, RESULT_NAMES, N_RESULT_FIELDS, result_offset, &result_type);
}

static PyMethodDef methods[] = {
    {"init", init, METH_O, "init(Record): the slots dataclass decode_records builds."},
    {"decode_records", decode_records, METH_VARARGS,
     "decode_records(region, count, base_offset, base_timestamp, log_append_time, base_sequence) -> list"},
    {"encode_records", encode_records, METH_VARARGS,
     "encode_records(records, offset_deltas) -> (region, base_timestamp, max_timestamp)"},
    {"encode_columns", encode_columns, METH_VARARGS,
     "encode_columns(n, base_timestamp, rows, key valid/offsets/data, value valid/offsets/data, timestamps, "
     "deltas, header offsets, header key offsets/data, header value valid/offsets/data) -> (region, max_ts)"},
    {"encode_batch", encode_batch, METH_VARARGS,
     "encode_batch(n, base_timestamp, <encode_columns' columns>, header, compress) -> one whole batch"},
    {"plain_groups", plain_groups, METH_O,
     "plain_groups(items) -> None or ([(topic, partition, rows, bound)], snapshot): plain items by partition"},
    {"encode_plain", encode_plain, METH_VARARGS,
     "encode_plain(items, snapshot, rows, bound, now, header, compress) -> one whole batch of plain items"},
    {"plain_results", plain_results, METH_VARARGS,
     "plain_results(results, rows, topic, partition, base_offset, position, size, extra)"},
    {"init_results", init_results, METH_O, "init_results(AppendResult): the slots dataclass of results."},
    {"init_message", init_message, METH_O, "init_message(Message): the slots dataclass plain items may be."},
    {"crc32c", crc32c_py, METH_VARARGS, "crc32c(data, crc=0) -> int: CRC-32C, as the crc32c package."},
    {"decode_columns", decode_columns, METH_VARARGS,
     "decode_columns(log, pos, end, want, decompress, buffers) -> (stop, pos, counts, need)"},
    {"json_lines", json_lines, METH_VARARGS,
     "json_lines(prefix, timestamp_types, tails, buffers, n_rows, n_batches) -> bytes"},
    {"spread_runs", spread_runs, METH_VARARGS,
     "spread_runs(counts, ((source, target, itemsize), ...)): each source item counts[i] times in target"},
    {"text_lines", text_lines, METH_VARARGS,
     "text_lines(heads, timestamp_types, tails, buffers, n_rows, n_batches, start) -> bytes"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "segstore_kafka._speedups",
    "C loops of the Kafka RecordBatch v2 record codec (see batch.py for the reference).", -1, methods,
};

#ifndef SEGSTORE_SOURCE_HASH
#define SEGSTORE_SOURCE_HASH ""    /* built without setup.py: not checked */
#endif

PyMODINIT_FUNC
PyInit__speedups(void)
{
    str_key = PyUnicode_InternFromString("key");
    str_value = PyUnicode_InternFromString("value");
    str_timestamp = PyUnicode_InternFromString("timestamp");
    str_headers = PyUnicode_InternFromString("headers");
    str_topic = PyUnicode_InternFromString("topic");
    str_partition = PyUnicode_InternFromString("partition");
    if (!str_key || !str_value || !str_timestamp || !str_headers || !str_topic || !str_partition) {
        return NULL;
    }
    crc32c_init();
    PyObject *module = PyModule_Create(&module_def);
    /* the hash of the source this was built from (setup.py): segstore.speedups refuses a stale build */
    if (module != NULL && PyModule_AddStringConstant(module, "SOURCE_HASH", SEGSTORE_SOURCE_HASH) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
