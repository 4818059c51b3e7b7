/*
 * segstore_kafka._speedups: the Java producer's partition of a keyed record (partitioner.py; its *_py
 * functions are the reference).
 *
 * Kafka 3.8 clients: ``BuiltInPartitioner.partitionForKey(serializedKey, numPartitions)`` is
 * ``Utils.toPositive(Utils.murmur2(serializedKey)) % numPartitions``; ``Utils.murmur2`` below, in
 * uint32 arithmetic (Java's int wraps the same; ``>>>`` is the unsigned shift).
 *
 * Included by _speedups.c (one translation unit), before _speedups_dicts.c, which routes plain
 * dicts with it.
 */

/* Utils.murmur2 of ``length`` bytes, as Java's (signed) int. */
static inline int32_t
murmur2(const uint8_t *data, Py_ssize_t length)
{
    const uint32_t m = 0x5bd1e995u;
    const int r = 24;
    uint32_t h = 0x9747b28cu ^ (uint32_t)length;
    Py_ssize_t length4 = length / 4;
    for (Py_ssize_t i = 0; i < length4; i++) {
        const uint8_t *p = data + 4 * i;
        uint32_t k = (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
        k *= m;
        k ^= k >> r;
        k *= m;
        h *= m;
        h ^= k;
    }
    const uint8_t *tail = data + (length & ~(Py_ssize_t)3);
    switch (length % 4) {
    case 3:
        h ^= (uint32_t)tail[2] << 16;
        /* fall through */
    case 2:
        h ^= (uint32_t)tail[1] << 8;
        /* fall through */
    case 1:
        h ^= (uint32_t)tail[0];
        h *= m;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    return (int32_t)h;
}

/* BuiltInPartitioner.partitionForKey: toPositive(murmur2(key)) % count (count >= 1). */
static inline long
key_partition(const uint8_t *key, Py_ssize_t length, long count)
{
    return (long)(((uint32_t)murmur2(key, length) & 0x7fffffffu) % (uint32_t)count);
}

/* murmur2(data) -> int: Utils.murmur2 of a bytes-like object. */
static PyObject *
murmur2_py(PyObject *module, PyObject *obj)
{
    Py_buffer view;
    if (PyObject_GetBuffer(obj, &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    int32_t h = murmur2((const uint8_t *)view.buf, view.len);
    PyBuffer_Release(&view);
    return PyLong_FromLong(h);
}

/*
 * murmur2_offsets(offsets, data) -> bytes: the n int32 Utils.murmur2 of the n values an Arrow
 * binary array's int32 ``offsets`` (n + 1 of them) delimit in ``data`` (native byte order).
 * ValueError where an offset runs backwards or past the data.
 */
static PyObject *
murmur2_offsets(PyObject *module, PyObject *args)
{
    PyObject *offsets_obj, *data_obj;
    if (!PyArg_ParseTuple(args, "OO", &offsets_obj, &data_obj)) {
        return NULL;
    }
    Py_buffer ov, dv;
    if (PyObject_GetBuffer(offsets_obj, &ov, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    if (PyObject_GetBuffer(data_obj, &dv, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&ov);
        return NULL;
    }
    PyObject *out = NULL;
    Py_ssize_t n = ov.len / (Py_ssize_t)sizeof(int32_t) - 1;
    if (ov.len % (Py_ssize_t)sizeof(int32_t) != 0 || n < 0) {
        PyErr_SetString(PyExc_ValueError, "expected n + 1 int32 offsets");
        goto done;
    }
    out = PyBytes_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(int32_t));
    if (out == NULL) {
        goto done;
    }
    const int32_t *offsets = (const int32_t *)ov.buf;
    int32_t *hashes = (int32_t *)PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < n; i++) {
        int32_t start = offsets[i], end = offsets[i + 1];
        if (start < 0 || end < start || end > dv.len) {
            PyErr_Format(PyExc_ValueError, "expected offsets within the %zd bytes of data, found %d..%d at %zd",
                         dv.len, start, end, i);
            Py_CLEAR(out);
            goto done;
        }
        hashes[i] = murmur2((const uint8_t *)dv.buf + start, end - start);
    }
done:
    PyBuffer_Release(&ov);
    PyBuffer_Release(&dv);
    return out;
}
