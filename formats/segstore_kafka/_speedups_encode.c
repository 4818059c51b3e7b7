/*
 * segstore_kafka._speedups: records encoded from Record objects, encode_records (batch.py:
 * _encode_records_py).
 *
 * Included by _speedups.c (one translation unit): the layouts, constants and helpers defined
 * there, and in the files included before this one, are this file's.
 */

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
        PyErr_Format(PyExc_TypeError, "expected a %s as bytes, str or None, found %.100s", what, Py_TYPE(obj)->tp_name);
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
