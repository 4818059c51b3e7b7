/*
 * segstore_rocketmq._speedups: the batch append of plain messages in one call.
 *
 * encode_plain(items, topic_fields, next_offsets, keys_first, store_ts, store_ip, store_port,
 *              start, file_size, limit, with_index, dest[, trailing[, dest_start]])
 *     dest: None or a writable buffer whose byte dest_start is physical offset start (a mapped
 *     commitlog file: its unwritten rest is where an in-place batch goes)
 *     trailing: end the properties with 0x02 (brokers up to 4.9.0 and from 5.2.0;
 *     MessageDecoder.messageProperties2String of that version)
 *     -> None | str | (data, blanks, results, cq_rows, queues, index_arrays, end)
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
 * Included by _speedups.c (one translation unit): the layouts, constants and helpers defined
 * there, and in the files included before this one, are this file's.
 */

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
    /* at most 2147483646: the topic's queue count (id + 1) is a Java int in config/topics.json
     * (message.MAX_QUEUE_ID); anything else goes the Python way, which raises the typed error */
    if ((rc = plain_int(qid, 0, 0, INT32_MAX - 1, &x))) {
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
    uint32_t crc = body_crc32((const uint8_t *)m->body, (size_t)m->body_len);
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
