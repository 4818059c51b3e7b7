/*
 * segstore_rocketmq._speedups: the lines of dump --json (columnar.py).
 *
 * Included by _speedups.c (one translation unit): the layouts, constants and helpers defined
 * there, and in the files included before this one, are this file's.
 */

/* ------------------------------------------------------------------------------ */
/* dump --json */

static inline uint8_t *
put_text_n(uint8_t *o, const char *s, size_t n)
{
    memcpy(o, s, n);
    return o + n;
}

/* A string literal, its length known at compile time. */
#define put_text(o, lit) put_text_n((o), (lit), sizeof(lit) - 1)

/* s[0:n] between the quotes of a JSON string as json.dumps(ensure_ascii=False) writes it, but a
 * lone surrogate (ED A0..BF xx; none comes from stored properties, which columnar.java_row reads as
 * Java does) escaped, \ud800, as segstore.jsontext.dumps writes it: the line stays UTF-8. */
static uint8_t *
put_json_chars(uint8_t *o, const uint8_t *s, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        uint8_t c = s[i];
        if (c == 0xED && i + 2 < n && (s[i + 1] & 0xE0) == 0xA0) {
            unsigned cp = 0xD000u | ((unsigned)(s[i + 1] & 0x3F) << 6) | (unsigned)(s[i + 2] & 0x3F);
            o = put_text(o, "\\u");
            *o++ = (uint8_t)HEX_LOWER[cp >> 12];
            *o++ = (uint8_t)HEX_LOWER[(cp >> 8) & 15];
            *o++ = (uint8_t)HEX_LOWER[(cp >> 4) & 15];
            *o++ = (uint8_t)HEX_LOWER[cp & 15];
            i += 2;
            continue;
        }
        if (c >= 0x20 && c != '"' && c != '\\') {
            *o++ = c;
            continue;
        }
        *o++ = '\\';
        switch (c) {
        case '"': *o++ = '"'; break;
        case '\\': *o++ = '\\'; break;
        case '\n': *o++ = 'n'; break;
        case '\r': *o++ = 'r'; break;
        case '\t': *o++ = 't'; break;
        case '\b': *o++ = 'b'; break;
        case '\f': *o++ = 'f'; break;
        default:
            o = put_text(o, "u00");
            *o++ = (uint8_t)HEX_LOWER[c >> 4];
            *o++ = (uint8_t)HEX_LOWER[c & 15];
        }
    }
    return o;
}

/* s[0:n] as a JSON string as json.dumps(ensure_ascii=False) writes it. */
static uint8_t *
put_json_string(uint8_t *o, const uint8_t *s, Py_ssize_t n)
{
    *o++ = '"';
    o = put_json_chars(o, s, n);
    *o++ = '"';
    return o;
}

#define put_field_int(o, lit, v) put_decimal(put_text((o), (lit)), (v))

/*
 * json_lines(view, i8, i4, u8, n, tags_codes, item_offsets, names, name_lens, values, value_lens,
 *            tags, tags_lens, token_offsets, tokens, token_lens, born_offsets, born, store_offsets,
 *            store, id_offsets, ids, out) -> bytes written, or -(bytes needed)
 *
 * One ``dump --json`` line per row (store.JSON_KEYS, as json.dumps(to_json(msg),
 * ensure_ascii=False) + "\n" writes it) into the caller's buffer out (reused from
 * batch to batch): the rows' fields, the body in base64, the properties split by
 * split_properties, the tags codes given, the host and msgId texts of
 * format_hosts.  When out may be too small nothing is written and the negated
 * size it needs is returned.
 */
static PyObject *
json_lines(PyObject *module, PyObject *args)
{
    enum { V, I8, I4, U8, CODES, ITEM_OFF, NAMES, NAME_LENS, VALUES, VALUE_LENS, TAGS, TAGS_LENS, TOK_OFF, TOKS,
           TOK_LENS, BORN_OFF, BORN, STORE_OFF, STORE, ID_OFF, IDS, OUT, NB };
    Py_buffer b[NB];
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "y*y*y*y*ny*y*y*y*y*y*y*y*y*y*y*y*y*y*y*y*y*w*", &b[V], &b[I8], &b[I4], &b[U8], &n,
                          &b[CODES], &b[ITEM_OFF], &b[NAMES], &b[NAME_LENS], &b[VALUES], &b[VALUE_LENS], &b[TAGS],
                          &b[TAGS_LENS], &b[TOK_OFF], &b[TOKS], &b[TOK_LENS], &b[BORN_OFF], &b[BORN], &b[STORE_OFF],
                          &b[STORE], &b[ID_OFF], &b[IDS], &b[OUT])) {
        return NULL;
    }
    PyObject *ret = NULL;
    Cols c;
    if (!cols_init(&c, &b[I8], &b[I4], &b[U8])) {
        goto done;
    }
    if (n < 0 || n > c.cap || b[CODES].len < n * 8 || b[ITEM_OFF].len < (n + 1) * 4 || b[TOK_OFF].len < (n + 1) * 4 ||
        b[TAGS].len < n * 8 || b[TAGS_LENS].len < n * 4 || b[BORN_OFF].len < (n + 1) * 4 ||
        b[STORE_OFF].len < (n + 1) * 4 || b[ID_OFF].len < (n + 1) * 4) {
        PyErr_SetString(PyExc_ValueError, "expected columns of n rows");
        goto done;
    }
    const uint8_t *d = b[V].buf;
    int64_t **i8 = c.i8;
    int32_t **i4 = c.i4;
    const int64_t *codes = b[CODES].buf, *names = b[NAMES].buf, *values = b[VALUES].buf, *tags = b[TAGS].buf;
    const int64_t *toks = b[TOKS].buf;
    const int32_t *item_off = b[ITEM_OFF].buf, *name_lens = b[NAME_LENS].buf, *value_lens = b[VALUE_LENS].buf;
    const int32_t *tags_lens = b[TAGS_LENS].buf, *tok_off = b[TOK_OFF].buf, *tok_lens = b[TOK_LENS].buf;
    const int32_t *host_off[3] = {b[BORN_OFF].buf, b[STORE_OFF].buf, b[ID_OFF].buf};
    const uint8_t *host_data[3] = {b[BORN].buf, b[STORE].buf, b[IDS].buf};
    /* every slice must lie in the view and every item/token index in its column; the checks and the
     * writing touch only the buffers held here: another thread runs meanwhile (several dump threads,
     * each with its own out) */
    Py_ssize_t items = b[NAME_LENS].len / 4, ntoks = b[TOK_LENS].len / 4;
    int64_t bound = 0;
    const char *bad = NULL;
    uint8_t *o0 = b[OUT].buf, *o = o0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n && bad == NULL; i++) {
        if (i8[C_BODY_POS][i] < 0 || i8[C_BODY_POS][i] + i4[C_BODY_LEN][i] > b[V].len || i8[C_TOPIC_POS][i] < 0 ||
            i8[C_TOPIC_POS][i] + i4[C_TOPIC_LEN][i] > b[V].len || item_off[i + 1] > items || tok_off[i + 1] > ntoks ||
            item_off[i] > item_off[i + 1] || tok_off[i] > tok_off[i + 1] ||
            (tags_lens[i] > 0 && tags[i] + tags_lens[i] > b[V].len)) {
            bad = "expected slices inside the view and item indexes inside their columns";
            break;
        }
        bound += 768 + 4 * ((int64_t)i4[C_BODY_LEN][i] / 3 + 1) + 6 * (int64_t)i4[C_TOPIC_LEN][i] +
                 24 * (int64_t)i4[C_PROPS_LEN][i] + 16 * (int64_t)(tok_off[i + 1] - tok_off[i]);
    }
    for (Py_ssize_t k = 0; k < items && bad == NULL; k++) {
        if (names[k] < 0 || names[k] + name_lens[k] > b[V].len || values[k] < 0 ||
            values[k] + value_lens[k] > b[V].len) {
            bad = "expected properties inside the view";
        }
    }
    for (Py_ssize_t k = 0; k < ntoks && bad == NULL; k++) {
        if (toks[k] < 0 || toks[k] + tok_lens[k] > b[V].len) {
            bad = "expected tokens inside the view";
        }
    }
    for (int h = 0; h < 3; h++) {
        bound += host_off[h][n];
    }
    for (Py_ssize_t i = 0; i < n && bad == NULL && bound <= b[OUT].len; i++) {
        o = put_text(o, "{\"topic\": ");
        o = put_json_string(o, d + i8[C_TOPIC_POS][i], i4[C_TOPIC_LEN][i]);
        o = put_field_int(o, ", \"queue_id\": ", i4[C_QUEUE_ID][i]);
        o = put_field_int(o, ", \"queue_offset\": ", i8[C_QUEUE_OFFSET][i]);
        o = put_field_int(o, ", \"physical_offset\": ", i8[C_PHYSICAL_OFFSET][i]);
        o = put_field_int(o, ", \"size\": ", i4[C_SIZE][i]);
        o = put_field_int(o, ", \"body_crc\": ", i4[C_BODY_CRC][i]);
        o = put_field_int(o, ", \"flag\": ", i4[C_FLAG][i]);
        o = put_field_int(o, ", \"sys_flag\": ", i4[C_SYS_FLAG][i]);
        o = put_field_int(o, ", \"born_timestamp\": ", i8[C_BORN_TS][i]);
        o = put_text(o, ", \"born_host\": ");
        o = put_json_string(o, host_data[0] + host_off[0][i], host_off[0][i + 1] - host_off[0][i]);
        o = put_field_int(o, ", \"store_timestamp\": ", i8[C_STORE_TS][i]);
        o = put_text(o, ", \"store_host\": ");
        o = put_json_string(o, host_data[1] + host_off[1][i], host_off[1][i + 1] - host_off[1][i]);
        o = put_field_int(o, ", \"reconsume_times\": ", i4[C_RECONSUME][i]);
        o = put_field_int(o, ", \"prepared_transaction_offset\": ", i8[C_PREPARED][i]);
        o = put_text(o, ", \"body\": \"");
        o = put_base64(o, d + i8[C_BODY_POS][i], i4[C_BODY_LEN][i]);
        o = put_text(o, "\", \"properties\": {");
        for (int32_t k2 = item_off[i]; k2 < item_off[i + 1]; k2++) {
            if (k2 > item_off[i]) {
                o = put_text(o, ", ");
            }
            o = put_json_string(o, d + names[k2], name_lens[k2]);
            o = put_text(o, ": ");
            o = put_json_string(o, d + values[k2], value_lens[k2]);
        }
        o = put_text(o, "}, \"tags\": ");
        o = tags_lens[i] >= 0 ? put_json_string(o, d + tags[i], tags_lens[i]) : put_text(o, "null");
        o = put_text(o, ", \"keys\": [");
        for (int32_t k2 = tok_off[i]; k2 < tok_off[i + 1]; k2++) {
            if (k2 > tok_off[i]) {
                o = put_text(o, ", ");
            }
            o = put_json_string(o, d + toks[k2], tok_lens[k2]);
        }
        o = put_field_int(o, "], \"tags_code\": ", codes[i]);
        o = put_text(o, ", \"msg_id\": ");
        o = put_json_string(o, host_data[2] + host_off[2][i], host_off[2][i + 1] - host_off[2][i]);
        o = put_text(o, "}\n");
    }
    Py_END_ALLOW_THREADS
    if (bad != NULL) {
        PyErr_SetString(PyExc_ValueError, bad);
        goto done;
    }
    if (bound > b[OUT].len) {
        ret = PyLong_FromLongLong(-(long long)bound);
        goto done;
    }
    ret = PyLong_FromSsize_t(o - o0);
done:
    for (int k = 0; k < NB; k++) {
        PyBuffer_Release(&b[k]);
    }
    return ret;
}
