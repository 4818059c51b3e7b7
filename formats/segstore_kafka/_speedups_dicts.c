/*
 * segstore_kafka._speedups: append_batch of plain dicts, plain_groups, encode_plain and plain_results
 * (dictappend.py; its *_py functions).
 *
 * Included by _speedups.c (one translation unit): the layouts, constants and helpers defined
 * there, and in the files included before this one, are this file's.
 */

/* ------------------------------------------------------------------------------ */
/* plain dicts: KafkaStore.append_batch's fast path (dictappend.py; its *_py functions are the reference)
 *
 * A plain item is an exact dict whose keys are among topic, partition, key, value, timestamp and
 * headers (or a Message whose those fields are so; its offset and timestamp_type are not written), with ``topic`` an exact str and ``value`` present, ``partition`` an exact int in
 * [0, 2**31) (absent: 0), ``key``/``value`` None, bytes or a UTF-8 encodable str, ``timestamp`` an
 * exact int from -1 to int64's largest (absent or -1: the append's time), ``headers`` absent, None or a
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
    int named;      /* the item names its partition (else 0, or its key's: plain_groups' counts) */
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
        p->named = 1;
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
        /* below -1: refused by the general path (records.message_timestamp) */
        return overflow || p->timestamp < NO_TIMESTAMP ? NOT_PLAIN : PLAIN;
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
    p->named = 0;
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

/* The partition count ``widths`` (an exact dict) gives ``topic`` (0: none); -1 with an error for a
 * count that is not an int in [1, 2**31]. */
static long
topic_width(PyObject *widths, PyObject *topic)
{
    PyObject *found = PyDict_GetItemWithError(widths, topic);
    if (found == NULL) {
        return PyErr_Occurred() ? -1 : 0;
    }
    long count = PyLong_Check(found) ? PyLong_AsLong(found) : -1;
    if (count < 1 || count > (long)INT32_MAX + 1) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_ValueError, "expected partition counts in [1, 2**31]");
        }
        return -1;
    }
    return count;
}

/*
 * plain_groups(items: list, widths: dict) -> None (an item is not plain) or ([(topic, partition, rows,
 * bound, routed)], snapshot): one entry per (topic, partition) in first-seen order, ``rows`` the indices
 * of its items (int64 bytes, in order), ``bound`` an upper bound of its records region's size (at most
 * 2**31-1 - 61, else None: the general path), ``routed`` the first of its items whose partition its
 * key chose (-1: none); ``snapshot`` what was read of each item (Snapshot, for encode_plain).  An
 * item naming no partition is in partition 0, or, with a key (not None) and a topic ``widths`` gives
 * more than one partition, in key_partition's of its key's bytes (a str's UTF-8).  Runs no Python
 * code but what the collector may run.
 */
static PyObject *
plain_groups(PyObject *module, PyObject *args)
{
    PyObject *items, *widths;
    if (!PyArg_ParseTuple(args, "O!O!", &PyList_Type, &items, &PyDict_Type, &widths)) {
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(items);
    int routing = PyDict_GET_SIZE(widths) > 0;
    PyObject *width_topic = NULL;   /* the topic ``width`` is of (held by the snapshot) */
    long width = 0;
    Py_ssize_t *routed = PyMem_Malloc((n ? n : 1) * sizeof(Py_ssize_t));   /* each group's first routed */
    int32_t *gid = PyMem_Malloc((n ? n : 1) * sizeof(int32_t));
    Plain *firsts = PyMem_Malloc((n ? n : 1) * sizeof(Plain));    /* each group's first item */
    int64_t *bounds = PyMem_Calloc(n ? n : 1, sizeof(int64_t)), *counts = PyMem_Calloc(n ? n : 1, sizeof(int64_t));
    Snapshot *snap = PyMem_Malloc(sizeof(Snapshot) + (n ? n : 1) * sizeof(Plain));
    PyObject *keys = PyDict_New(), *out = NULL, *capsule = NULL;
    Py_ssize_t groups = 0;
    if (snap != NULL) {
        snap->n = 0;
    }
    if (gid == NULL || firsts == NULL || bounds == NULL || counts == NULL || keys == NULL || snap == NULL
        || routed == NULL) {
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
        int keyed = 0;
        if (routing && !p.named && p.key != Py_None) {
            if (p.topic != width_topic) {
                width = topic_width(widths, p.topic);
                if (width < 0) {
                    goto done;
                }
                width_topic = p.topic;
            }
            if (width > 1) {
                p.partition = key_partition(blob_bytes(p.key), p.klen, width);
                snap->items[snap->n - 1].partition = p.partition;
                keyed = 1;
            }
        }
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
                routed[g] = -1;
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
        if (keyed && routed[g] < 0) {
            routed[g] = i;
        }
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
                          : Py_BuildValue("(OlNNn)", firsts[g].topic, firsts[g].partition, rows, bound, routed[g]);
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
    PyMem_Free(routed);
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
 * plain_bounds(items, rows) -> bytes: the int64 size bound of the record of each plain item at
 * ``rows`` (int64 indices), the bounds plain_groups sums into a group's; ValueError: an item not plain
 * (any more) or a row outside ``items``.  What append_batch cuts a group too large for one batch by.
 */
static PyObject *
plain_bounds(PyObject *module, PyObject *args)
{
    PyObject *items, *rows_obj;
    if (!PyArg_ParseTuple(args, "O!O", &PyList_Type, &items, &rows_obj)) {
        return NULL;
    }
    Py_buffer rows;
    if (PyObject_GetBuffer(rows_obj, &rows, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    const int64_t *rw = rows.buf;
    Py_ssize_t count = rows.len / 8;
    PyObject *out = PyBytes_FromStringAndSize(NULL, count * (Py_ssize_t)sizeof(int64_t));
    if (out == NULL) {
        PyBuffer_Release(&rows);
        return NULL;
    }
    int64_t *sizes = (int64_t *)PyBytes_AS_STRING(out);
    for (Py_ssize_t k = 0; k < count; k++) {
        Plain p;
        Py_ssize_t bound;
        if (rw[k] < 0 || rw[k] >= PyList_GET_SIZE(items)
                || parse_plain(PyList_GET_ITEM(items, rw[k]), &p, &bound) != PLAIN) {
            PyErr_SetString(PyExc_ValueError, "rows of plain items (the items changed?)");
            Py_DECREF(out);
            PyBuffer_Release(&rows);
            return NULL;
        }
        sizes[k] = bound;
    }
    PyBuffer_Release(&rows);
    return out;
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
