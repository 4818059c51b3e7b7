/*
 * segstore_kafka._speedups: the record lines of the text dump (columnar.text_lines).
 *
 * Included by _speedups.c after json_lines (one translation unit): Cols, get_cols, put,
 * within are its (put_decimal is speedups_common.h's).  The pure-Python reference is KafkaStore.dump (store.py: batch_line, record_line).
 */

static const char T_OFFSET[] = "| offset: ", T_KEY[] = " keySize: ", T_VALUE[] = " valueSize: ",
                  T_SEQUENCE[] = " sequence: ", T_HEADERS[] = " headerKeys: [";

/*
 * text_lines(heads, timestamp_types, tails, buffers, n_rows, n_batches, start) -> bytes
 *
 * The kafka-dump-log (3.8 DumpLogSegments.dumpLog) lines of the decoded batches in buffers: batch b's
 * head (its batch line and a newline, or None to leave the batch and its records out), then one
 * line per record of it whose offset is at least start, as record_line writes it:
 *
 *     | offset: O T: S keySize: K valueSize: V sequence: Q headerKeys: [h1,h2]TAIL
 *
 * (T the batch's timestamp type, K and V -1 for null, Q the record's producer sequence as decoded,
 * -1 without one, TAIL its tail: a control record's text or empty) and a newline.  Rows are in
 * batch order (row_batch).
 */
static PyObject *
text_lines(PyObject *module, PyObject *args)
{
    PyObject *heads, *types, *tails, *buffers;
    Py_ssize_t n_rows, n_batches;
    long long first;
    if (!PyArg_ParseTuple(args, "O!O!O!OnnL", &PyList_Type, &heads, &PyList_Type, &types, &PyList_Type, &tails,
                          &buffers, &n_rows, &n_batches, &first)) {
        return NULL;
    }
    Cols c;
    memset(&c, 0, sizeof(c));
    c.want = WANT_KEY | WANT_VALUE | WANT_HEADERS;
    PyObject *result = NULL;
    if (get_cols(buffers, &c, 0) < 0) {
        return NULL;
    }
    if (n_rows < 0 || n_rows > c.cap.rows || n_batches < 0 || n_batches > c.cap.batches ||
        PyList_GET_SIZE(heads) < n_batches || PyList_GET_SIZE(types) < n_batches ||
        PyList_GET_SIZE(tails) < n_batches) {
        PyErr_SetString(PyExc_ValueError, "row and batch counts within the buffers and the per-batch lists");
        goto done;
    }
    Py_ssize_t bound = 0;
    for (Py_ssize_t b = 0; b < n_batches; b++) {
        PyObject *head = PyList_GET_ITEM(heads, b);
        if ((head != Py_None && !PyBytes_Check(head)) || !PyBytes_Check(PyList_GET_ITEM(types, b)) ||
            !PyBytes_Check(PyList_GET_ITEM(tails, b))) {
            PyErr_SetString(PyExc_TypeError, "heads (or None), timestamp types and tails as bytes");
            goto done;
        }
        bound += head == Py_None ? 0 : PyBytes_GET_SIZE(head);
    }
    Py_ssize_t n_headers = n_rows ? c.header_off[n_rows] : 0;
    if (n_headers > c.cap.headers) {
        PyErr_SetString(PyExc_ValueError, "header counts within the buffers");
        goto done;
    }
    /* First pass: check every slice and bound the output, so the second writes without checks. */
    for (Py_ssize_t r = 0; r < n_rows; r++) {
        int32_t b = c.row_batch[r];
        if (b < 0 || b >= n_batches || (r && b < c.row_batch[r - 1]) || !within(c.key_off, r, c.cap.key) ||
            !within(c.value_off, r, c.cap.value) || !within(c.header_off, r, n_headers)) {
            PyErr_SetString(PyExc_ValueError, "row batches in order and offsets within the buffers");
            goto done;
        }
        bound += 5 * DECIMAL_BOUND + sizeof(T_OFFSET) + sizeof(T_KEY) + sizeof(T_VALUE) + sizeof(T_SEQUENCE) +
                 sizeof(T_HEADERS) + 8 +
                 PyBytes_GET_SIZE(PyList_GET_ITEM(types, b)) + PyBytes_GET_SIZE(PyList_GET_ITEM(tails, b));
        for (int32_t h = c.header_off[r]; h < c.header_off[r + 1]; h++) {
            if (!within(c.hkey_off, h, c.cap.hkey)) {
                PyErr_SetString(PyExc_ValueError, "header offsets within the buffers");
                goto done;
            }
            bound += 1 + (Py_ssize_t)(c.hkey_off[h + 1] - c.hkey_off[h]);
        }
    }
    result = PyBytes_FromStringAndSize(NULL, bound);
    if (result == NULL) {
        goto done;
    }
    uint8_t *start = (uint8_t *)PyBytes_AS_STRING(result);
    uint8_t *w = start;
    Py_ssize_t r = 0;
    for (Py_ssize_t b = 0; b < n_batches; b++) {
        PyObject *head = PyList_GET_ITEM(heads, b);
        Py_ssize_t end = r;
        while (end < n_rows && c.row_batch[end] == b) {
            end++;
        }
        if (head == Py_None) {
            r = end;
            continue;
        }
        w = put(w, PyBytes_AS_STRING(head), PyBytes_GET_SIZE(head));
        PyObject *type = PyList_GET_ITEM(types, b), *tail = PyList_GET_ITEM(tails, b);
        for (; r < end; r++) {
            if (c.offset[r] < first) {
                continue;
            }
            w = PUT_LITERAL(w, T_OFFSET);
            w = put_decimal(w, c.offset[r]);
            *w++ = ' ';
            w = put(w, PyBytes_AS_STRING(type), PyBytes_GET_SIZE(type));
            w = PUT_LITERAL(w, ": ");
            w = put_decimal(w, c.timestamp[r]);
            w = PUT_LITERAL(w, T_KEY);
            w = put_decimal(w, bit(c.key_valid, r) ? c.key_off[r + 1] - c.key_off[r] : -1);
            w = PUT_LITERAL(w, T_VALUE);
            w = put_decimal(w, bit(c.value_valid, r) ? c.value_off[r + 1] - c.value_off[r] : -1);
            w = PUT_LITERAL(w, T_SEQUENCE);
            w = put_decimal(w, c.sequence[r]);
            w = PUT_LITERAL(w, T_HEADERS);
            for (int32_t h = c.header_off[r]; h < c.header_off[r + 1]; h++) {
                if (h > c.header_off[r]) {
                    *w++ = ',';
                }
                w = put(w, c.hkey_data + c.hkey_off[h], c.hkey_off[h + 1] - c.hkey_off[h]);
            }
            *w++ = ']';
            w = put(w, PyBytes_AS_STRING(tail), PyBytes_GET_SIZE(tail));
            *w++ = '\n';
        }
    }
    _PyBytes_Resize(&result, w - start); /* on failure it clears result and sets the error */
done:
    release_cols(&c);
    return result;
}
