/*
 * segstore_rocketmq._speedups: the message lines of the text dump (columnar.TextWriter).
 *
 * Included by _speedups.c after _speedups_json.c (one translation unit): put_json_chars and
 * put_decimal are theirs.  The pure-Python reference is RocketMQStore.dump (store.py) with
 * keys_and_tags (lifecycle.py) and body_preview (store.py).
 */

/* ------------------------------------------------------------------------------ */
/* dump (text) */

/* Characters of the body a line shows (store._BODY_PREVIEW); the hex of half as many bytes. */
#define BODY_PREVIEW 40

/* The length of the UTF-8 sequence at s[0:n] when it is a character Python's str.isspace() holds
 * true, else 0 (U+0009..000D, U+001C..0020, U+0085, U+00A0, U+1680, U+2000..200A, U+2028, U+2029,
 * U+202F, U+205F, U+3000). */
static inline int
space_at(const uint8_t *s, Py_ssize_t n)
{
    uint8_t c = s[0];
    if (c < 0x80) {
        return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20);
    }
    if (c == 0xC2 && n >= 2) {
        return (s[1] == 0x85 || s[1] == 0xA0) ? 2 : 0;
    }
    if (n < 3) {
        return 0;
    }
    if (c == 0xE1) {
        return (s[1] == 0x9A && s[2] == 0x80) ? 3 : 0;
    }
    if (c == 0xE2 && s[1] == 0x80) {
        return (s[2] <= 0x8A || s[2] == 0xA8 || s[2] == 0xA9 || s[2] == 0xAF) ? 3 : 0;
    }
    if (c == 0xE2) {
        return (s[1] == 0x81 && s[2] == 0x9F) ? 3 : 0;
    }
    return (c == 0xE3 && s[1] == 0x80 && s[2] == 0x80) ? 3 : 0;
}

/* The C1 control (U+0080..U+009F) whose UTF-8 sequence starts s[0:n], else -1. */
static inline int
c1_at(const uint8_t *s, Py_ssize_t n)
{
    return (s[0] == 0xC2 && n >= 2 && s[1] >= 0x80 && s[1] <= 0x9F) ? s[1] : -1;
}

/* Whether segstore.store.text_word quotes s[0:n] (not empty): it holds a space (str.isspace), a double
 * quote or a control character (C0, DEL, C1). */
static int
needs_quotes(const uint8_t *s, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        if (s[i] == '"' || s[i] < 0x20 || s[i] == 0x7F || c1_at(s + i, n - i) >= 0 || space_at(s + i, n - i)) {
            return 1;
        }
    }
    return 0;
}

/* segstore.store.quoted_text's characters of s[0:n] (without the quotes): put_json_chars (json.dumps with
 * ensure_ascii=False), DEL and the C1 controls as \u007f..\u009f too. */
static uint8_t *
put_text_chars(uint8_t *o, const uint8_t *s, Py_ssize_t n)
{
    Py_ssize_t run = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int c = s[i] == 0x7F ? 0x7F : c1_at(s + i, n - i);
        if (c < 0) {
            continue;
        }
        o = put_json_chars(o, s + run, i - run);
        o = put_text(o, "\\u00");
        *o++ = (uint8_t)HEX_LOWER[c >> 4];
        *o++ = (uint8_t)HEX_LOWER[c & 15];
        i += c == 0x7F ? 0 : 1;
        run = i + 1;
    }
    return put_json_chars(o, s + run, n - run);
}

/* segstore.store.text_word(s[0:n]): as it is, or quoted (put_text_chars) where empty or needs_quotes. */
static uint8_t *
put_word(uint8_t *o, const uint8_t *s, Py_ssize_t n)
{
    if (n > 0 && !needs_quotes(s, n)) {
        return put_text_n(o, (const char *)s, (size_t)n);
    }
    *o++ = '"';
    o = put_text_chars(o, s, n);
    *o++ = '"';
    return o;
}

/* store.body_preview(s[0:n]): the first BODY_PREVIEW characters quoted (put_text_chars) when UTF-8, else 0x and the
 * hex of the first BODY_PREVIEW / 2 bytes; "..." after either when cut. */
static uint8_t *
put_body_preview(uint8_t *o, const uint8_t *s, Py_ssize_t n)
{
    if (!valid_utf8(s, n, 0)) {
        Py_ssize_t cut = n < BODY_PREVIEW / 2 ? n : BODY_PREVIEW / 2;
        o = put_text(o, "0x");
        for (Py_ssize_t i = 0; i < cut; i++) {
            *o++ = (uint8_t)HEX_LOWER[s[i] >> 4];
            *o++ = (uint8_t)HEX_LOWER[s[i] & 15];
        }
        return cut < n ? put_text(o, "...") : o;
    }
    Py_ssize_t end = 0;
    for (int chars = 0; end < n && chars < BODY_PREVIEW; chars++) {   /* a character: its lead byte on */
        end++;
        while (end < n && (s[end] & 0xC0) == 0x80) {
            end++;
        }
    }
    *o++ = '"';
    o = put_text_chars(o, s, end);
    *o++ = '"';
    return end < n ? put_text(o, "...") : o;
}

/*
 * text_lines(view, i8, i4, u8, n, tags, tags_lens, token_offsets, tokens, token_lens, out)
 *     -> bytes written, or -(bytes needed)
 *
 * One text dump line per row, each ending in a newline, as RocketMQStore.dump's Python loop
 * writes them:
 *
 *     {physical_offset:>12}  {topic}/{queue_id}@{queue_offset}  size=S born=B stored=T
 *     keys=K tags=G body=P
 *
 * (one line; the topic as put_word, K the KEYS tokens joined by commas, G the TAGS value, each - when
 * empty and quoted as put_word; P as put_body_preview) into the caller's
 * buffer out (reused from batch to batch).  tags/tokens are split_properties' outputs.  When out
 * may be too small nothing is written and the negated size it needs is returned.  The GIL is
 * released while the lines are written.
 */
static PyObject *
text_lines(PyObject *module, PyObject *args)
{
    enum { V, I8, I4, U8, TAGS, TAGS_LENS, TOK_OFF, TOKS, TOK_LENS, OUT, NB };
    Py_buffer b[NB];
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "y*y*y*y*ny*y*y*y*y*w*", &b[V], &b[I8], &b[I4], &b[U8], &n, &b[TAGS],
                          &b[TAGS_LENS], &b[TOK_OFF], &b[TOKS], &b[TOK_LENS], &b[OUT])) {
        return NULL;
    }
    PyObject *ret = NULL;
    Cols c;
    if (!cols_init(&c, &b[I8], &b[I4], &b[U8])) {
        goto done;
    }
    if (n < 0 || n > c.cap || b[TAGS].len < n * 8 || b[TAGS_LENS].len < n * 4 || b[TOK_OFF].len < (n + 1) * 4) {
        PyErr_SetString(PyExc_ValueError, "expected columns of n rows");
        goto done;
    }
    const uint8_t *d = b[V].buf;
    int64_t **i8 = c.i8;
    int32_t **i4 = c.i4;
    const int64_t *tags = b[TAGS].buf, *toks = b[TOKS].buf;
    const int32_t *tags_lens = b[TAGS_LENS].buf, *tok_off = b[TOK_OFF].buf, *tok_lens = b[TOK_LENS].buf;
    Py_ssize_t ntoks = b[TOK_LENS].len / 4;
    if (b[TOKS].len < ntoks * 8) {
        PyErr_SetString(PyExc_ValueError, "expected a position for every token");
        goto done;
    }
    /* every slice must lie in the view and every token index in its column */
    int64_t bound = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (i8[C_BODY_POS][i] < 0 || i4[C_BODY_LEN][i] < 0 || i8[C_BODY_POS][i] + i4[C_BODY_LEN][i] > b[V].len ||
            i8[C_TOPIC_POS][i] < 0 || i4[C_TOPIC_LEN][i] < 0 || i8[C_TOPIC_POS][i] + i4[C_TOPIC_LEN][i] > b[V].len ||
            tok_off[i] < 0 || tok_off[i + 1] > ntoks || tok_off[i] > tok_off[i + 1] ||
            (tags_lens[i] > 0 && (tags[i] < 0 || tags[i] + tags_lens[i] > b[V].len))) {
            PyErr_SetString(PyExc_ValueError, "expected slices inside the view and token indexes inside their column");
            goto done;
        }
        /* numbers and names: 7 * 20 + 64; a quoted byte 6 bytes at most; the preview 6 * 40 + 5 */
        bound += 512 + 6 * (int64_t)i4[C_TOPIC_LEN][i] + 6 * (int64_t)(tags_lens[i] > 0 ? tags_lens[i] : 0) +
                 6 * (int64_t)(tok_off[i + 1] - tok_off[i]);
    }
    for (Py_ssize_t k = 0; k < ntoks; k++) {
        if (toks[k] < 0 || tok_lens[k] < 0 || toks[k] + tok_lens[k] > b[V].len) {
            PyErr_SetString(PyExc_ValueError, "expected tokens inside the view");
            goto done;
        }
        bound += 6 * (int64_t)tok_lens[k];
    }
    if (bound > b[OUT].len) {
        ret = PyLong_FromLongLong(-(long long)bound);
        goto done;
    }
    uint8_t *o0 = b[OUT].buf, *o = o0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        uint8_t number[24];
        Py_ssize_t width = put_decimal(number, i8[C_PHYSICAL_OFFSET][i]) - number;
        for (Py_ssize_t k = width; k < 12; k++) {
            *o++ = ' ';
        }
        o = put_text_n(o, (const char *)number, (size_t)width);
        o = put_text(o, "  ");
        o = put_word(o, d + i8[C_TOPIC_POS][i], i4[C_TOPIC_LEN][i]);
        *o++ = '/';
        o = put_decimal(o, i4[C_QUEUE_ID][i]);
        *o++ = '@';
        o = put_decimal(o, i8[C_QUEUE_OFFSET][i]);
        o = put_field_int(o, "  size=", i4[C_SIZE][i]);
        o = put_field_int(o, " born=", i8[C_BORN_TS][i]);
        o = put_field_int(o, " stored=", i8[C_STORE_TS][i]);
        o = put_text(o, " keys=");
        int32_t t0 = tok_off[i], t1 = tok_off[i + 1];
        if (t0 == t1) {
            *o++ = '-';
        } else {
            int quote = 0;
            for (int32_t k = t0; k < t1 && !quote; k++) {
                quote = needs_quotes(d + toks[k], tok_lens[k]);
            }
            if (quote) {
                *o++ = '"';
            }
            for (int32_t k = t0; k < t1; k++) {
                if (k > t0) {
                    *o++ = ',';
                }
                o = quote ? put_text_chars(o, d + toks[k], tok_lens[k])
                          : put_text_n(o, (const char *)d + toks[k], (size_t)tok_lens[k]);
            }
            if (quote) {
                *o++ = '"';
            }
        }
        o = put_text(o, " tags=");
        if (tags_lens[i] <= 0) {
            *o++ = '-';
        } else {
            o = put_word(o, d + tags[i], tags_lens[i]);
        }
        o = put_text(o, " body=");
        o = put_body_preview(o, d + i8[C_BODY_POS][i], i4[C_BODY_LEN][i]);
        *o++ = '\n';
    }
    Py_END_ALLOW_THREADS
    ret = PyLong_FromSsize_t(o - o0);
done:
    for (int k = 0; k < NB; k++) {
        PyBuffer_Release(&b[k]);
    }
    return ret;
}
