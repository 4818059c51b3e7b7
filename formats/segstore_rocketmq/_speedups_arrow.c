/*
 * segstore_rocketmq._speedups: a batch's columns handed to Arrow in one call, export_arrays
 * (columnar.build_batch).
 *
 * Included by _speedups.c (one translation unit).
 *
 * columnar._build_c lays a batch's columns out over buffers its C calls filled (the decoded rows'
 * blocks, the property columns, the gathered bodies, the host texts); wrapping them took a pyarrow
 * call a column (Array.from_buffers, ListArray/MapArray/StructArray.from_arrays,
 * RecordBatch.from_arrays: ~30 calls, about 0.5 ms of Python a batch of 16k rows, under the GIL,
 * which several scan threads take in turn).  export_arrays takes the same layout as one nested
 * tuple and hands it over through the Arrow C data interface (arrow/c/abi.h); pyarrow imports it
 * (RecordBatch._import_from_c) in one call.  The buffers are shared, not copied: the export holds
 * a view of each until Arrow releases the batch.
 *
 * export_arrays(spec) -> int
 *     spec: (kind, length, null_count, buffers, children), kind one byte:
 *       b"f" + width (b"f\x08"): fixed width, buffers (validity or None, values);
 *       b"s": binary or string, buffers (validity or None, int32 offsets, data);
 *       b"l": list or map, buffers (validity or None, int32 offsets), one child;
 *       b"t": struct, buffers (validity or None,), its children.
 *     A validity buffer is read only where null_count is not 0.  Each buffer must hold what its
 *     length says (values of length * width bytes, length + 1 offsets, data up to the last offset,
 *     a list's child as long as its last offset, a struct's children as long as it): checked, so
 *     that Arrow is never handed memory the views do not hold.  Returns the address of a struct
 *     ArrowArray, which the caller imports (the import moves it) and then frees with
 *     release_arrays, which also releases it where no import took it.
 */

/* Nesting deeper than this is refused (the schemas here nest three deep). */
#define EXPORT_DEPTH 8

typedef struct {
    Py_ssize_t nodes, buffers;      /* counted, then filled */
    struct ArrowArray *arrays;      /* one per node, in preorder */
    struct ArrowArray **children;   /* each node's children pointers, in preorder */
    const void **pointers;          /* each node's buffer pointers */
    Py_buffer *views;               /* the buffers' views, held until released */
    Py_ssize_t nviews;
} RowsExport;

static void
rows_export_free(RowsExport *ex)
{
    if (ex == NULL) {
        return;
    }
    for (Py_ssize_t i = 0; i < ex->nviews; i++) {
        PyBuffer_Release(&ex->views[i]);
    }
    PyMem_RawFree(ex->arrays);
    PyMem_RawFree(ex->children);
    PyMem_RawFree(ex->pointers);
    PyMem_RawFree(ex->views);
    PyMem_RawFree(ex);
}

static void
rows_export_release(struct ArrowArray *array)
{
    RowsExport *ex = array->private_data;
    if (ex != NULL && Py_IsInitialized()) {
        /* Arrow may drop the batch on any thread: releasing the views needs the GIL */
        PyGILState_STATE state = PyGILState_Ensure();
        rows_export_free(ex);
        PyGILState_Release(state);
    }
    array->release = NULL;
    array->private_data = NULL;
}

/* The parts of ``spec``: 0 with ValueError where it is not a (kind, length, nulls, buffers, children)
 * tuple of a known kind. */
static int
spec_parts(PyObject *spec, const char **kind, Py_ssize_t *kind_len, long long *length, long long *nulls,
           PyObject **buffers, PyObject **children)
{
    if (!PyTuple_Check(spec) || PyTuple_GET_SIZE(spec) != 5 ||
        !PyArg_ParseTuple(spec, "y#LLO!O!", kind, kind_len, length, nulls, &PyTuple_Type, buffers,
                          &PyTuple_Type, children)) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_ValueError, "expected (kind, length, null_count, buffers, children)");
        }
        return 0;
    }
    char k = *kind_len >= 1 ? (*kind)[0] : 0;
    Py_ssize_t want_buffers = k == 'f' ? 2 : k == 's' ? 3 : k == 'l' ? 2 : k == 't' ? 1 : -1;
    Py_ssize_t kids = PyTuple_GET_SIZE(*children);
    int ok = want_buffers > 0 && PyTuple_GET_SIZE(*buffers) == want_buffers && *length >= 0 &&
             *length <= INT32_MAX && *nulls >= 0 && *nulls <= *length &&
             (k == 'f' ? *kind_len == 2 && kids == 0 : *kind_len == 1) &&
             (k == 's' ? kids == 0 : k == 'l' ? kids == 1 : 1);
    if (!ok) {
        PyErr_Format(PyExc_ValueError, "expected a spec of a known kind, its buffers and children, found kind "
                     "%R, %zd buffers, %zd children, length %lld, %lld nulls",
                     PyTuple_GET_ITEM(spec, 0), PyTuple_GET_SIZE(*buffers), kids, *length, *nulls);
        return 0;
    }
    return 1;
}

/* Count the nodes and buffers of ``spec`` (checked as spec_parts checks). */
static int
spec_count(PyObject *spec, int depth, Py_ssize_t *nodes, Py_ssize_t *buffers)
{
    const char *kind;
    Py_ssize_t kind_len;
    long long length, nulls;
    PyObject *bufs, *kids;
    if (depth > EXPORT_DEPTH) {
        PyErr_SetString(PyExc_ValueError, "expected arrays nested at most 8 deep");
        return 0;
    }
    if (!spec_parts(spec, &kind, &kind_len, &length, &nulls, &bufs, &kids)) {
        return 0;
    }
    *nodes += 1;
    *buffers += PyTuple_GET_SIZE(bufs);
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(kids); i++) {
        if (!spec_count(PyTuple_GET_ITEM(kids, i), depth + 1, nodes, buffers)) {
            return 0;
        }
    }
    return 1;
}

/* A view of buffer object ``obj`` (None: NULL, and ``need`` must be 0) holding at least ``need``
 * bytes: its pointer, or NULL with ValueError set where it holds fewer (*fail). */
static const void *
spec_buffer(RowsExport *ex, PyObject *obj, Py_ssize_t need, int *fail)
{
    if (obj == Py_None) {
        if (need > 0) {
            PyErr_SetString(PyExc_ValueError, "expected a buffer, found None");
            *fail = 1;
        }
        return NULL;
    }
    Py_buffer *view = &ex->views[ex->nviews];
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS) < 0) {
        *fail = 1;
        return NULL;
    }
    ex->nviews++;
    if (view->len < need) {
        PyErr_Format(PyExc_ValueError, "expected a buffer of at least %zd bytes, found %zd", need, view->len);
        *fail = 1;
        return NULL;
    }
    return view->buf;
}

/* Fill node ``*at`` (and, after it, its children) from ``spec``; the node's length, for its
 * parent's checks, or -1 with an exception set. */
static long long
spec_fill(RowsExport *ex, PyObject *spec, Py_ssize_t *at, Py_ssize_t *kid_at, Py_ssize_t *buf_at)
{
    const char *kind;
    Py_ssize_t kind_len;
    long long n, nulls;
    PyObject *bufs, *kids;
    if (!spec_parts(spec, &kind, &kind_len, &n, &nulls, &bufs, &kids)) {
        return -1;
    }
    struct ArrowArray *a = &ex->arrays[(*at)++];
    Py_ssize_t nb = PyTuple_GET_SIZE(bufs), nk = PyTuple_GET_SIZE(kids);
    a->length = n;
    a->null_count = nulls;
    a->offset = 0;
    a->n_buffers = nb;
    a->n_children = nk;
    a->buffers = &ex->pointers[*buf_at];
    a->children = nk ? &ex->children[*kid_at] : NULL;
    a->dictionary = NULL;
    a->release = arrow_release_child;
    a->private_data = NULL;
    *buf_at += nb;
    *kid_at += nk;
    int fail = 0;
    a->buffers[0] = spec_buffer(ex, nulls ? PyTuple_GET_ITEM(bufs, 0) : Py_None, nulls ? (n + 7) / 8 : 0, &fail);
    int32_t last = 0;
    if (!fail && (kind[0] == 's' || kind[0] == 'l')) {
        const int32_t *offsets = spec_buffer(ex, PyTuple_GET_ITEM(bufs, 1), (Py_ssize_t)(n + 1) * 4, &fail);
        a->buffers[1] = offsets;
        if (!fail) {
            last = offsets[n];
            if (offsets[0] != 0 || last < 0) {
                PyErr_SetString(PyExc_ValueError, "expected offsets from 0 up");
                fail = 1;
            }
        }
    }
    if (fail) {
        return -1;
    }
    switch (kind[0]) {
    case 'f':
        a->buffers[1] = spec_buffer(ex, PyTuple_GET_ITEM(bufs, 1), (Py_ssize_t)n * (uint8_t)kind[1], &fail);
        break;
    case 's':
        a->buffers[2] = spec_buffer(ex, PyTuple_GET_ITEM(bufs, 2), last, &fail);
        break;
    default:
        break;
    }
    if (fail) {
        return -1;
    }
    for (Py_ssize_t i = 0; i < nk; i++) {
        a->children[i] = &ex->arrays[*at];
        long long length = spec_fill(ex, PyTuple_GET_ITEM(kids, i), at, kid_at, buf_at);
        if (length < 0) {
            return -1;
        }
        if (kind[0] == 'l' ? length < last : length < n) {
            PyErr_Format(PyExc_ValueError, "expected a child of at least %lld values, found %lld",
                         kind[0] == 'l' ? (long long)last : n, length);
            return -1;
        }
    }
    return n;
}

static PyObject *
export_arrays(PyObject *module, PyObject *spec)
{
    Py_ssize_t nodes = 0, buffers = 0;
    if (!spec_count(spec, 0, &nodes, &buffers)) {
        return NULL;
    }
    RowsExport *ex = PyMem_RawCalloc(1, sizeof(RowsExport));
    if (ex == NULL) {
        return PyErr_NoMemory();
    }
    ex->nodes = nodes;
    ex->buffers = buffers;
    ex->arrays = PyMem_RawCalloc((size_t)nodes, sizeof(struct ArrowArray));
    ex->children = PyMem_RawCalloc((size_t)nodes, sizeof(struct ArrowArray *));
    ex->pointers = PyMem_RawCalloc((size_t)buffers, sizeof(void *));
    ex->views = PyMem_RawCalloc((size_t)buffers, sizeof(Py_buffer));
    if (ex->arrays == NULL || ex->children == NULL || ex->pointers == NULL || ex->views == NULL) {
        rows_export_free(ex);
        return PyErr_NoMemory();
    }
    Py_ssize_t at = 0, kid_at = 0, buf_at = 0;
    if (spec_fill(ex, spec, &at, &kid_at, &buf_at) < 0) {
        rows_export_free(ex);
        return NULL;
    }
    /* the struct handed out lives apart from ex: the importer moves it (copies it and marks this one
     * released) and may release its copy, freeing ex, before the caller frees this one */
    struct ArrowArray *out = PyMem_RawMalloc(sizeof(struct ArrowArray));
    if (out == NULL) {
        rows_export_free(ex);
        return PyErr_NoMemory();
    }
    *out = ex->arrays[0];
    out->release = rows_export_release;
    out->private_data = ex;
    return PyLong_FromVoidPtr(out);
}

/* release_arrays(address): free the struct export_arrays returned, once the importer moved it (or
 * release it first where it did not): call it exactly once per export_arrays. */
static PyObject *
release_arrays(PyObject *module, PyObject *address)
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
