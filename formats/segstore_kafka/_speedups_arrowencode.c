/*
 * segstore_kafka._speedups: records and batches encoded from Arrow columns, encode_columns and
 * encode_batch (arrowencode.py; batch.encode_columns_py).
 *
 * Included by _speedups.c (one translation unit): the layouts, constants and helpers defined
 * there, and in the files included before this one, are this file's.
 */

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

/* How far ahead columns_region starts loading a row's bytes (rows; each span: prefetch_span). */
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
         * are known ahead (the row numbers), so the loads are started early, in three steps of
         * PREFETCH_ROWS rows (each address depends on a load of the step before): the row's
         * offsets 3 steps ahead, its headers' offsets 2 steps ahead, and 1 step ahead every cache
         * line of its key, its value and its headers' keys and values (a row's 10-20 headers span
         * several lines, which the hardware prefetcher does not follow from one row to the next: a
         * partition's rows are pages apart).  A prefetch never faults; the offsets read here are
         * read again and checked before use, the rows' range checked first. */
        if (k + 3 * PREFETCH_ROWS < n) {
            int64_t j = rw[k + 3 * PREFETCH_ROWS];
            if (j >= 0 && j < rows_n) {
                __builtin_prefetch(ko + j);
                __builtin_prefetch(vo + j);
                __builtin_prefetch(hoff + j);
                __builtin_prefetch(ts + j);
            }
        }
        if (k + 2 * PREFETCH_ROWS < n) {
            int64_t j = rw[k + 2 * PREFETCH_ROWS];
            if (j >= 0 && j < rows_n) {
                int64_t h0 = hoff[j], h1 = hoff[j + 1];
                if (h0 >= 0 && h0 < h1 && h1 <= m) {
                    __builtin_prefetch(hko + h0);
                    __builtin_prefetch(hko + h1);
                    __builtin_prefetch(hvo + h0);
                    __builtin_prefetch(hvo + h1);
                    __builtin_prefetch(hvv + h0);
                }
            }
        }
        if (k + PREFETCH_ROWS < n) {
            int64_t j = rw[k + PREFETCH_ROWS];
            if (j >= 0 && j < rows_n) {
                prefetch_span(kd + ko[j], (int64_t)ko[j + 1] - ko[j]);
                prefetch_span(vd + vo[j], (int64_t)vo[j + 1] - vo[j]);
                int64_t h0 = hoff[j], h1 = hoff[j + 1];
                if (h0 >= 0 && h0 < h1 && h1 <= m) {
                    prefetch_span(hkd + hko[h0], (int64_t)hko[h1] - hko[h0]);
                    prefetch_span(hvdp + hvo[h0], (int64_t)hvo[h1] - hvo[h0]);
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
