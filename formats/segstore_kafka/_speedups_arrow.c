/*
 * segstore_kafka._speedups: a decoded chunk's columns handed to Arrow as one record batch,
 * export_chunk (columnar.to_arrow).
 *
 * Included by _speedups.c (one translation unit): the layouts, constants and helpers defined
 * there, and in the files included before this one (Cols, BatchRow, the B_* buffer numbers of
 * _speedups_columns.c), are this file's.
 *
 * columnar.to_arrow's reference builds a chunk's record batch with one pyarrow from_buffers call
 * per column and numpy per batch-level column: about 0.35 ms of Python a chunk of 16k rows, under
 * the GIL, which several scan threads take in turn.  export_chunk lays the same columns out over the
 * same buffers in one call and hands them over through the Arrow C data interface
 * (arrow/c/abi.h, the layout below); pyarrow imports them (RecordBatch._import_from_c) in one
 * call.  The chunk's buffers are shared, not copied (the export holds a view of each until Arrow
 * releases the batch); the batch-level columns, written out once per row, and the topic column go
 * into ``scratch``, a buffer the caller took from the pool, of the size export_scratch gives.
 *
 * export_scratch(codes, rows, topic_len) -> int: the scratch bytes export_chunk needs.
 * export_chunk(codes, counts, buffers, scratch, topic, partition, segment) -> int
 *     codes: bytes, the KAFKA_SCHEMA column numbers (EK_* below) in the batch's column order;
 *     counts: (rows, batches, key, value, headers, hkey, hvalue, key_nulls, value_nulls,
 *     hvalue_nulls), the chunk's counts; buffers: the chunk's 17 buffers in columnar.BUFFERS
 *     order; returns the address of a struct ArrowArray (a struct array of the columns), which
 *     the caller imports (the import moves it) and then frees with release_export, which also
 *     releases it where no import took it.
 *
 * The batch-level columns per row (what spread_runs writes for the reference):
 *     position, baseOffset, producerId  int64    size, leaderEpoch  int32
 *     magic  int8    compression  int8 = attributes & 0x07    producerEpoch  int16
 *     timestampType  int32 = -1 for magic 0, else (attributes & 0x08) != 0
 *     isTransactional / isControl  bit-packed = magic >= 2 and attributes & 0x10 / 0x20
 *     partition int32, segment int64: one value for the chunk; topic: one string for the chunk.
 */

/* KAFKA_SCHEMA's columns, in its order (columnar._export_of numbers them so). */
enum {
    EK_KEY, EK_VALUE, EK_TOPIC, EK_PARTITION, EK_OFFSET, EK_TIMESTAMP, EK_TIMESTAMP_TYPE, EK_HEADERS,
    EK_POSITION, EK_SIZE, EK_BASE_OFFSET, EK_LEADER_EPOCH, EK_MAGIC, EK_COMPRESSION, EK_TRANSACTIONAL,
    EK_CONTROL, EK_PRODUCER_ID, EK_PRODUCER_EPOCH, EK_SEQUENCE, EK_SEGMENT, N_KINDS,
};

#define EXPORT_ATTR_TRANSACTIONAL 0x10
#define EXPORT_ATTR_CONTROL 0x20
#define EXPORT_ALIGN 64
/* the parent, a column each, and the headers' struct and its two children */
#define EXPORT_ARRAYS (1 + N_KINDS + 3)

/* Array 0 is the batch (a struct array), 1 + c its column c, and after the columns a headers
 * column's struct array and that struct's key and value arrays. */
typedef struct {
    struct ArrowArray arrays[EXPORT_ARRAYS];
    struct ArrowArray *children[EXPORT_ARRAYS];
    const void *buffers[EXPORT_ARRAYS * 3];
    Py_buffer views[N_BUFFERS + 1];     /* the chunk's buffers, then scratch */
    int nviews;
} ChunkExport;

static void
export_release(struct ArrowArray *array)
{
    ChunkExport *ex = array->private_data;
    if (ex != NULL && Py_IsInitialized()) {
        /* Arrow may drop the batch on any thread: releasing the views needs the GIL */
        PyGILState_STATE state = PyGILState_Ensure();
        for (int i = 0; i < ex->nviews; i++) {
            PyBuffer_Release(&ex->views[i]);
        }
        PyGILState_Release(state);
    }
    array->release = NULL;
    array->private_data = NULL;
    PyMem_RawFree(ex);
}

/* Array ``i`` of ``ex``: length, null count, ``n_buffers`` buffer slots, no children. */
static struct ArrowArray *
export_array(ChunkExport *ex, int i, int64_t length, int64_t null_count, int n_buffers)
{
    struct ArrowArray *a = &ex->arrays[i];
    a->length = length;
    a->null_count = null_count;
    a->offset = 0;
    a->n_buffers = n_buffers;
    a->n_children = 0;
    a->buffers = &ex->buffers[i * 3];
    a->children = NULL;
    a->dictionary = NULL;
    a->release = arrow_release_child;
    a->private_data = NULL;
    return a;
}

/* A fixed-width (or bit-packed) column over ``data``, no nulls, as array ``i``. */
static void
export_fixed(ChunkExport *ex, int i, int64_t n, const void *data)
{
    struct ArrowArray *a = export_array(ex, i, n, 0, 2);
    a->buffers[0] = NULL;
    a->buffers[1] = data;
}

/* A binary or string column as array ``i``: validity (none without nulls), int32 offsets, data. */
static void
export_binary(ChunkExport *ex, int i, int64_t n, int64_t nulls, const void *valid, const void *offsets,
              const void *data)
{
    struct ArrowArray *a = export_array(ex, i, n, nulls, 3);
    a->buffers[0] = nulls ? valid : NULL;
    a->buffers[1] = offsets;
    a->buffers[2] = data;
}

/* ``size`` bytes of scratch at *at (aligned), *at moved past them; NULL when scratch is short. */
static char *
export_take(char *base, Py_ssize_t cap, Py_ssize_t *at, Py_ssize_t size)
{
    Py_ssize_t start = (*at + EXPORT_ALIGN - 1) / EXPORT_ALIGN * EXPORT_ALIGN;
    if (size < 0 || start > cap || size > cap - start) {
        return NULL;
    }
    *at = start + size;
    return base + start;
}

/* Bytes a row of column ``kind`` takes in scratch: 1-8 for a column written out per row, -1 for a
 * bit-packed one, 0 for one over the chunk's own buffers (the topic's are export_scratch's). */
static int
export_width(int kind)
{
    switch (kind) {
    case EK_POSITION: case EK_BASE_OFFSET: case EK_PRODUCER_ID: case EK_SEGMENT: return 8;
    case EK_SIZE: case EK_LEADER_EPOCH: case EK_TIMESTAMP_TYPE: case EK_PARTITION: return 4;
    case EK_PRODUCER_EPOCH: return 2;
    case EK_MAGIC: case EK_COMPRESSION: return 1;
    case EK_TRANSACTIONAL: case EK_CONTROL: return -1;
    default: return 0;
    }
}

/* The bytes column ``kind`` takes from scratch for ``n`` rows (each take aligned: at most
 * EXPORT_ALIGN - 1 more), or -1 where that overflows. */
static Py_ssize_t
export_column_scratch(int kind, int64_t n, Py_ssize_t topic_len)
{
    if (n < 0 || n > (PY_SSIZE_T_MAX >> 4) || topic_len < 0 || (topic_len && n > PY_SSIZE_T_MAX / 2 / topic_len)) {
        return -1;
    }
    if (kind == EK_TOPIC) {     /* offsets, then the text once a row */
        return (n + 1) * 4 + EXPORT_ALIGN + n * topic_len + EXPORT_ALIGN;
    }
    int width = export_width(kind);
    return width > 0 ? n * width + EXPORT_ALIGN : width < 0 ? (n + 7) / 8 + EXPORT_ALIGN : 0;
}

/* export_scratch(codes, rows, topic_len) -> int: the scratch export_chunk needs for those columns. */
static PyObject *
export_scratch(PyObject *module, PyObject *args)
{
    Py_buffer codes;
    long long n;
    Py_ssize_t topic_len;
    if (!PyArg_ParseTuple(args, "y*Ln", &codes, &n, &topic_len)) {
        return NULL;
    }
    Py_ssize_t total = 0;
    for (Py_ssize_t c = 0; c < codes.len; c++) {
        Py_ssize_t size = export_column_scratch(((const uint8_t *)codes.buf)[c], n, topic_len);
        if (size < 0 || size > PY_SSIZE_T_MAX / 2 - total) {
            PyBuffer_Release(&codes);
            PyErr_SetString(PyExc_ValueError, "expected a chunk's scratch to fit in a size");
            return NULL;
        }
        total += size;
    }
    PyBuffer_Release(&codes);
    return PyLong_FromSsize_t(total);
}

/* Runs of at least this many rows are written by export_fill; shorter ones by a plain store loop. */
#define EXPORT_FILL_MIN 16

/* ``count`` copies of the ``width`` bytes at ``value``, one after another from ``out``: the first copy,
 * then what is written copied after itself, doubling (log2(count) memcpy calls).  A store a row took
 * ~12 instructions in the loops GCC does not vectorise at -O2 (an unknown trip count), and a memcpy
 * call a row for the topic ~21: over a third of export_chunk's work on a chunk of 100-record batches. */
static void
export_fill(char *out, const void *value, size_t width, size_t count)
{
    size_t total = width * count, filled = width;
    if (total == 0) {
        return;
    }
    memcpy(out, value, width);
    while (filled < total) {
        size_t step = filled < total - filled ? filled : total - filled;
        memcpy(out + filled, out, step);      /* [filled, filled + step) after [0, step): apart */
        filled += step;
    }
}

/* The per-row values of batch-level column ``kind`` into ``out``, batch by batch. */
static void
export_spread(int kind, const BatchRow *batch, Py_ssize_t nb, int64_t n, void *out)
{
    int width = export_width(kind);
    for (Py_ssize_t i = 0; i < nb; i++) {
        const BatchRow *b = &batch[i];
        int64_t lo = b->first_row, hi = i + 1 < nb ? batch[i + 1].first_row : n;
        if (lo < 0) {
            lo = 0;
        }
        if (hi > n) {
            hi = n;
        }
        int64_t v64 = 0;
        int32_t v32 = 0;
        int16_t v16 = 0;
        int8_t v8 = 0;
        int bit = 0;
        switch (kind) {
        case EK_POSITION: v64 = b->position; break;
        case EK_BASE_OFFSET: v64 = b->base_offset; break;
        case EK_PRODUCER_ID: v64 = b->producer_id; break;
        case EK_SIZE: v32 = b->size; break;
        case EK_LEADER_EPOCH: v32 = b->leader_epoch; break;
        case EK_TIMESTAMP_TYPE: v32 = b->magic == 0 ? -1 : (b->attributes & TIMESTAMP_TYPE_FLAG) != 0; break;
        case EK_PRODUCER_EPOCH: v16 = b->producer_epoch; break;
        case EK_MAGIC: v8 = b->magic; break;
        case EK_COMPRESSION: v8 = (int8_t)(b->attributes & CODEC_MASK); break;
        case EK_TRANSACTIONAL: bit = b->magic >= 2 && (b->attributes & EXPORT_ATTR_TRANSACTIONAL); break;
        case EK_CONTROL: bit = b->magic >= 2 && (b->attributes & EXPORT_ATTR_CONTROL); break;
        default: return;
        }
        if (width > 1 && hi - lo >= EXPORT_FILL_MIN) {
            const void *value = width == 8 ? (const void *)&v64 : width == 4 ? (const void *)&v32
                                                                             : (const void *)&v16;
            export_fill((char *)out + lo * width, value, (size_t)width, (size_t)(hi - lo));
            continue;
        }
        /* a plain store loop per width (a short run) */
        switch (width) {
        case 8: {
            int64_t *o = (int64_t *)out;
            for (int64_t r = lo; r < hi; r++) {
                o[r] = v64;
            }
            break;
        }
        case 4: {
            int32_t *o = (int32_t *)out;
            for (int64_t r = lo; r < hi; r++) {
                o[r] = v32;
            }
            break;
        }
        case 2: {
            int16_t *o = (int16_t *)out;
            for (int64_t r = lo; r < hi; r++) {
                o[r] = v16;
            }
            break;
        }
        case 1:
            if (hi > lo) {
                memset((int8_t *)out + lo, v8, (size_t)(hi - lo));
            }
            break;
        default:
            if (bit) {
                uint8_t *o = out;
                for (int64_t r = lo; r < hi; r++) {
                    o[r >> 3] |= (uint8_t)(1u << (r & 7));
                }
            }
        }
    }
}

/* One value of ``width`` bytes (the chunk's partition or segment) for each of ``n`` rows, written
 * into scratch as array ``i``: 0, or -1 where scratch is short. */
static inline int
export_constant(ChunkExport *ex, int i, int64_t n, const void *value, int width, char *scratch,
                Py_ssize_t cap, Py_ssize_t *at)
{
    char *out = export_take(scratch, cap, at, n * width);
    if (out == NULL) {
        return -1;
    }
    export_fill(out, value, (size_t)width, (size_t)n);
    export_fixed(ex, i, n, out);
    return 0;
}

static PyObject *
export_chunk(PyObject *module, PyObject *args)
{
    Py_buffer codes;
    PyObject *counts_obj, *buffers, *scratch_obj;
    const char *topic;
    Py_ssize_t topic_len;
    int partition;
    long long segment;
    if (!PyArg_ParseTuple(args, "y*O!O!Oy#iL", &codes, &PyTuple_Type, &counts_obj, &PyTuple_Type, &buffers,
                          &scratch_obj, &topic, &topic_len, &partition, &segment)) {
        return NULL;
    }
    Py_ssize_t k[10];
    if (PyTuple_GET_SIZE(counts_obj) != 10 || PyTuple_GET_SIZE(buffers) != N_BUFFERS ||
        codes.len < 1 || codes.len > N_KINDS) {
        PyBuffer_Release(&codes);
        PyErr_Format(PyExc_ValueError, "expected 10 counts, %d buffers and 1 to %d columns", N_BUFFERS,
                     N_KINDS);
        return NULL;
    }
    for (int i = 0; i < 10; i++) {
        k[i] = PyLong_AsSsize_t(PyTuple_GET_ITEM(counts_obj, i));
        if (k[i] == -1 && PyErr_Occurred()) {
            PyBuffer_Release(&codes);
            return NULL;
        }
    }
    int64_t n = k[0], nh = k[4];
    Py_ssize_t nb = k[1];
    ChunkExport *ex = PyMem_RawCalloc(1, sizeof(ChunkExport));
    if (ex == NULL) {
        PyBuffer_Release(&codes);
        return PyErr_NoMemory();
    }
    for (int i = 0; i < N_BUFFERS; i++) {
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(buffers, i), &ex->views[i], PyBUF_C_CONTIGUOUS) < 0) {
            goto fail;
        }
        ex->nviews = i + 1;
    }
    if (PyObject_GetBuffer(scratch_obj, &ex->views[N_BUFFERS], PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
        goto fail;
    }
    ex->nviews = N_BUFFERS + 1;
    Py_buffer *v = ex->views;
    /* every count inside its buffer: what Arrow is handed must lie in memory the views hold */
    if (n < 0 || nb < 0 || nh < 0 || n > (PY_SSIZE_T_MAX >> 4) || nh > (PY_SSIZE_T_MAX >> 4) ||
        nb > (PY_SSIZE_T_MAX >> 8) || nb * (Py_ssize_t)sizeof(BatchRow) > v[B_BATCHES].len ||
        n * 8 > v[B_OFFSET].len || n * 8 > v[B_TIMESTAMP].len || n * 4 > v[B_SEQUENCE].len ||
        (n + 1) * 4 > v[B_HEADER_OFFSETS].len) {
        PyErr_SetString(PyExc_ValueError, "expected the chunk's counts within its buffers");
        goto fail;
    }
    const uint8_t *kinds = codes.buf;
    for (Py_ssize_t c = 0; c < codes.len; c++) {
        int kind = kinds[c];
        int bad = kind >= N_KINDS;
        if (kind == EK_KEY) {
            bad |= (n + 1) * 4 > v[B_KEY_OFFSETS].len || k[2] > v[B_KEY_DATA].len ||
                   (k[7] && (n + 7) / 8 > v[B_KEY_VALID].len);
        } else if (kind == EK_VALUE) {
            bad |= (n + 1) * 4 > v[B_VALUE_OFFSETS].len || k[3] > v[B_VALUE_DATA].len ||
                   (k[8] && (n + 7) / 8 > v[B_VALUE_VALID].len);
        } else if (kind == EK_HEADERS) {
            bad |= (nh + 1) * 4 > v[B_HKEY_OFFSETS].len || k[5] > v[B_HKEY_DATA].len ||
                   (nh + 1) * 4 > v[B_HVALUE_OFFSETS].len || k[6] > v[B_HVALUE_DATA].len ||
                   (k[9] && (nh + 7) / 8 > v[B_HVALUE_VALID].len);
        }
        if (bad) {
            PyErr_Format(PyExc_ValueError, "column %zd (kind %d): expected its counts within its buffers",
                         c, kind);
            goto fail;
        }
    }
    const BatchRow *batch = v[B_BATCHES].buf;
    char *scratch = v[N_BUFFERS].buf;
    Py_ssize_t cap = v[N_BUFFERS].len, at = 0;
    int ncols = (int)codes.len;
    struct ArrowArray *parent = export_array(ex, 0, n, 0, 1);
    parent->buffers[0] = NULL;
    parent->n_children = ncols;
    parent->children = ex->children;
    int short_scratch = 0;
    Py_BEGIN_ALLOW_THREADS
    for (int c = 0; c < ncols && !short_scratch; c++) {
        int kind = kinds[c], i = 1 + c;
        ex->children[c] = &ex->arrays[i];
        switch (kind) {
        case EK_KEY:
            export_binary(ex, i, n, k[7], v[B_KEY_VALID].buf, v[B_KEY_OFFSETS].buf, v[B_KEY_DATA].buf);
            break;
        case EK_VALUE:
            export_binary(ex, i, n, k[8], v[B_VALUE_VALID].buf, v[B_VALUE_OFFSETS].buf, v[B_VALUE_DATA].buf);
            break;
        case EK_OFFSET: export_fixed(ex, i, n, v[B_OFFSET].buf); break;
        case EK_TIMESTAMP: export_fixed(ex, i, n, v[B_TIMESTAMP].buf); break;
        case EK_SEQUENCE: export_fixed(ex, i, n, v[B_SEQUENCE].buf); break;
        case EK_TOPIC: {
            int32_t *offsets = (int32_t *)export_take(scratch, cap, &at, (n + 1) * 4);
            char *data = export_take(scratch, cap, &at, n * topic_len);
            if (offsets == NULL || data == NULL || n * topic_len > INT32_MAX) {
                short_scratch = 1;
                break;
            }
            for (int64_t r = 0; r <= n; r++) {
                offsets[r] = (int32_t)(r * topic_len);
            }
            export_fill(data, topic, (size_t)topic_len, (size_t)n);
            export_binary(ex, i, n, 0, NULL, offsets, data);
            break;
        }
        case EK_PARTITION:
            short_scratch = export_constant(ex, i, n, &partition, 4, scratch, cap, &at) < 0;
            break;
        case EK_SEGMENT: {
            int64_t segment64 = segment;
            short_scratch = export_constant(ex, i, n, &segment64, 8, scratch, cap, &at) < 0;
            break;
        }
        case EK_HEADERS: {
            /* list<struct<key: string, value: binary>>: the struct and its two children after the
             * columns (one headers column at most: the codes are distinct) */
            int s = 1 + ncols;
            struct ArrowArray *list = export_array(ex, i, n, 0, 2);
            list->buffers[0] = NULL;
            list->buffers[1] = v[B_HEADER_OFFSETS].buf;
            list->n_children = 1;
            struct ArrowArray *pairs = export_array(ex, s, nh, 0, 1);
            pairs->buffers[0] = NULL;
            export_binary(ex, s + 1, nh, 0, NULL, v[B_HKEY_OFFSETS].buf, v[B_HKEY_DATA].buf);
            export_binary(ex, s + 2, nh, k[9], v[B_HVALUE_VALID].buf, v[B_HVALUE_OFFSETS].buf,
                          v[B_HVALUE_DATA].buf);
            ex->children[s] = pairs;
            ex->children[s + 1] = &ex->arrays[s + 1];
            ex->children[s + 2] = &ex->arrays[s + 2];
            list->children = &ex->children[s];
            pairs->n_children = 2;
            pairs->children = &ex->children[s + 1];
            break;
        }
        default: {      /* a batch-level column, written out per row */
            int width = export_width(kind);
            Py_ssize_t size = width > 0 ? n * width : (n + 7) / 8;
            char *out = export_take(scratch, cap, &at, size);
            if (out == NULL) {
                short_scratch = 1;
                break;
            }
            if (width < 0) {
                memset(out, 0, (size_t)size);
            }
            export_spread(kind, batch, nb, n, out);
            export_fixed(ex, i, n, out);
        }
        }
    }
    Py_END_ALLOW_THREADS
    if (short_scratch) {
        PyErr_SetString(PyExc_ValueError, "expected scratch room for the chunk's written-out columns");
        goto fail;
    }
    /* the struct handed out lives apart from ex: the importer moves it (copies it and marks this
     * one released) and may release its copy, freeing ex, before the caller frees this one */
    struct ArrowArray *out = PyMem_RawMalloc(sizeof(struct ArrowArray));
    if (out == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    *out = *parent;
    out->release = export_release;
    out->private_data = ex;
    PyBuffer_Release(&codes);
    return PyLong_FromVoidPtr(out);
fail:
    for (int i = 0; i < ex->nviews; i++) {
        PyBuffer_Release(&ex->views[i]);
    }
    PyMem_RawFree(ex);
    PyBuffer_Release(&codes);
    return NULL;
}

/* release_export(address): free the struct export_chunk returned, once the importer moved it (or
 * release it first where it did not): call it exactly once per export_chunk. */
static PyObject *
release_export(PyObject *module, PyObject *address)
{
    struct ArrowArray *array = PyLong_AsVoidPtr(address);
    if (array == NULL && PyErr_Occurred()) {
        return NULL;
    }
    if (array != NULL) {
        if (array->release != NULL) {
            array->release(array);
        }
        PyMem_RawFree(array);
    }
    Py_RETURN_NONE;
}
