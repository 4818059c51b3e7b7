/* Part of _speedups.c (included there): the batch-level columns of a chunk written out once per
 * row, as columnar.to_arrow's np.repeat does, with the GIL released.
 *
 * np.repeat holds the GIL, and a chunk's eleven per-row batch columns were about half of
 * scan_arrow's work: on several threads that half ran one thread at a time. */

/* count[i] copies of the value at src, of type T, at dst (advanced past them) */
#define SPREAD(T) do {                                      \
        T v_;                                               \
        memcpy(&v_, src, sizeof(T));                        \
        for (int64_t r_ = 0; r_ < count[i]; r_++) {         \
            memcpy(dst, &v_, sizeof(T));                    \
            dst += sizeof(T);                               \
        }                                                   \
    } while (0)

typedef struct {
    Py_buffer src, dst;
    Py_ssize_t itemsize;
} Spread;

static PyObject *
spread_runs(PyObject *module, PyObject *args)
{
    Py_buffer counts;
    PyObject *columns;
    if (!PyArg_ParseTuple(args, "y*O!", &counts, &PyTuple_Type, &columns)) {
        return NULL;
    }
    Py_ssize_t runs = counts.len / (Py_ssize_t)sizeof(int64_t), ncols = PyTuple_GET_SIZE(columns);
    Spread *spreads = PyMem_Calloc(ncols ? ncols : 1, sizeof(Spread));
    if (spreads == NULL) {
        PyBuffer_Release(&counts);
        return PyErr_NoMemory();
    }
    int64_t rows = 0;
    const int64_t *count = (const int64_t *)counts.buf;
    Py_ssize_t got = 0;
    for (Py_ssize_t i = 0; i < runs; i++) {
        if (count[i] < 0 || count[i] > PY_SSIZE_T_MAX - rows) {
            PyErr_Format(PyExc_ValueError, "expected run lengths of at least 0, found %lld",
                         (long long)count[i]);
            goto fail;
        }
        rows += count[i];
    }
    for (; got < ncols; got++) {
        Spread *s = &spreads[got];
        PyObject *item = PyTuple_GET_ITEM(columns, got);
        if (!PyArg_ParseTuple(item, "y*w*n", &s->src, &s->dst, &s->itemsize)) {
            goto fail;
        }
        if (s->itemsize < 1 || s->src.len != runs * s->itemsize || s->dst.len < rows * s->itemsize) {
            PyErr_Format(PyExc_ValueError, "column %zd: expected %zd source and %lld target items "
                         "of %zd bytes", got, runs, (long long)rows, s->itemsize);
            got++;
            goto fail;
        }
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t c = 0; c < ncols; c++) {
        const Spread *s = &spreads[c];
        const char *src = (const char *)s->src.buf;
        char *dst = (char *)s->dst.buf;
        Py_ssize_t size = s->itemsize;
        for (Py_ssize_t i = 0; i < runs; i++, src += size) {
            switch (size) {     /* the usual widths as plain stores the compiler can unroll */
            case 1:
                memset(dst, *src, (size_t)count[i]);
                dst += count[i];
                break;
            case 2: SPREAD(int16_t); break;
            case 4: SPREAD(int32_t); break;
            case 8: SPREAD(int64_t); break;
            default:
                for (int64_t r = 0; r < count[i]; r++, dst += size) {
                    memcpy(dst, src, (size_t)size);
                }
            }
        }
    }
    Py_END_ALLOW_THREADS
    for (Py_ssize_t c = 0; c < ncols; c++) {
        PyBuffer_Release(&spreads[c].src);
        PyBuffer_Release(&spreads[c].dst);
    }
    PyMem_Free(spreads);
    PyBuffer_Release(&counts);
    Py_RETURN_NONE;
fail:
    /* the items parsed whole hold both buffers; the one that failed its check too */
    for (Py_ssize_t c = 0; c < got; c++) {
        PyBuffer_Release(&spreads[c].src);
        PyBuffer_Release(&spreads[c].dst);
    }
    PyMem_Free(spreads);
    PyBuffer_Release(&counts);
    return NULL;
}
