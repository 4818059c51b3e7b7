/*
 * segstore_rocketmq._speedups: a conversion's columns back into messages: header lists, first
 * headers, restored and native properties (arrowwrite.py, conversion.py).
 *
 * Included by _speedups.c (one translation unit): the layouts, constants and helpers defined
 * there, and in the files included before this one, are this file's.
 */

/*
 * header_lists(n, slots, props) -> (list_offsets, key_offsets, keys, value_offsets, values)
 *
 * The list<struct<key, value>> column of n rows whose row i holds, in order, one item per slot s
 * whose mask takes row i (mask None: every row) -- key the slot's name, value its row i -- then
 * row i's properties, each keyed prefix + name.  A slot is (name, kind, a, b, mask):
 *   kind 0: a is n int64, the value their decimal text;
 *   kind 1: a is n + 1 int32 offsets into the bytes b (an Arrow string/binary array's buffers);
 *   kind 2: a is the one value of every row (bytes).
 * props is (prefix, rows, name_offsets, names, value_offsets, values): rows n + 1 int64 item
 * offsets (row i holds items rows[i] to rows[i + 1]), the others Arrow buffers as for kind 1.
 * Returns the five buffers of the result (int32 offsets), as bytes.  Every offset is checked
 * against its buffer.  The fills run without the GIL.
 */
#define MAX_HEADER_SLOTS 32
typedef struct {
    Py_buffer name, a, b, mask;
    int kind, has_b, has_mask;
} HeaderSlot;

/* "00" to "99": two digits of a decimal text at a time. */
static const char DIGIT_PAIRS[] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

static const uint64_t POWERS_OF_TEN[20] = {
    1ull, 10ull, 100ull, 1000ull, 10000ull, 100000ull, 1000000ull, 10000000ull, 100000000ull,
    1000000000ull, 10000000000ull, 100000000000ull, 1000000000000ull, 10000000000000ull,
    100000000000000ull, 1000000000000000ull, 10000000000000000ull, 100000000000000000ull,
    1000000000000000000ull, 10000000000000000000ull,
};

/* The length of str(v): its digits from its bit length (bits * log10(2), then one comparison). */
static inline int
decimal_length(int64_t v)
{
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    if (u == 0) {
        return 1;
    }
    int t = ((64 - __builtin_clzll(u)) * 1233) >> 12;
    return t + (u >= POWERS_OF_TEN[t]) + (v < 0);
}

/* str(v) written at out (decimal_length(v) bytes), two digits at a time from the end. */
static inline int
decimal_text(int64_t v, char *out)
{
    int len = decimal_length(v);
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    char *p = out + len;
    while (u >= 100) {
        unsigned pair = (unsigned)(u % 100);
        u /= 100;
        p -= 2;
        memcpy(p, DIGIT_PAIRS + 2 * pair, 2);
    }
    if (u >= 10) {
        p -= 2;
        memcpy(p, DIGIT_PAIRS + 2 * u, 2);
    } else {
        *--p = (char)('0' + u);
    }
    if (v < 0) {
        out[0] = '-';
    }
    return len;
}

static int
span_ok(const int32_t *off, Py_ssize_t count, Py_ssize_t data_len)
{
    for (Py_ssize_t i = 0; i < count; i++) {
        if (off[i] < 0 || off[i + 1] < off[i] || off[i + 1] > data_len) {
            return 0;
        }
    }
    return 1;
}

static PyObject *
header_lists(PyObject *module, PyObject *args)
{
    Py_ssize_t n;
    PyObject *slots, *props;
    if (!PyArg_ParseTuple(args, "nO!O!", &n, &PyTuple_Type, &slots, &PyTuple_Type, &props)) {
        return NULL;
    }
    HeaderSlot h[MAX_HEADER_SLOTS];
    Py_ssize_t count = 0, want = PyTuple_GET_SIZE(slots);
    Py_buffer prefix, rows, name_off, names, value_off, values;
    int have_props = 0, ok = n >= 0 && want <= MAX_HEADER_SLOTS;
    PyObject *out[5] = {NULL, NULL, NULL, NULL, NULL}, *ret = NULL;
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "expected n >= 0 and at most 32 slots");
        return NULL;
    }
    if (!PyArg_ParseTuple(props, "y*y*y*y*y*y*", &prefix, &rows, &name_off, &names, &value_off, &values)) {
        return NULL;
    }
    have_props = 1;
    for (; ok && count < want; count++) {
        PyObject *spec = PyTuple_GET_ITEM(slots, count), *b, *mask;
        HeaderSlot *s = &h[count];
        if (!PyTuple_Check(spec) || !PyArg_ParseTuple(spec, "y*iy*OO", &s->name, &s->kind, &s->a, &b, &mask)) {
            ok = 0;
            break;
        }
        s->has_b = b != Py_None && PyObject_GetBuffer(b, &s->b, PyBUF_SIMPLE) == 0;
        s->has_mask = mask != Py_None && PyObject_GetBuffer(mask, &s->mask, PyBUF_SIMPLE) == 0;
        if (PyErr_Occurred() || (s->has_mask && s->mask.len != n) ||
            (s->kind == 0 && s->a.len != n * 8) ||
            (s->kind == 1 && (!s->has_b || s->a.len != (n + 1) * 4 || !span_ok(s->a.buf, n, s->b.len))) ||
            s->kind < 0 || s->kind > 2) {
            count++;
            ok = 0;
            break;
        }
    }
    const int64_t *row_items = rows.buf;
    Py_ssize_t m = 0;
    if (ok) {
        ok = rows.len == (n + 1) * 8 && row_items[0] >= 0;
        for (Py_ssize_t i = 0; ok && i < n; i++) {
            ok = row_items[i + 1] >= row_items[i];
        }
        m = ok ? row_items[n] : 0;
        ok = ok && name_off.len >= (m + 1) * 4 && value_off.len >= (m + 1) * 4 &&
             span_ok(name_off.buf, m, names.len) && span_ok(value_off.buf, m, values.len);
    }
    /* sizes: items, key bytes, value bytes */
    int64_t items = 0, key_bytes = 0, value_bytes = 0;
    if (ok) {
        for (Py_ssize_t k = 0; k < count; k++) {
            HeaderSlot *s = &h[k];
            const uint8_t *mk = s->has_mask ? s->mask.buf : NULL;
            int64_t rows_with = 0, bytes = 0;
            for (Py_ssize_t i = 0; i < n; i++) {
                if (mk && !mk[i]) {
                    continue;
                }
                rows_with++;
                if (s->kind == 0) {
                    bytes += decimal_length(((const int64_t *)s->a.buf)[i]);
                } else if (s->kind == 1) {
                    const int32_t *o = s->a.buf;
                    bytes += o[i + 1] - o[i];
                } else {
                    bytes += s->a.len;
                }
            }
            items += rows_with;
            key_bytes += rows_with * s->name.len;
            value_bytes += bytes;
        }
        const int32_t *no = name_off.buf, *vo = value_off.buf;
        int64_t i0 = row_items[0];
        items += m - i0;
        key_bytes += (int64_t)(m - i0) * prefix.len + (no[m] - no[i0]);
        value_bytes += vo[m] - vo[i0];
        if (items > INT32_MAX || key_bytes > INT32_MAX || value_bytes > INT32_MAX) {
            PyErr_SetString(PyExc_OverflowError, "expected header columns under 2 GiB");
            ok = 0;
        }
    } else if (!PyErr_Occurred()) {
        PyErr_SetString(PyExc_ValueError, "expected slots of n rows and offsets inside their buffers");
    }
    if (ok) {
        out[0] = PyBytes_FromStringAndSize(NULL, (n + 1) * 4);
        out[1] = PyBytes_FromStringAndSize(NULL, (items + 1) * 4);
        out[2] = PyBytes_FromStringAndSize(NULL, key_bytes);
        out[3] = PyBytes_FromStringAndSize(NULL, (items + 1) * 4);
        out[4] = PyBytes_FromStringAndSize(NULL, value_bytes);
        ok = out[0] && out[1] && out[2] && out[3] && out[4];
    }
    if (ok) {
        int32_t *lo = (int32_t *)PyBytes_AS_STRING(out[0]);
        int32_t *ko = (int32_t *)PyBytes_AS_STRING(out[1]);
        uint8_t *kd = (uint8_t *)PyBytes_AS_STRING(out[2]);
        int32_t *vo_out = (int32_t *)PyBytes_AS_STRING(out[3]);
        uint8_t *vd = (uint8_t *)PyBytes_AS_STRING(out[4]);
        const int32_t *no = name_off.buf, *vo = value_off.buf;
        const uint8_t *nd = names.buf, *vdata = values.buf;
        Py_BEGIN_ALLOW_THREADS
        int32_t item = 0, kat = 0, vat = 0;
        lo[0] = 0;
        ko[0] = 0;
        vo_out[0] = 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            for (Py_ssize_t k = 0; k < count; k++) {
                HeaderSlot *s = &h[k];
                if (s->has_mask && !((const uint8_t *)s->mask.buf)[i]) {
                    continue;
                }
                copy_short(kd + kat, s->name.buf, (size_t)s->name.len);
                kat += (int32_t)s->name.len;
                if (s->kind == 0) {
                    vat += decimal_text(((const int64_t *)s->a.buf)[i], (char *)vd + vat);
                } else if (s->kind == 1) {
                    const int32_t *o = s->a.buf;
                    int32_t len = o[i + 1] - o[i];
                    copy_short(vd + vat, (const uint8_t *)s->b.buf + o[i], (size_t)len);
                    vat += len;
                } else {
                    copy_short(vd + vat, s->a.buf, (size_t)s->a.len);
                    vat += (int32_t)s->a.len;
                }
                item++;
                ko[item] = kat;
                vo_out[item] = vat;
            }
            for (int64_t j = row_items[i]; j < row_items[i + 1]; j++) {
                copy_short(kd + kat, prefix.buf, (size_t)prefix.len);
                kat += (int32_t)prefix.len;
                copy_short(kd + kat, nd + no[j], (size_t)(no[j + 1] - no[j]));
                kat += no[j + 1] - no[j];
                copy_short(vd + vat, vdata + vo[j], (size_t)(vo[j + 1] - vo[j]));
                vat += vo[j + 1] - vo[j];
                item++;
                ko[item] = kat;
                vo_out[item] = vat;
            }
            lo[i + 1] = item;
        }
        Py_END_ALLOW_THREADS
        ret = PyTuple_Pack(5, out[0], out[1], out[2], out[3], out[4]);
    }
    for (int k = 0; k < 5; k++) {
        Py_XDECREF(out[k]);
    }
    for (Py_ssize_t k = 0; k < count; k++) {
        PyBuffer_Release(&h[k].name);
        PyBuffer_Release(&h[k].a);
        if (h[k].has_b) {
            PyBuffer_Release(&h[k].b);
        }
        if (h[k].has_mask) {
            PyBuffer_Release(&h[k].mask);
        }
    }
    if (have_props) {
        PyBuffer_Release(&prefix);
        PyBuffer_Release(&rows);
        PyBuffer_Release(&name_off);
        PyBuffer_Release(&names);
        PyBuffer_Release(&value_off);
        PyBuffer_Release(&values);
    }
    return ret;
}

/* The count bytes objects of the tuple names, each as a pointer and a length; 0 if names is not that. */
static int
texts_of(PyObject *names, Py_ssize_t count, const uint8_t **text, Py_ssize_t *len)
{
    if (PyTuple_GET_SIZE(names) != count) {
        return 0;
    }
    for (Py_ssize_t f = 0; f < count; f++) {
        PyObject *item = PyTuple_GET_ITEM(names, f);
        if (!PyBytes_Check(item)) {
            return 0;
        }
        text[f] = (const uint8_t *)PyBytes_AS_STRING(item);
        len[f] = PyBytes_GET_SIZE(item);
    }
    return 1;
}

/*
 * The rmq.* headers restore_headers reads, in the order of its names tuple: decimal ints (the first
 * RH_INTS; flag, sysFlag and reconsumeTimes within int32), the two IPv4 hosts, rmq.magic (v2: the
 * reference path), rmq.trailing_separator, and the reserved topic's rmq.topic and rmq.queue_id.
 */
enum {
    RH_PHYSICAL, RH_BORN_TIMESTAMP, RH_STORE_TIMESTAMP, RH_FLAG, RH_SYS_FLAG, RH_RECONSUME, RH_PREPARED,
    RH_QUEUE_OFFSET, RH_INTS, RH_BORN_HOST = RH_INTS, RH_STORE_HOST, RH_MAGIC, RH_TRAILING, RH_TOPIC,
    RH_QUEUE_ID, RH_FIELDS
};
#define RH_REQUIRED ((1u << RH_PHYSICAL) | (1u << RH_BORN_TIMESTAMP) | (1u << RH_STORE_TIMESTAMP) | \
                     (1u << RH_BORN_HOST) | (1u << RH_STORE_HOST))
/* What every header of a converted message's own starts with (conversion._RMQ_PREFIX): such a header
 * repeated in a row is refused by the reference (restore_message), whether or not it is read here. */
#define RMQ_HEADER_PREFIX "rmq."
#define RMQ_HEADER_PREFIX_LEN 4
/* Header positions in a row whose field restore_headers guesses from the row before; the property
 * headers of a row it keeps to look for a repeated name among (past them: every header before). */
enum { RH_GUESSES = 64, RH_ROW_PROPERTIES = 32 };
/* Why restore_headers declined a run (the reference path then decides): its status, 0 for none. */
enum {
    RH_OK, RH_MISSING, RH_REPEATED, RH_BAD_INT, RH_BAD_HOST, RH_V2, RH_NULL, RH_BAD_PROPERTY, RH_TOO_LONG,
    RH_BAD_TRAILING,
};

/* Bytes below 3 (the property separators 0x01 and 0x02, or a zero) in a word of ASCII bytes. */
#define HAS_BELOW_3(w) (((w) - 0x0303030303030303ull) & ~(w) & ASCII_MASK)

/* Whether s[0:n] is UTF-8 (no surrogates: Arrow's string check) without either property
   separator: a property name or value restore_headers can write.  ASCII words take one test. */
static inline int
property_text(const uint8_t *s, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        if ((w & ASCII_MASK) || HAS_BELOW_3(w)) {
            break;
        }
    }
    for (; i < n && s[i] < 0x80; i++) {
        if (s[i] == NAME_VALUE_SEPARATOR || s[i] == PROPERTY_SEPARATOR) {
            return 0;
        }
    }
    return i == n || (valid_utf8(s + i, n - i, 0) && !memchr(s + i, NAME_VALUE_SEPARATOR, (size_t)(n - i)) &&
                      !memchr(s + i, PROPERTY_SEPARATOR, (size_t)(n - i)));
}

/* s[0:n] as int() reads a plain decimal ('-'? ASCII digits, as Arrow's cast to int64 takes them)
   within [lo, hi]; 0 for anything else. */
static int
parse_decimal(const uint8_t *s, int32_t n, int64_t lo, int64_t hi, int64_t *out)
{
    const int negative = n > 0 && s[0] == '-';
    int32_t k = negative;
    if (n - k < 1) {
        return 0;
    }
    while (n - k > 1 && s[k] == '0') {     /* leading zeros: at most 19 digits left fit in a uint64 */
        k++;
    }
    if (n - k > 19) {
        return 0;
    }
    uint64_t u = 0;
    for (int32_t i = k; i < n; i++) {
        unsigned digit = (unsigned)s[i] - '0';
        if (digit > 9) {
            return 0;
        }
        u = u * 10 + digit;
    }
    int64_t v;
    if (negative) {
        if (u > (uint64_t)INT64_MAX + 1) {
            return 0;
        }
        v = u == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)u;
    } else {
        if (u > (uint64_t)INT64_MAX) {
            return 0;
        }
        v = (int64_t)u;
    }
    if (v < lo || v > hi) {
        return 0;
    }
    *out = v;
    return 1;
}

/* s[0:n] as Host.parse reads "a.b.c.d:port" (octets without leading zeros, as ipaddress wants them;
   a port of digits in 0..65535); 0 for anything else, IPv6 included. */
static int
parse_ipv4_host(const uint8_t *s, int32_t n, uint8_t ip[IPV4_LEN], int64_t *port)
{
    int32_t colon = n - 1;
    while (colon >= 0 && s[colon] != ':') {
        colon--;
    }
    if (colon < 0) {
        return 0;
    }
    int32_t k = 0;
    for (int o = 0; o < IPV4_LEN; o++) {
        int32_t first = k;
        unsigned v = 0;
        while (k < colon && k - first < 3 && s[k] >= '0' && s[k] <= '9') {
            v = v * 10 + (unsigned)(s[k] - '0');
            k++;
        }
        if (k == first || v > 255 || (k - first > 1 && s[first] == '0')) {
            return 0;
        }
        ip[o] = (uint8_t)v;
        if (o < IPV4_LEN - 1) {
            if (k >= colon || s[k] != '.') {
                return 0;
            }
            k++;
        }
    }
    int64_t p;
    if (k != colon || n - colon - 1 > 9 || !parse_decimal(s + colon + 1, n - colon - 1, 0, 0xFFFF, &p) ||
        s[colon + 1] == '-') {
        return 0;
    }
    *port = p;
    return 1;
}

/*
 * restore_headers(item_offsets, key_offsets, keys, value_offsets, values, value_valid, names, prefix,
 *                 trailing_text, ints, ips, ports, trailing, places, prop_offsets, prop_data)
 *     -> (status, prop_bytes, topic_repeated, queue_repeated)
 *
 * The RocketMQ fields of n rows of a conversion's header lists (row i's headers are items
 * item_offsets[i]:item_offsets[i + 1]; keys and values as int32 Arrow offsets and data; value_valid
 * one byte per item, empty for no nulls), in one pass: the rmq.* headers named by names
 * (RH_FIELDS texts in the enum's order) parsed into ints (RH_INTS rows of n int64, the defaults
 * left where a row lacks an optional one), ips (born then store, n x 4 bytes each), ports (2 x n)
 * and trailing (n bytes); places (2 x n int64) the item of each row's rmq.topic and rmq.queue_id or
 * -1; and each row's prefix+NAME headers encoded as its properties (NAME 0x01 VALUE joined by 0x02,
 * a 0x02 after the last where trailing; a null value as empty) into prop_offsets (n + 1 int32) and
 * prop_data (room for keys + values + 2 per item).  status RH_OK, or why the run needs the
 * reference path: a required header missing, a header repeated, an int or host that does not
 * parse, rmq.magic, a null value, a property name repeated or not UTF-8 or with a separator, or
 * properties over MAX_PROPERTIES_BYTES.  ValueError for outputs of other sizes.  O(items), but a
 * row's property names are compared pairwise.  Releases the GIL.
 */
/*
 * first_headers(rows, key_offsets, keys, value_offsets, values, valid, name, marked, numbers) -> int
 *
 * Per row of a list<struct<key, value>> column (rows: n + 1 int64 item offsets from 0; the items'
 * Arrow buffers, int32 offsets; valid: b"" or one byte per item), whether its first header is
 * keyed ``name`` (marked[i], uint8) and that header's value as a plain decimal int64 (numbers[i];
 * -1 for a row not marked).  Returns how many marked rows hold a value that is not a plain decimal
 * in int64 (null included): their numbers[i] is -1 and the caller reads them as int() does.  The
 * walk runs without the GIL.  O(rows).
 */
static PyObject *
first_headers(PyObject *module, PyObject *args)
{
    Py_buffer b[9];
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*y*y*w*w*", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5], &b[6], &b[7],
                          &b[8])) {
        return NULL;
    }
    const int64_t *rows = b[0].buf;
    const int32_t *ko = b[1].buf, *vo = b[3].buf;
    const uint8_t *kd = b[2].buf, *vd = b[4].buf, *valid = b[5].buf, *name = b[6].buf;
    uint8_t *marked = b[7].buf;
    int64_t *numbers = b[8].buf;
    Py_ssize_t n = b[7].len, items = b[1].len / 4 - 1, name_len = b[6].len;
    int ok = b[0].len == (n + 1) * 8 && b[8].len == n * 8 && items >= 0 && b[3].len == b[1].len &&
             (b[5].len == 0 || b[5].len == items) && rows[0] >= 0 && rows[n] <= items;
    for (Py_ssize_t i = 0; ok && i < n; i++) {
        ok = rows[i + 1] >= rows[i];
    }
    Py_ssize_t unread = 0;
    if (ok) {
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; ok && i < n; i++) {
            int64_t j = rows[i];
            marked[i] = 0;
            numbers[i] = -1;
            if (j == rows[i + 1]) {
                continue;
            }
            /* only each row's first item is read: only its offsets are checked */
            ok = ko[j] >= 0 && ko[j + 1] >= ko[j] && ko[j + 1] <= b[2].len && vo[j] >= 0 && vo[j + 1] >= vo[j] &&
                 vo[j + 1] <= b[4].len;
            marked[i] = ok && ko[j + 1] - ko[j] == name_len && same_text(kd + ko[j], name, name_len);
            if (marked[i] && ((b[5].len && !valid[j]) ||
                              !parse_decimal(vd + vo[j], vo[j + 1] - vo[j], INT64_MIN, INT64_MAX, &numbers[i]))) {
                numbers[i] = -1;
                unread++;
            }
        }
        Py_END_ALLOW_THREADS
    }
    for (int k = 0; k < 9; k++) {
        PyBuffer_Release(&b[k]);
    }
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "expected header lists inside their buffers and outputs of n rows");
        return NULL;
    }
    return PyLong_FromSsize_t(unread);
}

static PyObject *
restore_headers(PyObject *module, PyObject *args)
{
    Py_buffer b[15];
    PyObject *names;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*y*O!y*y*w*w*w*w*w*w*w*", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5],
                          &PyTuple_Type, &names, &b[6], &b[7], &b[8], &b[9], &b[10], &b[11], &b[12], &b[13],
                          &b[14])) {
        return NULL;
    }
    const int64_t *rows = b[0].buf;
    const int32_t *ko = b[1].buf, *vo = b[3].buf;
    const uint8_t *kd = b[2].buf, *vd = b[4].buf, *valid = b[5].buf, *prefix = b[6].buf, *trail = b[7].buf;
    int64_t *ints = b[8].buf, *ports = b[10].buf, *places = b[12].buf;
    uint8_t *ips = b[9].buf, *trailing = b[11].buf, *pd = b[14].buf;
    int32_t *po = b[13].buf;
    Py_ssize_t n = b[11].len, items = b[1].len / 4 - 1, plen = b[6].len, tlen = b[7].len, cap = b[14].len;
    const uint8_t *name[RH_FIELDS];
    Py_ssize_t name_len[RH_FIELDS];
    int ok = texts_of(names, RH_FIELDS, name, name_len) && b[0].len == (n + 1) * 8 && items >= 0 &&
             b[3].len == b[1].len && (b[5].len == 0 || b[5].len == items) && b[8].len == RH_INTS * n * 8 &&
             b[9].len == 2 * n * IPV4_LEN && b[10].len == 2 * n * 8 && b[12].len == 2 * n * 8 &&
             b[13].len == (n + 1) * 4;
    if (ok && n > 0) {
        ok = rows[0] >= 0 && rows[n] <= items && span_ok(ko, items, b[2].len) && span_ok(vo, items, b[4].len);
        for (Py_ssize_t i = 0; ok && i < n; i++) {
            ok = rows[i + 1] >= rows[i];
        }
    }
    if (!ok) {
        for (int k = 0; k < 15; k++) {
            PyBuffer_Release(&b[k]);
        }
        PyErr_SetString(PyExc_ValueError, "expected header lists inside their buffers and outputs of the documented sizes");
        return NULL;
    }
    static const int64_t lo[RH_INTS] = {INT64_MIN, INT64_MIN, INT64_MIN, INT32_MIN, INT32_MIN, INT32_MIN,
                                        INT64_MIN, INT64_MIN};
    static const int64_t hi[RH_INTS] = {INT64_MAX, INT64_MAX, INT64_MAX, INT32_MAX, INT32_MAX, INT32_MAX,
                                        INT64_MAX, INT64_MAX};
    int status = RH_OK, topic_repeated = 0, queue_repeated = 0;
    Py_ssize_t at = 0;
    /* The field each header position held in the row before (RH_FIELDS: none): rows that to_entry
     * made list their headers in one order, so the guess spares the search through the names. */
    uint8_t guess[RH_GUESSES];
    memset(guess, RH_FIELDS, sizeof(guess));
    Py_BEGIN_ALLOW_THREADS
    po[0] = 0;
    for (Py_ssize_t i = 0; status == RH_OK && i < n; i++) {
        uint32_t seen = 0;
        Py_ssize_t start = at;
        int props = 0;
        int64_t prop_items[RH_ROW_PROPERTIES];   /* this row's property headers so far (the first ones) */
        places[i] = places[n + i] = -1;
        trailing[i] = 0;
        for (int64_t j = rows[i]; status == RH_OK && j < rows[i + 1]; j++) {
            const uint8_t *key = kd + ko[j], *value = vd + vo[j];
            int32_t kl = ko[j + 1] - ko[j], vl = vo[j + 1] - vo[j];
            int null = b[5].len && !valid[j];
            int64_t position = j - rows[i];
            if (kl >= plen && same_text(key, prefix, plen)) {
                const uint8_t *pn = key + plen;
                int32_t nl = kl - (int32_t)plen;
                /* the same name earlier in the row: only a property can have it (its prefix) */
                if (props <= RH_ROW_PROPERTIES) {
                    for (int e = 0; e < props; e++) {
                        int64_t p = prop_items[e];
                        if (ko[p + 1] - ko[p] == kl && same_text(kd + ko[p], key, kl)) {
                            status = RH_BAD_PROPERTY;
                            break;
                        }
                    }
                } else {
                    for (int64_t e = rows[i]; e < j; e++) {
                        if (ko[e + 1] - ko[e] == kl && same_text(kd + ko[e], key, kl)) {
                            status = RH_BAD_PROPERTY;
                            break;
                        }
                    }
                }
                if (props < RH_ROW_PROPERTIES) {
                    prop_items[props] = j;
                }
                if (position < RH_GUESSES) {
                    guess[position] = RH_FIELDS;
                }
                if (null) {
                    vl = 0;
                }
                if (status != RH_OK || !property_text(pn, nl) || !property_text(value, vl)) {
                    status = RH_BAD_PROPERTY;
                    break;
                }
                if ((at - start) + (props > 0) + nl + 1 + vl > MAX_PROPERTIES_BYTES || at + 2 + nl + vl > cap ||
                    at + 2 + nl + vl > INT32_MAX) {     /* prop_offsets are int32 */
                    status = RH_TOO_LONG;
                    break;
                }
                if (props++) {
                    pd[at++] = PROPERTY_SEPARATOR;
                }
                copy_short(pd + at, pn, (size_t)nl);
                at += nl;
                pd[at++] = NAME_VALUE_SEPARATOR;
                copy_short(pd + at, value, (size_t)vl);
                at += vl;
                continue;
            }
            int f = position < RH_GUESSES ? guess[position] : RH_FIELDS;
            if (f == RH_FIELDS || !(name_len[f] == kl && same_text(name[f], key, kl))) {
                f = 0;
                while (f < RH_FIELDS && !(name_len[f] == kl && same_text(name[f], key, kl))) {
                    f++;
                }
                if (position < RH_GUESSES) {
                    guess[position] = (uint8_t)f;
                }
            }
            if (f == RH_FIELDS) {
                /* rmq.msg_id (derived from the store) or another peer's header; an rmq.* one the row
                 * holds twice (the reference refuses it, read or not): a pass over the row's headers
                 * before it, as rare as such names are (one a converted row: rmq.msg_id) */
                if (kl >= RMQ_HEADER_PREFIX_LEN && memcmp(key, RMQ_HEADER_PREFIX, RMQ_HEADER_PREFIX_LEN) == 0) {
                    for (int64_t e = rows[i]; e < j; e++) {
                        if (ko[e + 1] - ko[e] == kl && same_text(kd + ko[e], key, kl)) {
                            status = RH_REPEATED;
                            break;
                        }
                    }
                }
                continue;
            }
            if (seen & (1u << f)) {
                if (f == RH_TOPIC || f == RH_QUEUE_ID) {
                    *(f == RH_TOPIC ? &topic_repeated : &queue_repeated) = 1;
                    continue;
                }
                status = RH_REPEATED;
                break;
            }
            seen |= 1u << f;
            if (f == RH_TOPIC || f == RH_QUEUE_ID) {
                places[(f == RH_QUEUE_ID) * n + i] = j;
                continue;
            }
            if (f == RH_MAGIC) {
                status = RH_V2;
            } else if (null) {
                status = RH_NULL;
            } else if (f < RH_INTS) {
                if (!parse_decimal(value, vl, lo[f], hi[f], &ints[f * n + i])) {
                    status = RH_BAD_INT;
                }
            } else if (f == RH_BORN_HOST || f == RH_STORE_HOST) {
                int h = f == RH_STORE_HOST;
                if (!parse_ipv4_host(value, vl, ips + (h * n + i) * IPV4_LEN, &ports[h * n + i])) {
                    status = RH_BAD_HOST;
                }
            } else {        /* RH_TRAILING: to_entry writes trailing_text or no header */
                trailing[i] = vl == tlen && memcmp(value, trail, (size_t)tlen) == 0;
                if (!trailing[i]) {
                    status = RH_BAD_TRAILING;
                }
            }
        }
        if (status == RH_OK && (seen & RH_REQUIRED) != RH_REQUIRED) {
            status = RH_MISSING;
        }
        if (status == RH_OK && props && trailing[i]) {
            if (at - start + 1 > MAX_PROPERTIES_BYTES || at + 1 > cap || at + 1 > INT32_MAX) {
                status = RH_TOO_LONG;
            } else {
                pd[at++] = PROPERTY_SEPARATOR;
            }
        }
        po[i + 1] = (int32_t)at;
    }
    Py_END_ALLOW_THREADS
    for (int k = 0; k < 15; k++) {
        PyBuffer_Release(&b[k]);
    }
    return Py_BuildValue("inii", status, at, topic_repeated, queue_repeated);
}

/*
 * The properties from_entry (conversion.py) gives a record of a peer's own (not one converted from
 * RocketMQ), fields NP_* in its insertion order; the store writes them in Java HashMap order, which
 * depends only on which fields a row has (``orders``: NP_ORDERS rows of NP_FIELDS field numbers, by
 * the bit mask of the row's fields, 0xFF past its last).
 */
enum {
    NP_OFFSET, NP_KEYS, NP_KEY, NP_EMPTY_KEY, NP_NULL_VALUE, NP_TIMESTAMP_TYPE, NP_HEADERS, NP_TXN, NP_PRODUCER, NP_CONTROL,
    NP_FIELDS
};
#define NP_ORDERS (1 << NP_FIELDS)
/* Why native_properties declined a run (the entry path then decides): its status, 0 for none. */
enum { NP_OK, NP_TOO_LONG, NP_BAD_TEXT, NP_NO_ROOM };

/* Whether a record key goes into KEYS as it is (conversion._plain_key): UTF-8, not empty, none of
   the key separator ' ', 0x01, 0x02, \t \n \v \f \r. */
static int
plain_record_key(const uint8_t *s, Py_ssize_t n)
{
    if (n == 0 || !valid_utf8(s, n, 0)) {
        return 0;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        uint8_t c = s[i];
        if (c == ' ' || c == NAME_VALUE_SEPARATOR || c == PROPERTY_SEPARATOR || (c >= '\t' && c <= '\r')) {
            return 0;
        }
    }
    return 1;
}

/*
 * native_properties(offsets, key_offsets, key_data, key_valid, null_value, log_append, item_rows,
 *                   hk_offsets, hk_data, hv_offsets, hv_data, hv_valid, txn, control, producers, names,
 *                   orders, log_append_text, trailing, prop_offsets, prop_data) -> (status, used)
 *
 * The encoded properties of n records of a peer's own (conversion.from_entry, then the store's
 * HashMap order and the version's trailing 0x02), in one pass: offsets int64[n]; the keys as Arrow
 * binary (int32 offsets, data, key_valid b"" or uint8[n]); null_value, log_append, txn, control
 * uint8[n]; item_rows int64[n + 1], each row's header items; the items' names (hk_*) and values
 * (hv_*, hv_valid b"" or uint8[items]); producers int64[2n] (ids, then epochs); names the NP_FIELDS
 * property names; orders (see NP_ORDERS); log_append_text the timestamp type's text.  Written into
 * prop_offsets (int32[n + 1]) and prop_data (used bytes of it).  status NP_OK, or why the run needs
 * the entry path: properties of MAX_PROPERTIES_BYTES or more, a header name not UTF-8, or
 * prop_data too small.  ValueError for inputs of other sizes.  O(bytes).  Releases the GIL.
 */
static PyObject *
native_properties(PyObject *module, PyObject *args)
{
    enum { NB = 19 };
    Py_buffer b[NB];
    PyObject *names;
    int trailing;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*y*y*y*y*y*y*y*y*y*y*O!y*y*pw*w*", &b[0], &b[1], &b[2], &b[3], &b[4],
                          &b[5], &b[6], &b[7], &b[8], &b[9], &b[10], &b[11], &b[12], &b[13], &b[14], &PyTuple_Type,
                          &names, &b[15], &b[16], &trailing, &b[17], &b[18])) {
        return NULL;
    }
    const int64_t *offsets = b[0].buf, *rows = b[6].buf, *producers = b[14].buf;
    const int32_t *ko = b[1].buf, *hko = b[7].buf, *hvo = b[9].buf;
    const uint8_t *kd = b[2].buf, *kvalid = b[3].buf, *null_value = b[4].buf, *log_append = b[5].buf,
                  *hkd = b[8].buf, *hvd = b[10].buf, *hvalid = b[11].buf, *txn = b[12].buf, *control = b[13].buf,
                  *orders = b[15].buf, *lat = b[16].buf;
    int32_t *po = b[17].buf;
    uint8_t *pd = b[18].buf;
    Py_ssize_t n = b[0].len / 8, items = b[7].len / 4 - 1, cap = b[18].len, lat_len = b[16].len;
    const uint8_t *name[NP_FIELDS];
    Py_ssize_t name_len[NP_FIELDS], names_total = 0;
    int ok = texts_of(names, NP_FIELDS, name, name_len) && b[0].len == n * 8 && b[1].len == (n + 1) * 4 &&
             (b[3].len == 0 || b[3].len == n) && b[4].len == n && b[5].len == n && b[6].len == (n + 1) * 8 &&
             items >= 0 && b[9].len == b[7].len && (b[11].len == 0 || b[11].len == items) && b[12].len == n &&
             b[13].len == n && b[14].len == 2 * n * 8 && b[15].len == NP_ORDERS * NP_FIELDS &&
             b[17].len == (n + 1) * 4;
    for (int f = 0; ok && f < NP_FIELDS; f++) {
        names_total += name_len[f];
    }
    if (ok) {
        ok = span_ok(ko, n, b[2].len) && span_ok(hko, items, b[8].len) && span_ok(hvo, items, b[10].len) &&
             (n == 0 || (rows[0] >= 0 && rows[n] <= items));
        for (Py_ssize_t i = 0; ok && i < n; i++) {
            ok = rows[i + 1] >= rows[i];
        }
    }
    if (!ok) {
        for (int k = 0; k < NB; k++) {
            PyBuffer_Release(&b[k]);
        }
        PyErr_SetString(PyExc_ValueError, "expected record columns inside their buffers and outputs of n rows");
        return NULL;
    }
    int status = NP_OK;
    Py_ssize_t at = 0;
    Py_BEGIN_ALLOW_THREADS
    po[0] = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        const uint8_t *key = kd + ko[i];
        Py_ssize_t kl = ko[i + 1] - ko[i];
        int has_key = !b[3].len || kvalid[i];
        int64_t first = rows[i], last = rows[i + 1];
        unsigned mask = 1u << NP_OFFSET;
        if (has_key) {
            /* an empty key as a flag: an empty NP_KEY value is a pair MessageDecoder drops */
            mask |= 1u << (kl == 0 ? NP_EMPTY_KEY : plain_record_key(key, kl) ? NP_KEYS : NP_KEY);
        }
        mask |= (unsigned)(null_value[i] != 0) << NP_NULL_VALUE | (unsigned)(log_append[i] != 0) << NP_TIMESTAMP_TYPE |
                (unsigned)(last > first) << NP_HEADERS | (unsigned)(control[i] != 0) << NP_CONTROL;
        if (txn[i]) {
            mask |= 1u << NP_TXN;
        } else if (producers[i] != -1 || producers[n + i] != -1) {
            mask |= 1u << NP_PRODUCER;
        }
        /* the most this row can take: names, separators, numbers, the key as base64 (4/3 + 4), each
           header's name escaped (6x) and value as base64 */
        Py_ssize_t bound = names_total + 2 * NP_FIELDS + 20 + 2 * kl + 4 + lat_len + 41 + 1 + 2;
        for (int64_t j = first; j < last; j++) {
            bound += 6 * (Py_ssize_t)(hko[j + 1] - hko[j]) + 2 * (Py_ssize_t)(hvo[j + 1] - hvo[j]) + 16;
        }
        if (at + bound > cap) {
            status = NP_NO_ROOM;
            break;
        }
        Py_ssize_t start = at;
        const uint8_t *order = orders + (Py_ssize_t)mask * NP_FIELDS;
        for (int k = 0; k < NP_FIELDS && order[k] != 0xFF; k++) {
            int f = order[k];
            if (k) {
                pd[at++] = PROPERTY_SEPARATOR;
            }
            memcpy(pd + at, name[f], (size_t)name_len[f]);
            at += name_len[f];
            pd[at++] = NAME_VALUE_SEPARATOR;
            switch (f) {
            case NP_OFFSET:
                at += decimal_text(offsets[i], (char *)pd + at);
                break;
            case NP_KEYS:
                memcpy(pd + at, key, (size_t)kl);
                at += kl;
                break;
            case NP_KEY:
                at = put_base64(pd + at, key, kl) - pd;
                break;
            case NP_EMPTY_KEY:
            case NP_NULL_VALUE:
            case NP_CONTROL:
                pd[at++] = '1';
                break;
            case NP_TIMESTAMP_TYPE:
                memcpy(pd + at, lat, (size_t)lat_len);
                at += lat_len;
                break;
            case NP_HEADERS:
                pd[at++] = '[';
                for (int64_t j = first; j < last; j++) {
                    const uint8_t *hn = hkd + hko[j];
                    Py_ssize_t hl = hko[j + 1] - hko[j];
                    if (!valid_utf8(hn, hl, 0)) {
                        status = NP_BAD_TEXT;
                        break;
                    }
                    if (j > first) {
                        pd[at++] = ',';
                    }
                    uint8_t *o = put_json_string(pd + at + 1, hn, hl);     /* ["name", */
                    pd[at] = '[';
                    *o++ = ',';
                    if (b[11].len && !hvalid[j]) {
                        o = put_text(o, "null");
                    } else {
                        *o++ = '"';
                        o = put_base64(o, hvd + hvo[j], hvo[j + 1] - hvo[j]);
                        *o++ = '"';
                    }
                    *o++ = ']';
                    at = o - pd;
                }
                pd[at++] = ']';
                break;
            default:        /* NP_TXN, NP_PRODUCER */
                at += decimal_text(producers[i], (char *)pd + at);
                pd[at++] = ',';
                at += decimal_text(producers[n + i], (char *)pd + at);
            }
            if (status != NP_OK) {
                break;
            }
        }
        if (status != NP_OK) {
            break;
        }
        if (trailing) {
            pd[at++] = PROPERTY_SEPARATOR;
        }
        /* the entry path decides the last byte's case (from_entry checks without the trailing 0x02) */
        if (at - start >= MAX_PROPERTIES_BYTES) {
            status = NP_TOO_LONG;
            break;
        }
        po[i + 1] = (int32_t)at;
    }
    Py_END_ALLOW_THREADS
    for (int k = 0; k < NB; k++) {
        PyBuffer_Release(&b[k]);
    }
    return Py_BuildValue("in", status, at);
}

/* Whether s[0..n) holds a property separator (0x01 or 0x02). */
static int
has_separator(const uint8_t *s, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        if ((uint8_t)(s[i] - 1) < 2) {
            return 1;
        }
    }
    return 0;
}

/*
 * join_properties(list_offsets, name_offsets, names, value_offsets, values, trailing, limit)
 *     -> (data, offsets) | None
 *
 * The stored properties of the n rows of a map column (appendarrow._properties_reference is the
 * reference): row i's items list_offsets[i] to list_offsets[i + 1] (int32[n + 1]) as NAME 0x01
 * VALUE, joined by 0x02, and a trailing 0x02 after a non-empty row's when trailing.  The names and
 * values are Arrow binary buffers (int32 offsets[items + 1], data).  data holds the rows one after
 * another and offsets (int32[n + 1], as bytes) where each starts.  None when a name or value holds
 * 0x01 or 0x02, or a row is longer than limit bytes (the reference path then decides).  ValueError
 * for offsets outside their buffers.  O(bytes); the passes run without the GIL.
 */
static PyObject *
join_properties(PyObject *module, PyObject *args)
{
    Py_buffer lo_b, no_b, nd_b, vo_b, vd_b;
    int trailing;
    Py_ssize_t limit;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*pn", &lo_b, &no_b, &nd_b, &vo_b, &vd_b, &trailing, &limit)) {
        return NULL;
    }
    const int32_t *lo = lo_b.buf, *no = no_b.buf, *vo = vo_b.buf;
    const uint8_t *nd = nd_b.buf, *vd = vd_b.buf;
    Py_ssize_t n = lo_b.len / 4 - 1, items = no_b.len / 4 - 1;
    PyObject *result = NULL, *data = NULL, *offsets = NULL;
    int ok = n >= 0 && lo_b.len == (n + 1) * 4 && items >= 0 && no_b.len % 4 == 0 && vo_b.len == no_b.len &&
             span_ok(no, items, nd_b.len) && span_ok(vo, items, vd_b.len);
    for (Py_ssize_t i = 0; ok && i < n; i++) {
        ok = lo[i] >= 0 && lo[i + 1] >= lo[i] && lo[i + 1] <= items;
    }
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "expected list offsets into the items and item offsets inside their data");
        goto done;
    }
    /* pass 1: check each name and value, size each row */
    int declined = 0;
    Py_ssize_t total = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n && !declined; i++) {
        int32_t first = lo[i], last = lo[i + 1];
        Py_ssize_t row = 0;
        for (int32_t j = first; j < last; j++) {
            Py_ssize_t nl = no[j + 1] - no[j], vl = vo[j + 1] - vo[j];
            if (has_separator(nd + no[j], nl) || has_separator(vd + vo[j], vl)) {
                declined = 1;
                break;
            }
            row += nl + 1 + vl + 1;         /* NAME 0x01 VALUE 0x02 */
        }
        if (last > first && !trailing) {
            row--;                          /* no 0x02 after the last pair */
        }
        if (row > limit) {
            declined = 1;
        }
        total += row;
    }
    if (total > INT32_MAX) {
        declined = 1;                       /* the offsets are int32 */
    }
    Py_END_ALLOW_THREADS
    if (declined) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    data = PyBytes_FromStringAndSize(NULL, total);
    offsets = PyBytes_FromStringAndSize(NULL, (n + 1) * 4);
    if (data == NULL || offsets == NULL) {
        goto done;
    }
    uint8_t *out = (uint8_t *)PyBytes_AS_STRING(data);
    int32_t *starts = (int32_t *)PyBytes_AS_STRING(offsets);
    /* pass 2: write the rows */
    Py_BEGIN_ALLOW_THREADS
    Py_ssize_t at = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        starts[i] = (int32_t)at;
        for (int32_t j = lo[i]; j < lo[i + 1]; j++) {
            Py_ssize_t nl = no[j + 1] - no[j], vl = vo[j + 1] - vo[j];
            if (j > lo[i]) {
                out[at++] = PROPERTY_SEPARATOR;
            }
            memcpy(out + at, nd + no[j], (size_t)nl);
            at += nl;
            out[at++] = NAME_VALUE_SEPARATOR;
            memcpy(out + at, vd + vo[j], (size_t)vl);
            at += vl;
        }
        if (trailing && lo[i + 1] > lo[i]) {
            out[at++] = PROPERTY_SEPARATOR;
        }
    }
    starts[n] = (int32_t)at;
    Py_END_ALLOW_THREADS
    result = PyTuple_Pack(2, data, offsets);
done:
    Py_XDECREF(data);
    Py_XDECREF(offsets);
    PyBuffer_Release(&lo_b);
    PyBuffer_Release(&no_b);
    PyBuffer_Release(&nd_b);
    PyBuffer_Release(&vo_b);
    PyBuffer_Release(&vd_b);
    return result;
}
