/*
 * segstore_kafka._speedups: a log region's v2 batches into column buffers, decode_columns
 * (columnar.py).
 *
 * Included by _speedups.c (one translation unit): the layouts, constants and helpers defined
 * there, and in the files included before this one, are this file's.
 */

/* ------------------------------------------------------------------------------ */
/* columnar decode: a log region's v2 batches into column buffers (columnar.py)
 *
 * decode_columns(log, pos, end, want, decompress, buffers) walks the batches
 * that start in [pos, end) of the .log bytes ``log`` and fills the column
 * buffers of columnar.py (BUFFERS names them, in order).  A batch is taken only
 * whole and only when everything the reference path checks holds: the entry
 * lies inside ``log``, magic 2, the v2 minimum length, the CRC-32C, a record
 * count >= 0, its (decompressed) records filling the region exactly with valid
 * varints, UTF-8 header keys and offsets/timestamps within int64 (a count of 0:
 * no record, the region unread, as DefaultRecordBatch.iterator).  Any other
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
/* WANT_BATCH_HEADERS: the batches only, as Kafka's producer state reads the log (ProducerAppendInfo,
 * LogSegment.recover): a data batch's records are not decoded (no row), a control batch's are (its
 * marker).  The reference (columnar._decode_reference) does the same. */
enum { WANT_KEY = 1, WANT_VALUE = 2, WANT_HEADERS = 4, WANT_BATCH_HEADERS = 8 };
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
                copy_short(c->key_data + c->n.key, body + key_at, (size_t)key_len);   /* keys: mostly short */
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
    if (b.record_count == 0 || ((c->want & WANT_BATCH_HEADERS) && !(b.attributes & 0x20))) {
        /* DefaultRecordBatch.iterator: no record, the region (compressed or not) unread; or a data
         * batch of a header walk (WANT_BATCH_HEADERS) */
        c->batch[c->n.batches++] = b;
        return REC_OK;
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
