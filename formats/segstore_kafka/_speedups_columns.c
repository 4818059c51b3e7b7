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
 *
 * A batch's records go through two loops: the fast loop (fast_records) takes the records of the
 * usual shape with one bound check a record, and hands the first other record and the rest of the
 * batch to the checked loop (checked_record), which checks every field as the reference does and
 * so decides every decline and FULL stop.
 */

enum { STOP_END = 0, STOP_FULL = 1, STOP_DECLINE = 2 };
/* WANT_BATCH_HEADERS: the batches only, as Kafka's producer state reads the log (ProducerAppendInfo,
 * LogSegment.recover): a data batch's records are not decoded (no row), a control batch's are (its
 * marker).  The reference (columnar._decode_reference) does the same. */
enum { WANT_KEY = 1, WANT_VALUE = 2, WANT_HEADERS = 4, WANT_BATCH_HEADERS = 8 };
/* OMIT_*: row buffers a reader of the chunk does not look at (columnar.want_flags), which the fast loop
 * leaves unwritten: OMIT_TIMESTAMP the timestamps, OMIT_ROW_EXTRAS the sequences, the rows' batches
 * and the header offsets (ignored with WANT_HEADERS).  The checked loop writes them all the same. */
enum { OMIT_TIMESTAMP = 16, OMIT_ROW_EXTRAS = 32 };
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

/* Bits [from, to) of a bitmap set (the other bits of their bytes left as they are). */
static inline void
set_bits_on(uint8_t *bitmap, Py_ssize_t from, Py_ssize_t to)
{
    if (from >= to) {
        return;
    }
    Py_ssize_t first = from >> 3, last = (to - 1) >> 3;
    uint8_t head = (uint8_t)(0xFFu << (from & 7)), tail = (uint8_t)(0xFFu >> (7 - ((to - 1) & 7)));
    if (first == last) {
        bitmap[first] |= head & tail;
        return;
    }
    bitmap[first] |= head;
    memset(bitmap + first + 1, 0xFF, (size_t)(last - first - 1));
    bitmap[last] |= tail;
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

#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)

/* Header ``hkey`` (UTF-8, checked) / ``hvalue`` (< 0: null) into the next header slot; the caller
 * checked that the slot and both data buffers have room. */
static inline void
put_header(Cols *c, const uint8_t *hkey, int32_t hkey_len, const uint8_t *hvalue, int32_t hvalue_len)
{
    Py_ssize_t hi = c->n.headers;
    copy_short(c->hkey_data + c->n.hkey, hkey, (size_t)hkey_len);
    c->n.hkey += hkey_len;
    c->hkey_off[hi + 1] = (int32_t)c->n.hkey;
    set_bit(c->hvalue_valid, hi, hvalue_len >= 0);
    if (hvalue_len >= 0) {
        copy_short(c->hvalue_data + c->n.hvalue, hvalue, (size_t)hvalue_len);
        c->n.hvalue += hvalue_len;
    } else {
        c->n.hvalue_nulls++;
    }
    c->hvalue_off[hi + 1] = (int32_t)c->n.hvalue;
    c->n.headers = hi + 1;
}

/* Row c->n.rows: the record's offset and timestamp (computed, in range), its key and value (< 0:
 * null; copied where wanted: the caller checked the room) and the headers put before it. */
static inline void
put_row(Cols *c, const BatchRow *batch, int64_t offset, int64_t timestamp, int32_t offset_delta,
        const uint8_t *key, int32_t key_len, const uint8_t *value, int32_t value_len)
{
    Py_ssize_t row = c->n.rows;
    if (c->want & WANT_KEY) {
        set_bit(c->key_valid, row, key_len >= 0);
        if (key_len >= 0) {
            copy_short(c->key_data + c->n.key, key, (size_t)key_len);   /* keys: mostly short */
            c->n.key += key_len;
        } else {
            c->n.key_nulls++;
        }
        c->key_off[row + 1] = (int32_t)c->n.key;
    }
    if (c->want & WANT_VALUE) {
        set_bit(c->value_valid, row, value_len >= 0);
        if (value_len >= 0) {
            memcpy(c->value_data + c->n.value, value, (size_t)value_len);
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
}

/* One record at buf[*pos] by the checked loop: every read bounded by the record's length, every
 * field checked as the reference checks it (the same outcome for every input, in the same order:
 * a short buffer is FULL only where the record would decode). */
static int
checked_record(const uint8_t *buf, Py_ssize_t end, Py_ssize_t *pos, const BatchRow *batch,
               int log_append_time, Cols *c, int *need)
{
    const int want = c->want;
    int32_t length;
    if (read_varint(buf, end, pos, &length) != VARINT_OK || length < 0 || length > end - *pos ||
        length < 1) {
        return REC_DECLINE;
    }
    const uint8_t *body = buf + *pos;
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
    if (c->n.rows >= c->cap.rows) {
        *need |= NEED_ROWS;
        return REC_FULL;
    }
    if ((want & WANT_HEADERS) && header_count > c->cap.headers - c->n.headers) {
        *need |= NEED_HEADERS;
        return REC_FULL;
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
            if (hkey_len > c->cap.hkey - c->n.hkey) {
                *need |= NEED_HKEY;
                return REC_FULL;
            }
            if (hvalue_len > c->cap.hvalue - c->n.hvalue) {
                *need |= NEED_HVALUE;
                return REC_FULL;
            }
            put_header(c, body + hkey_at, hkey_len, body + hvalue_at, hvalue_len);
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
    if ((want & WANT_KEY) && key_len > c->cap.key - c->n.key) {
        *need |= NEED_KEY;
        return REC_FULL;
    }
    if ((want & WANT_VALUE) && value_len > c->cap.value - c->n.value) {
        *need |= NEED_VALUE;
        return REC_FULL;
    }
    put_row(c, batch, offset, timestamp, offset_delta, body + key_at, key_len, body + value_at, value_len);
    *pos += length;
    return REC_OK;
}

/* ---- the fast loop: the records of a batch already known to fit ----
 *
 * Most records are alike: every varint of one to three bytes, each field inside the record.  The
 * fast loop reads a record's fields without a bound per field and checks once that they end where
 * its length says (bp == length: a field running past the end leaves it past).  A field read past
 * the record's end is read from bytes that are still the buffer's: the loop takes a record only
 * where FAST_OVERREAD bytes follow it in the readable bytes (``safe``; a batch decoded where it
 * lies in the log may read into what follows it, an inflated one only its own bytes), so the last
 * records of a map or of an inflated region go to the checked loop.  Bounds that hold for a whole
 * batch are checked once (fast_batch).  On anything else (a longer varint, a field past the
 * record, a short header buffer) the record is left untouched and the checked loop takes it and
 * the rest of the batch, so declines, FULL stops and their positions are the checked loop's. */

/* Bytes a record's reads may lie past its end (body + length): before any bound is checked the
 * reads reach body[15] at most (the attributes, three varints of three bytes, a null key, two more
 * varints: a record of one byte reads the 15 bytes after it), and after a field checked to end inside the
 * record at most two varints (6 bytes) past the end. */
#define FAST_OVERREAD 16
/* Three varint bytes hold values below 2^21: zigzag deltas within +-2^20. */
#define FAST_DELTA_BOUND ((int64_t)1 << 20)
/* Prefetch distances of the fast loop, two lines a record: the log FAST_READ_AHEAD bytes ahead of
 * the record (the batches after this one: a batch's CRC is the first to touch its bytes, and went at
 * the speed of memory, not of the crc32 instruction) and the value column FAST_WRITE_AHEAD bytes
 * ahead of its end (blocks of the arena or the pool that the caches lost since they were last used).
 * A Spark worker's CPU per query of 4M 100-byte values (a plan and every partition through the worker
 * protocol, in one process with its client; medians of 10 queries, 3-4 runs each, load 3-9): value
 * column 0.179 -> 0.156 s, every connector column 0.229 -> 0.201 s; 32 KiB to 256 KiB ahead of the
 * log and 2 to 8 KiB of the values measured alike, 16 KiB of the log worse.  A prefetch never
 * faults; both stay inside the readable bytes and the value buffer all the same. */
#define FAST_READ_AHEAD (64 << 10)
#define FAST_WRITE_AHEAD (4 << 10)

/* An unsigned varint of one to three bytes at *p, read without a bound (three bytes there are
 * readable): its value, *p moved past it; -1, *p left, for a longer one (the checked loop reads it). */
static inline int32_t
fast_unsigned(const uint8_t **p)
{
    const uint8_t *q = *p;
    uint32_t b0 = q[0];
    if (LIKELY(b0 < 0x80)) {
        *p = q + 1;
        return (int32_t)b0;
    }
    uint32_t b1 = q[1];
    if (LIKELY(b1 < 0x80)) {
        *p = q + 2;
        return (int32_t)((b0 & 0x7F) | (b1 << 7));
    }
    uint32_t b2 = q[2];
    if (b2 < 0x80) {
        *p = q + 3;
        return (int32_t)((b0 & 0x7F) | ((b1 & 0x7F) << 7) | (b2 << 14));
    }
    return -1;
}

static inline int32_t
unzigzag32(int32_t raw)
{
    return (int32_t)((uint32_t)raw >> 1) ^ -(raw & 1);
}

/* Whether the fast loop may take the batch's records: their offsets and timestamps cannot leave
 * int64 (deltas of three varint bytes), and keys and values, which lie inside the region, fit in
 * what is left of their buffers.  The rows fit already (decode_column_batch). */
static inline int
fast_batch(const BatchRow *b, int log_append_time, Py_ssize_t region_len, const Cols *c)
{
    if (b->base_offset > INT64_MAX - FAST_DELTA_BOUND || b->base_offset < INT64_MIN + FAST_DELTA_BOUND) {
        return 0;
    }
    if (!log_append_time && (b->base_timestamp > INT64_MAX - FAST_DELTA_BOUND ||
                             b->base_timestamp < INT64_MIN + FAST_DELTA_BOUND)) {
        return 0;
    }
    return (!(c->want & WANT_KEY) || region_len <= c->cap.key - c->n.key) &&
           (!(c->want & WANT_VALUE) || region_len <= c->cap.value - c->n.value);
}

/* The ``count`` headers of a record from q (after its header count; the record ends at ``stop``) by
 * the fast loop: where they end, them put (where wanted); or NULL (some may be put: the caller sets
 * the header counts back).  Not inlined: a record with headers is the fast loop's rarer case, and q
 * passed by address would keep the loop's cursor out of a register. */
static const uint8_t *
fast_headers(const uint8_t *q, const uint8_t *stop, int32_t count, Cols *c)
{
    const int want = c->want;
    if (q > stop || ((want & WANT_HEADERS) && count > c->cap.headers - c->n.headers)) {
        return NULL;
    }
    for (int32_t h = 0; h < count; h++) {
        /* q <= stop + 3 here (a null value's length may have run past): the reads stay within
         * stop + 6, and a key length past that fails its bound */
        int32_t hkey_len = fast_unsigned(&q);
        if (hkey_len < 0 || (hkey_len = unzigzag32(hkey_len)) < 0 || hkey_len > stop - q) {
            return NULL;
        }
        const uint8_t *hkey = q;
        q += hkey_len;
        int32_t hvalue_len = fast_unsigned(&q);
        if (hvalue_len < 0) {
            return NULL;
        }
        hvalue_len = unzigzag32(hvalue_len);
        const uint8_t *hvalue = q;
        if (hvalue_len >= 0) {
            if (hvalue_len > stop - q) {
                return NULL;
            }
            q += hvalue_len;
        }
        if (!valid_utf8(hkey, hkey_len, 0)) {
            return NULL;
        }
        if (want & WANT_HEADERS) {
            if (hkey_len > c->cap.hkey - c->n.hkey || hvalue_len > c->cap.hvalue - c->n.hvalue) {
                return NULL;
            }
            put_header(c, hkey, hkey_len, hvalue, hvalue_len);
        }
    }
    return q;
}

/* The fast loop over a batch's records from buf[*pos], record *index on: each record it takes is put
 * as put_row puts it, *pos and *index moved past it; it stops before the first it does not take
 * (c->n then as after the record before) or at the batch's end.  Reads lie before buf + *pos + 3 and
 * before each record's end plus FAST_OVERREAD, inside ``safe`` (as do its prefetches of the log ahead,
 * FAST_READ_AHEAD; those of the values stay inside their buffer).  The counts and column pointers are
 * held in locals while it runs (a store through a byte pointer would make the compiler load c's
 * fields again), and ``want`` is a constant where decode_column_records calls it: each of its
 * copies writes only what its columns need. */
static inline __attribute__((always_inline)) void
fast_records(const uint8_t *buf, Py_ssize_t end, Py_ssize_t safe, Py_ssize_t *pos_p, int32_t *index_p,
             const BatchRow *batch, int log_append_time, Cols *c, const int want)
{
    /* a record at or past ``limit`` cannot be taken (its length must end inside the region and
     * FAST_OVERREAD bytes before ``safe``): below it, its length varint's three bytes are readable */
    const Py_ssize_t limit = end < safe - FAST_OVERREAD ? end : safe - FAST_OVERREAD;
    /* the log prefetched below read_ahead_end, the values below value_ahead_end (FAST_READ_AHEAD) */
    const Py_ssize_t read_ahead_end = safe - FAST_READ_AHEAD - 128;
    const Py_ssize_t value_ahead_end = c->cap.value - FAST_WRITE_AHEAD - 128;
    const int32_t count = batch->record_count;
    const int64_t base_offset = batch->base_offset;
    const int64_t base_timestamp = batch->base_timestamp, max_timestamp = batch->max_timestamp;
    const int32_t base_sequence = batch->base_sequence, batch_index = (int32_t)c->n.batches;
    Py_ssize_t pos = *pos_p, row = c->n.rows, nkey = c->n.key, nvalue = c->n.value;
    Py_ssize_t key_nulls = c->n.key_nulls, value_nulls = c->n.value_nulls, headers = c->n.headers;
    int32_t index = *index_p;
    uint8_t *const key_data = c->key_data, *const value_data = c->value_data;
    uint8_t *const key_valid = c->key_valid, *const value_valid = c->value_valid;
    int32_t *const key_off = c->key_off, *const value_off = c->value_off;
    int64_t *const offsets = c->offset, *const timestamps = c->timestamp;
    int32_t *const sequences = c->sequence, *const row_batch = c->row_batch, *const header_off = c->header_off;
    /* validity: the bits of the rows from *_valid_from on are set when a null comes (then its bit
     * cleared) or the loop ends, not one a row */
    Py_ssize_t key_valid_from = row, value_valid_from = row;
    for (; index < count && pos < limit; index++) {
        const uint8_t *q = buf + pos;
        if (pos <= read_ahead_end) {
            __builtin_prefetch(q + FAST_READ_AHEAD);
            __builtin_prefetch(q + FAST_READ_AHEAD + 64);
        }
        if ((want & WANT_VALUE) && nvalue <= value_ahead_end) {
            __builtin_prefetch(value_data + nvalue + FAST_WRITE_AHEAD, 1);
            __builtin_prefetch(value_data + nvalue + FAST_WRITE_AHEAD + 64, 1);
        }
        int32_t raw = fast_unsigned(&q);
        Py_ssize_t at = q - buf;
        /* even and >= 2: a length >= 1 (a varint of more than three bytes: -1, odd) */
        if (UNLIKELY((raw & 1) || raw < 2 || (raw >> 1) > limit - at)) {
            break;
        }
        const uint8_t *body = q, *stop = body + (raw >> 1);
        q = body + 1;       /* attributes: unused */
        int32_t ts_raw = fast_unsigned(&q);
        int32_t delta_raw = fast_unsigned(&q);
        int32_t key_raw = fast_unsigned(&q);
        if (UNLIKELY((ts_raw | delta_raw | key_raw) < 0)) {
            break;
        }
        /* a length's zigzag is odd where it is negative (null, whatever its value) */
        const uint8_t *key = q;
        int32_t key_len = -1;
        if (LIKELY(!(key_raw & 1))) {
            key_len = key_raw >> 1;
            if (UNLIKELY(key_len > stop - q)) {
                break;
            }
            q += key_len;
        }
        int32_t value_raw = fast_unsigned(&q);
        if (UNLIKELY(value_raw < 0)) {
            break;
        }
        const uint8_t *value = q;
        int32_t value_len = -1;
        if (LIKELY(!(value_raw & 1))) {
            value_len = value_raw >> 1;
            if (UNLIKELY(value_len > stop - q)) {
                break;
            }
            q += value_len;
        }
        int32_t header_raw = fast_unsigned(&q);
        if (LIKELY(header_raw == 0)) {
            if (UNLIKELY(q != stop)) {
                break;
            }
        } else {
            if (header_raw < 0 || (header_raw & 1)) {
                break;      /* a count of more than three bytes, or negative */
            }
            Py_ssize_t hkey = c->n.hkey, hvalue = c->n.hvalue, hvalue_nulls = c->n.hvalue_nulls;
            q = fast_headers(q, stop, header_raw >> 1, c);
            if (q != stop) {    /* (NULL: refused) */
                c->n.headers = headers;     /* what was put is the checked loop's to put again */
                c->n.hkey = hkey;
                c->n.hvalue = hvalue;
                c->n.hvalue_nulls = hvalue_nulls;
                break;
            }
            headers = c->n.headers;
        }
        /* the record is whole: put it */
        if (want & WANT_KEY) {
            if (LIKELY(key_len >= 0)) {
                copy_short(key_data + nkey, key, (size_t)key_len);
                nkey += key_len;
            } else {
                set_bits_on(key_valid, key_valid_from, row);
                set_bit(key_valid, row, 0);
                key_valid_from = row + 1;
                key_nulls++;
            }
            key_off[row + 1] = (int32_t)nkey;
        }
        if (want & WANT_VALUE) {
            if (LIKELY(value_len >= 0)) {
                memcpy(value_data + nvalue, value, (size_t)value_len);
                nvalue += value_len;
            } else {
                set_bits_on(value_valid, value_valid_from, row);
                set_bit(value_valid, row, 0);
                value_valid_from = row + 1;
                value_nulls++;
            }
            value_off[row + 1] = (int32_t)nvalue;
        }
        int32_t offset_delta = unzigzag32(delta_raw);
        offsets[row] = base_offset + offset_delta;
        if (!(want & OMIT_TIMESTAMP)) {
            timestamps[row] = log_append_time ? max_timestamp : base_timestamp + unzigzag32(ts_raw);
        }
        if (!(want & OMIT_ROW_EXTRAS)) {
            sequences[row] = (int32_t)(base_sequence == NO_SEQUENCE
                                           ? NO_SEQUENCE : increment_sequence(base_sequence, offset_delta));
            row_batch[row] = batch_index;
            header_off[row + 1] = (int32_t)headers;
        }
        row++;
        pos = q - buf;
    }
    if (want & WANT_KEY) {
        set_bits_on(key_valid, key_valid_from, row);
    }
    if (want & WANT_VALUE) {
        set_bits_on(value_valid, value_valid_from, row);
    }
    c->n.rows = row;
    c->n.key = nkey;
    c->n.value = nvalue;
    c->n.key_nulls = key_nulls;
    c->n.value_nulls = value_nulls;
    *pos_p = pos;
    *index_p = index;
}

/* fast_records with ``want`` a constant, one copy for each value of the bits it tests. */
typedef void (*FastRecords)(const uint8_t *, Py_ssize_t, Py_ssize_t, Py_ssize_t *, int32_t *, const BatchRow *,
                            int, Cols *);
/* the bits it tests, packed: KEY, VALUE, OMIT_TIMESTAMP, OMIT_ROW_EXTRAS -> 0..15 (OMIT_ROW_EXTRAS
 * dropped with WANT_HEADERS: the header offsets are then a column's) */
#define FAST_BITS (WANT_KEY | WANT_VALUE | OMIT_TIMESTAMP | OMIT_ROW_EXTRAS)
#define FAST_WANT(v) (((v) & 3) | (((v) & 12) << 2))
_Static_assert(FAST_WANT(15) == FAST_BITS, "FAST_WANT unpacks FAST_BITS");

static inline int
fast_variant(int want)
{
    if (want & WANT_HEADERS) {
        want &= ~OMIT_ROW_EXTRAS;
    }
    return (want & 3) | ((want >> 2) & 12);
}
#define FAST_COPY(v)                                                                                       \
    static void fast_records_##v(const uint8_t *buf, Py_ssize_t end, Py_ssize_t safe, Py_ssize_t *pos,   \
                                 int32_t *index, const BatchRow *batch, int log_append_time, Cols *c)    \
    {                                                                                                    \
        fast_records(buf, end, safe, pos, index, batch, log_append_time, c, FAST_WANT(v));               \
    }
#define FAST_COPY8(a, b, c, d, e, f, g, h) FAST_COPY(a) FAST_COPY(b) FAST_COPY(c) FAST_COPY(d) FAST_COPY(e) \
    FAST_COPY(f) FAST_COPY(g) FAST_COPY(h)
FAST_COPY8(0, 1, 2, 3, 4, 5, 6, 7)
FAST_COPY8(8, 9, 10, 11, 12, 13, 14, 15)
#define FAST_REF(v) fast_records_##v
static const FastRecords fast_variants[16] = {
    FAST_REF(0), FAST_REF(1), FAST_REF(2), FAST_REF(3), FAST_REF(4), FAST_REF(5), FAST_REF(6), FAST_REF(7),
    FAST_REF(8), FAST_REF(9), FAST_REF(10), FAST_REF(11), FAST_REF(12), FAST_REF(13), FAST_REF(14),
    FAST_REF(15),
};

/* A batch's ``record_count`` records from buf[0] (``end`` bytes; ``safe`` >= end of them readable)
 * into the columns: the fast loop while it takes them (its copy for the columns wanted), then the
 * checked loop. */
static int
decode_column_records(const uint8_t *buf, Py_ssize_t end, Py_ssize_t safe, const BatchRow *batch,
                      int log_append_time, Cols *c, int *need)
{
    Py_ssize_t pos = 0;
    int32_t index = 0;
    if (fast_batch(batch, log_append_time, end, c)) {
        fast_variants[fast_variant(c->want)](buf, end, safe, &pos, &index, batch, log_append_time, c);
    }
    for (; index < batch->record_count; index++) {
        int rc = checked_record(buf, end, &pos, batch, log_append_time, c, need);
        if (rc != REC_OK) {
            return rc;
        }
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
        /* read in place, a batch may read into the log after it; inflated, only its own bytes */
        Py_ssize_t safe = inflated != NULL ? region_len : log_len - (pos + V2_HEADER_SIZE);
        rc = decode_column_records(region, region_len, safe, &b, b.attributes & TIMESTAMP_TYPE_FLAG, c, need);
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
