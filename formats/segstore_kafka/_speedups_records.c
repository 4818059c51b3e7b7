/*
 * segstore_kafka._speedups: records decoded into Record objects, decode_records (batch.py:
 * _decode_records_py).
 *
 * Included by _speedups.c (one translation unit): the layouts, constants and helpers defined
 * there, and in the files included before this one, are this file's.
 */

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
enum { BODY_OK = 0, BODY_PAST, BODY_VARINT, BODY_HCOUNT, BODY_HKEY, BODY_LEFT, BODY_ERROR };

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

/* A header key that is not UTF-8 as RecordHeader.key() reads it (new String(bytes, UTF_8): a U+FFFD per
 * malformed sequence), keeping its bytes: segstore.javatext.java_text (batch.py's reference), called
 * with the GIL held, for such keys only. */
static PyObject *
java_text(const uint8_t *s, Py_ssize_t n)
{
    static PyObject *fn = NULL;
    if (fn == NULL) {
        PyObject *module = PyImport_ImportModule("segstore.javatext");
        if (module == NULL) {
            return NULL;
        }
        fn = PyObject_GetAttrString(module, "java_text");
        Py_DECREF(module);
        if (fn == NULL) {
            return NULL;
        }
    }
    return PyObject_CallFunction(fn, "y#", (const char *)s, n);
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
            if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
                return BODY_ERROR;
            }
            PyErr_Clear();
            header_key = java_text(body + pos, key_length);
            if (header_key == NULL) {
                return BODY_ERROR;
            }
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
            set_problem(start, "expected %zd records within %zd bytes, found record %zd of %zd runs past them",
                        count, end, index, count);
            goto fail;
        }
        if (rc == VARINT_BAD) {
            set_problem(start, "record %zd of %zd: expected well-formed varints, found one too long or out of range",
                        index, count);
            goto fail;
        }
        if (length < 0) {
            set_problem(start, "record %zd of %zd: expected a length >= 0, found %d", index, count, (int)length);
            goto fail;
        }
        if (length > end - pos) {
            set_problem(start, "expected %zd records within %zd bytes, found record %zd of %zd runs past them",
                        count, end, index, count);
            goto fail;
        }
        if (index >= capacity) { /* unreachable: records are >= MIN_RECORD_SIZE bytes; kept as a guard */
            set_problem(start, "expected %zd records within %zd bytes, found record %zd of %zd runs past them",
                        count, end, index, count);
            goto fail;
        }
        Body b = {0};
        rc = decode_body(buf + pos, length, &b);
        if (rc != BODY_OK) {
            clear_body(&b);
            switch (rc) {
            case BODY_PAST:
                set_problem(start, "record %zd of %zd: expected fields within its %d bytes, found one running past them",
                            index, count, (int)length);
                break;
            case BODY_VARINT:
                set_problem(start, "record %zd of %zd: expected well-formed varints, found one too long or out of range",
                            index, count);
                break;
            case BODY_HCOUNT:
                set_problem(start, "record %zd of %zd: expected a header count >= 0, found %d", index, count,
                            (int)b.bad_count);
                break;
            case BODY_HKEY:
                set_problem(start, "record %zd of %zd: expected a header key length >= 0, found %d", index, count,
                            (int)b.bad_count);
                break;
            case BODY_LEFT:
                set_problem(start, "record %zd of %zd: expected fields filling its %d bytes, found %zd bytes after them",
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
            set_problem(start, "record %zd of %zd: expected an offset and timestamp within int64, found them past it",
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
        set_problem(pos, "expected %zd records filling %zd bytes, found %zd bytes after them", count, end, end - pos);
        goto fail;
    }
    PyBuffer_Release(&view);
    return out;
fail:
    PyBuffer_Release(&view);
    Py_DECREF(out); /* unset items are NULL; list dealloc skips them */
    return NULL;
}
