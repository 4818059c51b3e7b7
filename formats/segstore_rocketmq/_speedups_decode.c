/*
 * segstore_rocketmq._speedups: the columnar decode of a mapped commitlog region (columnar.py holds
 * the Python reference).
 *
 * Included by _speedups.c (one translation unit): the layouts, constants and helpers defined
 * there, and in the files included before this one, are this file's.
 */

/* ------------------------------------------------------------------------------ */
/* columnar decode (see columnar.py: the pure-Python reference and the column layout) */

/*
 * The decoded columns, cap rows each, in three caller-owned blocks (columnar.Rows):
 * int64 [N_I8][cap], int32 [N_I4][cap], uint8 born_ip [cap][16], store_ip [cap][16],
 * crc_ok [cap].  *_pos are view positions; position is the view position + base.
 */
enum { C_POSITION, C_QUEUE_OFFSET, C_PHYSICAL_OFFSET, C_BORN_TS, C_STORE_TS, C_PREPARED, C_BODY_POS,
       C_TOPIC_POS, C_PROPS_POS, N_I8 };
enum { C_SIZE, C_MAGIC, C_BODY_CRC, C_QUEUE_ID, C_FLAG, C_SYS_FLAG, C_BORN_PORT, C_STORE_PORT, C_RECONSUME,
       C_BODY_LEN, C_TOPIC_LEN, C_PROPS_LEN, N_I4 };
#define U8_PER_ROW (2 * IPV6_LEN + 1)

typedef struct {
    int64_t *i8[N_I8];
    int32_t *i4[N_I4];
    uint8_t *born_ip, *store_ip, *crc_ok;
    Py_ssize_t cap;
} Cols;

/* Point c into the three blocks; 0 (with ValueError set) when their sizes disagree. */
static int
cols_init(Cols *c, Py_buffer *i8, Py_buffer *i4, Py_buffer *u8)
{
    Py_ssize_t cap = i8->len / (Py_ssize_t)(N_I8 * sizeof(int64_t));
    if (i8->len != cap * N_I8 * (Py_ssize_t)sizeof(int64_t) || i4->len != cap * N_I4 * (Py_ssize_t)sizeof(int32_t) ||
        u8->len != cap * U8_PER_ROW) {
        PyErr_SetString(PyExc_ValueError, "expected column blocks of one capacity (see columnar.Rows)");
        return 0;
    }
    for (int k = 0; k < N_I8; k++) {
        c->i8[k] = (int64_t *)i8->buf + k * cap;
    }
    for (int k = 0; k < N_I4; k++) {
        c->i4[k] = (int32_t *)i4->buf + k * cap;
    }
    c->born_ip = u8->buf;
    c->store_ip = c->born_ip + cap * IPV6_LEN;
    c->crc_ok = c->store_ip + cap * IPV6_LEN;
    c->cap = cap;
    return 1;
}

#define MESSAGE_MAGIC_V2 ((int32_t)0xDAA320AB)
#define PREFIX_SIZE 8
#define IPV6_EXTRA (IPV6_LEN - IPV4_LEN)
enum { ST_DONE, ST_BLANK, ST_END, ST_BAD };

/*
 * The fields a decode fills besides those it always does (position, queue offset, physical offset,
 * size, body CRC, queue id, sys flag, and where the body and topic lie): groups a projection may
 * not need (columnar.FILL_*; a read of one not filled raises there).  A read of the value column
 * alone wrote 96 of a row's 153 bytes of columns for nothing: 0.41 -> 0.29 s over 4M messages.
 */
enum { FILL_TIMES = 1, FILL_PROPS = 2, FILL_HOSTS = 4, FILL_REST = 8, FILL_ALL = 15 };

/*
 * Decode the message at d = view + pos (left bytes to the limit) into row n of c, all but crc_ok
 * (check_crcs fills it) and the groups fill leaves out; 0 when message.decode would raise for its
 * layout (checked whatever fill is).  Row n may be partly written then: the caller does not
 * count it.  Inlined in its two walks: a call a message cost 18 instructions of its 134.
 */
static inline __attribute__((always_inline)) int
decode_row(const uint8_t *d, Py_ssize_t left, int32_t total, int32_t magic, Cols *c, Py_ssize_t n,
           Py_ssize_t pos, int64_t base, int fill)
{
    if (total < HEADER_V4 || total > left) {
        return 0;
    }
    int32_t sys_flag = get_i32(d + 36);
    int born6 = (sys_flag & SYSFLAG_BORNHOST_V6) != 0, store6 = (sys_flag & SYSFLAG_STOREHOST_V6) != 0;
    Py_ssize_t header = HEADER_V4 + (born6 ? IPV6_EXTRA : 0) + (store6 ? IPV6_EXTRA : 0);
    if (total < header) {
        return 0;
    }
    const uint8_t *p = d + header - 4;
    int32_t body_len = get_i32(p);
    Py_ssize_t at = header;
    if (body_len < 0 || at + body_len > total) {
        return 0;
    }
    Py_ssize_t body_at = at;
    at += body_len;
    int32_t topic_len;
    if (magic == MESSAGE_MAGIC) {
        if (at + 1 > total) {
            return 0;
        }
        topic_len = (int8_t)d[at];
        at += 1;
    } else {
        if (at + 2 > total) {
            return 0;
        }
        topic_len = (int16_t)((d[at] << 8) | d[at + 1]);
        at += 2;
    }
    if (topic_len < 0 || at + topic_len > total || !valid_utf8(d + at, topic_len, 0)) {
        return 0;
    }
    Py_ssize_t topic_at = at;
    at += topic_len;
    if (at + PROPERTIES_LENGTH_SIZE > total) {
        return 0;
    }
    int32_t props_len = (int16_t)((d[at] << 8) | d[at + 1]);
    at += PROPERTIES_LENGTH_SIZE;
    /* properties that are not UTF-8 (a surrogate's three bytes neither: Java reads them as U+FFFD) stop
     * the walk there: columnar.java_row builds that row as Java reads it */
    if (props_len < 0 || at + props_len != total || !valid_utf8(d + at, props_len, 0)) {
        return 0;
    }
    int32_t stored_crc = get_i32(d + 8);
    int64_t **i8 = c->i8;
    int32_t **i4 = c->i4;
    i8[C_POSITION][n] = base + pos;
    i8[C_QUEUE_OFFSET][n] = get_i64(d + 20);
    i8[C_PHYSICAL_OFFSET][n] = get_i64(d + 28);
    i8[C_BODY_POS][n] = pos + body_at;
    i8[C_TOPIC_POS][n] = pos + topic_at;
    i4[C_SIZE][n] = total;
    i4[C_BODY_CRC][n] = stored_crc;
    i4[C_QUEUE_ID][n] = get_i32(d + 12);
    i4[C_SYS_FLAG][n] = sys_flag;
    i4[C_BODY_LEN][n] = body_len;
    i4[C_TOPIC_LEN][n] = topic_len;
    if (fill & FILL_PROPS) {
        i8[C_PROPS_POS][n] = pos + at;
        i4[C_PROPS_LEN][n] = props_len;
    }
    /* after the born host: the born port, the store timestamp, the store host, the store port,
     * the reconsume times and the prepared transaction offset */
    p = d + 48 + (born6 ? IPV6_LEN : IPV4_LEN);
    const uint8_t *store_at = p + 12, *after = store_at + (store6 ? IPV6_LEN : IPV4_LEN);
    if (fill & FILL_TIMES) {
        i8[C_BORN_TS][n] = get_i64(d + 40);
        i8[C_STORE_TS][n] = get_i64(p + 4);
    }
    if (fill & FILL_HOSTS) {
        uint8_t *ip = c->born_ip + n * IPV6_LEN;
        int len = born6 ? IPV6_LEN : IPV4_LEN;
        memcpy(ip, d + 48, (size_t)len);
        memset(ip + len, 0, (size_t)(IPV6_LEN - len));
        i4[C_BORN_PORT][n] = get_i32(p);
        ip = c->store_ip + n * IPV6_LEN;
        len = store6 ? IPV6_LEN : IPV4_LEN;
        memcpy(ip, store_at, (size_t)len);
        memset(ip + len, 0, (size_t)(IPV6_LEN - len));
        i4[C_STORE_PORT][n] = get_i32(after);
    }
    if (fill & FILL_REST) {
        i4[C_MAGIC][n] = magic;
        i4[C_FLAG][n] = get_i32(d + 16);
        i4[C_RECONSUME][n] = get_i32(after + 4);
        i8[C_PREPARED][n] = get_i64(after + 8);
    }
    return 1;
}

#ifdef HAVE_CLMUL_CRC
/* check_crcs' rows from i on, four at a time while four are left whose bodies are 16 bytes or more:
 * crc_ok of each, *bad the first that does not match (left as it is where none does); returns the row
 * it stopped at.  Of the CLMUL target, so that crc32_clmul_4 is inlined: called from check_crcs,
 * with its arrays, it cost ~25 instructions a body more. */
CLMUL_TARGET static Py_ssize_t
crc_rows_clmul(const uint8_t *d, const int64_t *at, const int32_t *len, const int32_t *stored, uint8_t *crc_ok,
               Py_ssize_t i, Py_ssize_t n, Py_ssize_t *bad)
{
    for (; i + 4 <= n; i += 4) {
        if (len[i] < 16 || len[i + 1] < 16 || len[i + 2] < 16 || len[i + 3] < 16) {
            break;
        }
        const uint8_t *bufs[4] = {d + at[i], d + at[i + 1], d + at[i + 2], d + at[i + 3]};
        const size_t lens[4] = {(size_t)len[i], (size_t)len[i + 1], (size_t)len[i + 2], (size_t)len[i + 3]};
        uint32_t crcs[4];
        crc32_clmul_4(bufs, lens, crcs);
        unsigned wrong = 0;
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            int same = (crcs[k] & BODY_CRC_MASK) == (uint32_t)stored[i + k];
            crc_ok[i + k] = (uint8_t)same;
            wrong |= (unsigned)!same << k;
        }
        if (wrong && *bad > i) {
            *bad = i + __builtin_ctz(wrong);
        }
    }
    return i;
}
#endif

/*
 * crc_ok of rows [from, n) of c: each body's CRC (view d) against its stored one.  The first row
 * whose CRC does not match, or n: with check_crc = strict, message.decode raises there.  Four bodies
 * at a time where they are long enough (crc32_clmul_4: one body's folds wait on each other); the
 * callers check every CHECK_ROWS rows, while the bodies are still in the cache.
 */
#define CHECK_ROWS 8

static Py_ssize_t
check_crcs(const uint8_t *d, Cols *c, Py_ssize_t from, Py_ssize_t n)
{
    const int64_t *at = c->i8[C_BODY_POS];
    const int32_t *len = c->i4[C_BODY_LEN], *stored = c->i4[C_BODY_CRC];
    Py_ssize_t i = from, bad = n;
#ifdef HAVE_CLMUL_CRC
    if (clmul_usable()) {
        i = crc_rows_clmul(d, at, len, stored, c->crc_ok, i, n, &bad);
    }
#endif
    for (; i < n; i++) {
        c->crc_ok[i] = (body_crc32(d + at[i], (size_t)len[i]) & BODY_CRC_MASK) == (uint32_t)stored[i];
        if (!c->crc_ok[i] && bad > i) {
            bad = i;
        }
    }
    return bad;
}

/*
 * The walk's next message starts where this one ends, so its header is loaded only once this
 * one's size is: a chain of loads that the hardware prefetcher follows inside a page only (the
 * byte after each body, a message's topic length, missed the cache on most rows).  The walk
 * goes forward through the map, so each cache line WALK_AHEAD bytes on is asked for once: 2-4%
 * off a 4M-message walk (2048 measured against none and 4096).  Four lines a step, the bound once a
 * message: a line at a time, with both bounds each, took 25 instructions a 203-byte message.
 */
#define WALK_AHEAD 2048
#if defined(__GNUC__)
#define WALK_PREFETCH(p) __builtin_prefetch(p)
#else
#define WALK_PREFETCH(p) do { } while (0)
#endif

/* FNV-1a of s[0:n]: the hash of a topic in a TopicTable. */
static inline uint32_t
fnv1a(const uint8_t *s, int32_t n)
{
    uint32_t h = 2166136261u;
    for (int32_t i = 0; i < n; i++) {
        h = (h ^ s[i]) * 16777619u;
    }
    return h;
}

/*
 * Rows' topics numbered 0, 1, ... in order of first appearance (topic_codes, and decode_region_indexed
 * as it decodes each row, while the topic's bytes are in the cache: the pass after a whole batch read
 * each from memory again).  The topic of row i is d[tp[i]:+tl[i]].
 */
typedef struct {
    int32_t *codes;         /* per row: its topic's number */
    int64_t *firsts;        /* per number: the first row holding it */
    int32_t k;              /* numbers given */
    int32_t last;           /* the previous row's number (-1: none yet) */
    int32_t *table;         /* numbers by hash, open addressing, -1 free; built at the second topic */
    size_t mask;
    Py_ssize_t rows;        /* the most rows numbered (the table's size: at least twice this) */
} TopicTable;

/*
 * Number row i (bounds checked by the caller).  A topic equal to the previous row's takes its number
 * after one comparison (a batch mostly holds one topic, or runs of one); others are found in the hash
 * table.  0 when the table could not be allocated.  Needs no GIL.
 */
static int
topic_number(TopicTable *t, const uint8_t *d, const int64_t *tp, const int32_t *tl, Py_ssize_t i)
{
    const uint8_t *s = d + tp[i];
    int32_t len = tl[i];
    if (t->last >= 0) {
        int64_t f = t->firsts[t->last];
        if (tl[f] == len && memcmp(d + tp[f], s, (size_t)len) == 0) {
            t->codes[i] = t->last;
            return 1;
        }
    }
    if (t->k > 0 && t->table == NULL) {       /* a second topic: index the numbers so far (one) */
        size_t size = 16;
        while (size < 2 * (size_t)t->rows) {
            size <<= 1;
        }
        t->table = malloc(size * sizeof(int32_t));
        if (t->table == NULL) {
            return 0;
        }
        memset(t->table, 0xFF, size * sizeof(int32_t));
        t->mask = size - 1;
        for (int32_t j = 0; j < t->k; j++) {
            size_t h = fnv1a(d + tp[t->firsts[j]], tl[t->firsts[j]]) & t->mask;
            while (t->table[h] >= 0) {
                h = (h + 1) & t->mask;
            }
            t->table[h] = j;
        }
    }
    int32_t found = -1;
    size_t h = 0;
    if (t->table != NULL) {
        h = fnv1a(s, len) & t->mask;
        for (; t->table[h] >= 0; h = (h + 1) & t->mask) {
            int64_t f = t->firsts[t->table[h]];
            if (tl[f] == len && memcmp(d + tp[f], s, (size_t)len) == 0) {
                found = t->table[h];
                break;
            }
        }
    }
    if (found < 0) {
        found = t->k;
        t->firsts[t->k++] = i;
        if (t->table != NULL) {
            t->table[h] = found;
        }
    }
    t->codes[i] = t->last = found;
    return 1;
}

/*
 * A message's IndexFile entries and TAGS hash, as index_entries finds them, for rows [from, to) of the
 * columns (the outputs and the topic hash kept between calls in a RowIndex); defined with
 * index_entries below.
 */
typedef struct {
    int32_t *counts;        /* entries per row */
    int64_t *tags;          /* TAGS hash per row */
    int64_t *hashes;        /* the entries' index hashes, in order */
    Py_ssize_t cap;         /* room in hashes */
    Py_ssize_t total;       /* entries so far; -1: hashes was too small */
    const uint8_t *last_topic;      /* the topic prefix_hash is of (NULL: none yet) */
    int32_t last_topic_len;
    uint32_t prefix_hash;
} RowIndex;

static int index_rows(const uint8_t *d, Py_ssize_t view_len, const int64_t *tp, const int32_t *tl, const int64_t *pp,
                      const int32_t *pl, const int32_t *sf, Py_ssize_t from, Py_ssize_t to, RowIndex *ix);

/* what match_entries checks an entry of a range against: its slot's queue id and topic, and the queue
 * offset of the range's entry o less o (claim_entries: the queue offset of its first entry, and where
 * its entries start and how many: one line of memory a claim reads) */
typedef struct {
    int64_t queue_id;
    int64_t base;
    const uint8_t *topic;
    int64_t topic_len;
    int64_t start, count;
} match_part;

/* rows' queue ids hashed into this many chains of ranges */
#define CLAIM_CHAINS 64

/*
 * The queue ranges rows claim entries of (claim_entries' tables, see there): per range r its part, the
 * next range of its chain, its entries ep/es from pb[r] to pb[r + 1]; chain[h]: the first range of the
 * queue ids that hash to h (-1: none).
 */
typedef struct {
    const int64_t *ep, *es, *pb;
    match_part *part;
    Py_ssize_t *next;
    Py_ssize_t nparts, entries;
    Py_ssize_t chain[CLAIM_CHAINS];
} ClaimTable;

/* Build t from claim_entries' tables; 1, 0 (tables that disagree: see claim_entries) or -1 (no memory).
 * Needs no GIL; claim_table_free after a 1. */
static int
claim_table_init(ClaimTable *t, Py_buffer *positions, Py_buffer *sizes, Py_buffer *bounds, Py_buffer *pslots,
                 Py_buffer *pfirsts, Py_buffer *qids, Py_buffer *toff, Py_buffer *tdata)
{
    Py_ssize_t entries = positions->len / 8, nslots = qids->len / 8, nparts = pslots->len / 8;
    const int64_t *pb = bounds->buf, *ps = pslots->buf, *pf = pfirsts->buf, *sq = qids->buf, *to = toff->buf;
    const uint8_t *td = tdata->buf;
    if (positions->len != entries * 8 || sizes->len != entries * 8 || bounds->len != (nparts + 1) * 8 ||
        pfirsts->len != nparts * 8 || nparts <= 0 || pb[0] != 0 || pb[nparts] != entries ||
        toff->len != (nslots + 1) * 8) {
        return 0;
    }
    for (Py_ssize_t r = 0; r < nparts; r++) {
        if (pb[r] > pb[r + 1]) {
            return 0;
        }
    }
    t->ep = positions->buf;
    t->es = sizes->buf;
    t->pb = pb;
    t->nparts = nparts;
    t->entries = entries;
    t->part = PyMem_RawMalloc((size_t)nparts * (sizeof(match_part) + sizeof(Py_ssize_t)));
    if (t->part == NULL) {
        return -1;
    }
    t->next = (Py_ssize_t *)(t->part + nparts);
    for (int k = 0; k < CLAIM_CHAINS; k++) {
        t->chain[k] = -1;
    }
    for (Py_ssize_t r = nparts - 1; r >= 0; r--) {
        int64_t s = ps[r];
        if (!(0 <= s && s < nslots && 0 <= to[s] && to[s] <= to[s + 1] && to[s + 1] <= tdata->len)) {
            PyMem_RawFree(t->part);
            return 0;
        }
        /* base: the first offset */
        t->part[r] = (match_part){sq[s], pf[r], td + to[s], to[s + 1] - to[s], pb[r], pb[r + 1] - pb[r]};
        t->next[r] = t->chain[(uint64_t)sq[s] % CLAIM_CHAINS];
        t->chain[(uint64_t)sq[s] % CLAIM_CHAINS] = r;
    }
    return 1;
}

static void
claim_table_free(ClaimTable *t)
{
    PyMem_RawFree(t->part);
}

/*
 * The entry a row claims (its topic d[tp:+tl] inside the view, checked by the caller): the entry of its
 * queue offset in the range of its queue id and topic, where that entry lies at the row's position with
 * the row's size; -1 where none does.
 */
static inline __attribute__((always_inline)) Py_ssize_t
claim_one(const ClaimTable *t, const uint8_t *topic, int32_t tl, int32_t qi, int64_t qo, int64_t position,
          int32_t size)
{
    const match_part *e = NULL;
    for (Py_ssize_t r = t->chain[(uint32_t)qi % CLAIM_CHAINS]; r >= 0; r = t->next[r]) {
        if (t->part[r].queue_id == qi && t->part[r].topic_len == tl && same_text(topic, t->part[r].topic, tl)) {
            e = t->part + r;
            break;
        }
    }
    /* its place in the range (unsigned: an offset below the range's first is past its end too) */
    uint64_t k = e != NULL ? (uint64_t)qo - (uint64_t)e->base : 0;
    if (e == NULL || k >= (uint64_t)e->count) {
        return -1;           /* no range holds its queue offset: not read */
    }
    Py_ssize_t o = e->start + (Py_ssize_t)k;
    return t->ep[o] == position && t->es[o] == size ? o : -1;
}

/*
 * Rows decode_region_indexed decodes before it finds their index entries: their bytes (about 230 KB of
 * the benchmark's messages) are still in the core's cache then, where after a whole batch (64k rows,
 * 15 MB) index_entries read each message's properties from memory again: 48 -> 16 ms a 500k-message
 * walk (2026-12-01, in process, thread time).
 */
#define INDEX_ROWS 1024
/* rows are indexed once their CRCs are checked: a bad CRC (strict) never drops rows indexed already */
_Static_assert(INDEX_ROWS % CHECK_ROWS == 0, "INDEX_ROWS must be a multiple of CHECK_ROWS");

/*
 * The walk of decode_region (and, ix not NULL, each row's index entries into ix, INDEX_ROWS rows
 * after they are decoded; tt not NULL, each row's topic numbered as it is decoded, tt->k -1 where
 * the table could not be allocated; ct not NULL, each row's claim of an entry (claim_one) into claims,
 * its fields just written: claim_entries read six columns of each row and its topic again, 82
 * instructions a row against 16 there and ~45 here); the GIL released by the caller.  Returns the
 * status; *n_out rows, *pos_out where it stopped, *blank_out a BLANK's size.  Inlined where fill, ix,
 * tt and ct are constants (decode_walk_plain, decode_region_indexed), so that each copy tests and
 * computes only what its fields need.
 */
static inline __attribute__((always_inline)) int
decode_walk(const uint8_t *d, Py_ssize_t pos, Py_ssize_t stop, Py_ssize_t limit, int64_t base, int strict,
            int fill, Cols *c, RowIndex *ix, TopicTable *tt, const ClaimTable *ct, int64_t *claims,
            Py_ssize_t view_len, Py_ssize_t *n_out, Py_ssize_t *pos_out, int32_t *blank_out)
{
    Py_ssize_t n = 0;
    int status = ST_DONE;
    int32_t blank = 0;
    Py_ssize_t checked = 0, bad = 0, indexed = 0;
    Py_ssize_t ahead = pos;
    while (n < c->cap && pos < stop) {
        /* lines before want: the last of a step's four then lies inside the view */
        Py_ssize_t want = (pos + WALK_AHEAD < limit ? pos + WALK_AHEAD : limit) - 3 * 64;
        for (; ahead < want; ahead += 4 * 64) {
            WALK_PREFETCH(d + ahead);
            WALK_PREFETCH(d + ahead + 64);
            WALK_PREFETCH(d + ahead + 2 * 64);
            WALK_PREFETCH(d + ahead + 3 * 64);
        }
        Py_ssize_t left = limit - pos;
        if (left < PREFIX_SIZE) {
            status = ST_END;
            for (Py_ssize_t k = 0; k < left; k++) {
                if (d[pos + k]) {
                    status = ST_BAD;
                }
            }
            break;
        }
        int32_t total = get_i32(d + pos), magic = get_i32(d + pos + 4);
        if (magic == BLANK_MAGIC) {
            status = ST_BLANK;
            blank = total;
            break;
        }
        if (magic != MESSAGE_MAGIC && magic != MESSAGE_MAGIC_V2) {
            status = total == 0 && magic == 0 ? ST_END : ST_BAD;
            break;
        }
        if (!decode_row(d + pos, left, total, magic, c, n, pos, base, fill)) {
            status = ST_BAD;
            break;
        }
        if (tt != NULL && !topic_number(tt, d, c->i8[C_TOPIC_POS], c->i4[C_TOPIC_LEN], n)) {
            tt->k = -1;
            tt = NULL;
        }
        if (ct != NULL) {       /* its entry while its bytes are in the cache (claim_entries takes it) */
            claims[n] = claim_one(ct, d + c->i8[C_TOPIC_POS][n], c->i4[C_TOPIC_LEN][n], c->i4[C_QUEUE_ID][n],
                                  c->i8[C_QUEUE_OFFSET][n], c->i8[C_POSITION][n], total);
        }
        n++;
        pos += total;
        if (n - checked == CHECK_ROWS) {
            if ((bad = check_crcs(d, c, checked, n)) < n && strict) {
                break;
            }
            checked = n;
        }
        if (ix != NULL && n - indexed == INDEX_ROWS) {     /* after the check above, on the same row */
            if (!index_rows(d, view_len, c->i8[C_TOPIC_POS], c->i4[C_TOPIC_LEN], c->i8[C_PROPS_POS],
                            c->i4[C_PROPS_LEN], c->i4[C_SYS_FLAG], indexed, n, ix)) {
                ix->total = -1;
            }
            indexed = n;
        }
    }
    if (checked < n) {
        bad = check_crcs(d, c, checked, n);
    }
    if (strict && bad < n) {        /* the rows before it decoded: message.decode raises at it first */
        n = bad;
        pos = (Py_ssize_t)(c->i8[C_POSITION][bad] - base);
        status = ST_BAD;
        blank = 0;
        while (tt != NULL && tt->k > 0 && tt->firsts[tt->k - 1] >= n) {     /* topics of dropped rows only */
            tt->k--;
        }
    }
    if (ix != NULL && indexed < n &&
        !index_rows(d, view_len, c->i8[C_TOPIC_POS], c->i4[C_TOPIC_LEN], c->i8[C_PROPS_POS], c->i4[C_PROPS_LEN],
                    c->i4[C_SYS_FLAG], indexed, n, ix)) {
        ix->total = -1;
    }
    *n_out = n;
    *pos_out = pos;
    *blank_out = blank;
    return status;
}

/*
 * decode_walk with no index entries or topic numbers, a copy of it for each fill the Spark reader's
 * usual queries decode (the value column: none; the Kafka connector's columns: times and properties)
 * and one for any other: with fill a variable, each message tested every group and computed where
 * the times and hosts lie, 21 instructions of a value query's 229 a message.
 */
static int
decode_walk_plain(const uint8_t *d, Py_ssize_t pos, Py_ssize_t stop, Py_ssize_t limit, int64_t base, int strict,
                  int fill, Cols *c, const ClaimTable *ct, int64_t *claims, Py_ssize_t view_len, Py_ssize_t *n_out,
                  Py_ssize_t *pos_out, int32_t *blank_out)
{
    if (ct != NULL) {
        switch (fill) {
        case 0:
            return decode_walk(d, pos, stop, limit, base, strict, 0, c, NULL, NULL, ct, claims, view_len, n_out,
                               pos_out, blank_out);
        case FILL_TIMES | FILL_PROPS:
            return decode_walk(d, pos, stop, limit, base, strict, FILL_TIMES | FILL_PROPS, c, NULL, NULL, ct, claims,
                               view_len, n_out, pos_out, blank_out);
        default:
            return decode_walk(d, pos, stop, limit, base, strict, fill, c, NULL, NULL, ct, claims, view_len, n_out,
                               pos_out, blank_out);
        }
    }
    switch (fill) {
    case 0:
        return decode_walk(d, pos, stop, limit, base, strict, 0, c, NULL, NULL, NULL, NULL, view_len, n_out, pos_out,
                           blank_out);
    case FILL_TIMES | FILL_PROPS:
        return decode_walk(d, pos, stop, limit, base, strict, FILL_TIMES | FILL_PROPS, c, NULL, NULL, NULL, NULL,
                           view_len, n_out, pos_out, blank_out);
    default:
        return decode_walk(d, pos, stop, limit, base, strict, fill, c, NULL, NULL, NULL, NULL, view_len, n_out,
                           pos_out, blank_out);
    }
}

/*
 * decode_region(view, pos, stop, limit, base, i8, i4, u8, strict, fill=FILL_ALL, claim=None)
 *     -> (n, pos, status, blank_size)
 *
 * Walk the records of view[pos:limit] that start before stop, one row each into
 * the column blocks (the fields fill names, see decode_row), until they are full.
 * status: ST_DONE (stop reached or rows full), ST_BLANK (a BLANK at pos, blank_size
 * its size), ST_END (unwritten zeros at pos), ST_BAD (message.decode would raise at
 * pos; strict: a CRC mismatch too, else it only clears crc_ok).  Never reads outside
 * view[:limit].  claim: a tuple (positions, sizes, bounds, part_slots, part_firsts, queue_ids,
 * topic_offsets, topic_data, claims), claim_entries' tables of a read's queue ranges and an int64
 * per row: claims[i] the entry row i claims (-1: none), as claim_entries finds it, for the rows
 * decoded (n, those strict keeps); claim_entries then takes them (its claims), reading no row
 * again.  Releases the GIL.
 */
static PyObject *
decode_region(PyObject *module, PyObject *args)
{
    Py_buffer view, i8, i4, u8, tables[9];
    Py_ssize_t pos, stop, limit;
    long long base;
    int strict, fill = FILL_ALL, held = 0, built = 0;
    PyObject *claim = Py_None;
    if (!PyArg_ParseTuple(args, "y*nnnLw*w*w*p|iO", &view, &pos, &stop, &limit, &base, &i8, &i4, &u8, &strict,
                          &fill, &claim)) {
        return NULL;
    }
    Cols c;
    ClaimTable ct;
    PyObject *ret = NULL;
    if (!cols_init(&c, &i8, &i4, &u8)) {
        goto done;
    }
    if (limit > view.len || pos < 0) {
        PyErr_SetString(PyExc_ValueError, "expected 0 <= pos and limit <= len(view)");
        goto done;
    }
    if (claim != Py_None) {
        if (!PyTuple_Check(claim) ||
            !PyArg_ParseTuple(claim, "y*y*y*y*y*y*y*y*w*", &tables[0], &tables[1], &tables[2], &tables[3], &tables[4],
                              &tables[5], &tables[6], &tables[7], &tables[8])) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_TypeError, "expected a tuple of claim_entries' tables and the claims");
            }
            goto done;
        }
        held = 1;
        built = tables[8].len >= c.cap * (Py_ssize_t)sizeof(int64_t) ?
                claim_table_init(&ct, &tables[0], &tables[1], &tables[2], &tables[3], &tables[4], &tables[5],
                                 &tables[6], &tables[7]) : 0;
        if (built <= 0) {
            if (built < 0) {
                PyErr_NoMemory();
            } else {
                PyErr_SetString(PyExc_ValueError, "expected claim tables as claim_entries takes them and a claim "
                                                  "for each row");
            }
            built = 0;
            goto done;
        }
    }
    Py_ssize_t n;
    int status;
    int32_t blank;
    Py_BEGIN_ALLOW_THREADS
    status = decode_walk_plain(view.buf, pos, stop, limit, base, strict, fill, &c, built ? &ct : NULL,
                               built ? tables[8].buf : NULL, view.len, &n, &pos, &blank);
    Py_END_ALLOW_THREADS
    ret = Py_BuildValue("nnii", n, pos, status, blank);
done:
    if (built) {
        claim_table_free(&ct);
    }
    for (int k = 0; held && k < 9; k++) {
        PyBuffer_Release(&tables[k]);
    }
    PyBuffer_Release(&view);
    PyBuffer_Release(&i8);
    PyBuffer_Release(&i4);
    PyBuffer_Release(&u8);
    return ret;
}

/*
 * decode_region_indexed(view, pos, stop, limit, base, i8, i4, u8, strict, counts, hashes, tags, topics,
 *                       firsts) -> (n, pos, status, blank_size, total, k)
 *
 * decode_region with every field filled, and each row's IndexFile entries and TAGS hash as
 * index_entries gives them (counts: n int32, hashes: total int64, tags: n int64), found while
 * its bytes are in the cache (INDEX_ROWS), and its topic's number as topic_codes gives it (topics:
 * n int32, numbers 0 .. k - 1 by first appearance; firsts: for each number the first row holding it,
 * int64), found as it is decoded.  total is -1 where hashes was too small (sum(props_len) // 2 + n
 * always does): index_entries then; k is -1 where the topics' table could not be allocated:
 * topic_codes then.  Releases the GIL.
 */
static PyObject *
decode_region_indexed(PyObject *module, PyObject *args)
{
    Py_buffer view, i8, i4, u8, counts, hashes, tags, topics, firsts;
    Py_ssize_t pos, stop, limit;
    long long base;
    int strict;
    if (!PyArg_ParseTuple(args, "y*nnnLw*w*w*pw*w*w*w*w*", &view, &pos, &stop, &limit, &base, &i8, &i4, &u8,
                          &strict, &counts, &hashes, &tags, &topics, &firsts)) {
        return NULL;
    }
    Cols c;
    PyObject *ret = NULL;
    if (!cols_init(&c, &i8, &i4, &u8)) {
        goto done;
    }
    if (limit > view.len || pos < 0 || counts.len < c.cap * (Py_ssize_t)sizeof(int32_t) ||
        tags.len < c.cap * (Py_ssize_t)sizeof(int64_t) || topics.len < c.cap * (Py_ssize_t)sizeof(int32_t) ||
        firsts.len < c.cap * (Py_ssize_t)sizeof(int64_t) || c.cap >= INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "expected 0 <= pos, limit <= len(view) and counts, tags, topics and "
                                          "firsts of a row each");
        goto done;
    }
    RowIndex ix = {counts.buf, tags.buf, hashes.buf, hashes.len / (Py_ssize_t)sizeof(int64_t), 0, NULL, -1, 0};
    TopicTable tt = {topics.buf, firsts.buf, 0, -1, NULL, 0, c.cap};
    Py_ssize_t n;
    int status;
    int32_t blank;
    Py_BEGIN_ALLOW_THREADS
    status = decode_walk(view.buf, pos, stop, limit, base, strict, FILL_ALL, &c, &ix, &tt, NULL, NULL, view.len, &n,
                         &pos, &blank);
    free(tt.table);
    Py_END_ALLOW_THREADS
    ret = Py_BuildValue("nniini", n, pos, status, blank, ix.total, (int)tt.k);
done:
    PyBuffer_Release(&view);
    PyBuffer_Release(&i8);
    PyBuffer_Release(&i4);
    PyBuffer_Release(&u8);
    PyBuffer_Release(&counts);
    PyBuffer_Release(&hashes);
    PyBuffer_Release(&tags);
    PyBuffer_Release(&topics);
    PyBuffer_Release(&firsts);
    return ret;
}

/*
 * decode_at(view, positions, limit, base, i8, i4, u8, strict, fill=FILL_ALL) -> n
 *
 * The message at each view position (int64) in turn, one row each, until one is
 * not a message message.decode accepts (a BLANK, zeros or damage): n <
 * len(positions) then names it.  Never reads outside view[:limit].  Releases the GIL.
 */
static PyObject *
decode_at(PyObject *module, PyObject *args)
{
    Py_buffer view, positions, i8, i4, u8;
    Py_ssize_t limit;
    long long base;
    int strict, fill = FILL_ALL;
    if (!PyArg_ParseTuple(args, "y*y*nLw*w*w*p|i", &view, &positions, &limit, &base, &i8, &i4, &u8, &strict,
                          &fill)) {
        return NULL;
    }
    Cols c;
    PyObject *ret = NULL;
    if (!cols_init(&c, &i8, &i4, &u8)) {
        goto done;
    }
    Py_ssize_t count = positions.len / (Py_ssize_t)sizeof(int64_t);
    if (limit > view.len || limit < 0 || c.cap < count || positions.len % (Py_ssize_t)sizeof(int64_t)) {
        PyErr_SetString(PyExc_ValueError, "expected limit <= len(view), int64 positions and a row for each");
        goto done;
    }
    const uint8_t *d = view.buf;
    const int64_t *at = positions.buf;
    Py_ssize_t n = 0, checked = 0, bad = 0;
    Py_BEGIN_ALLOW_THREADS
    for (; n < count; n++) {
        int64_t pos = at[n];
        if (pos < 0 || limit - pos < PREFIX_SIZE) {
            break;
        }
        int32_t total = get_i32(d + pos), magic = get_i32(d + pos + 4);
        if ((magic != MESSAGE_MAGIC && magic != MESSAGE_MAGIC_V2) ||
            !decode_row(d + pos, limit - pos, total, magic, &c, n, pos, base, fill)) {
            break;
        }
        if (n + 1 - checked == CHECK_ROWS) {
            if ((bad = check_crcs(d, &c, checked, n + 1)) <= n && strict) {
                break;
            }
            checked = n + 1;
        }
    }
    if (checked < n) {
        bad = check_crcs(d, &c, checked, n);
    }
    if (strict && bad < n) {
        n = bad;
    }
    Py_END_ALLOW_THREADS
    ret = PyLong_FromSsize_t(n);
done:
    PyBuffer_Release(&view);
    PyBuffer_Release(&positions);
    PyBuffer_Release(&i8);
    PyBuffer_Release(&i4);
    PyBuffer_Release(&u8);
    return ret;
}

/*
 * The columns are filled a row at a time from bytes spread over the map (a message's topic or
 * properties every few hundred bytes), and the next rows' bytes are mostly not in the cache yet:
 * asking for those PREFETCH_AHEAD rows ahead overlaps their loads with this row's work.  A
 * prefetch never faults; the position is still kept inside the view (one unsigned comparison: len
 * is never negative).
 */
#define PREFETCH_AHEAD 8
#if defined(__GNUC__)
#define PREFETCH(base, len, at) \
    do { if ((uint64_t)(at) < (uint64_t)(len)) __builtin_prefetch((base) + (at)); } while (0)
#else
#define PREFETCH(base, len, at) do { } while (0)
#endif
/* The first and the last cache line of base[at:at + n]: a short field mostly straddles two lines,
   and asking for the first only left the second a miss on most rows.  Per 1M messages (100 B
   bodies, a tag and 2 keys), property_columns took 0.21 s -> 0.12-0.14 s, gather_columns
   0.054-0.065 s -> 0.048-0.053 s. */
#define PREFETCH_SPAN(base, len, at, n) do { PREFETCH(base, len, at); PREFETCH(base, len, (at) + (n) - 1); } while (0)

/*
 * gather(view, starts, lengths, offsets, out) -> None
 *
 * Copy view[starts[i]:starts[i]+lengths[i]] one after another into out, and
 * their int32 offsets (n + 1) into offsets (int64 starts, int32 lengths;
 * lengths <= 0 copy nothing).  Every slice is bounds-checked.  Releases the GIL.
 */
static PyObject *
gather(PyObject *module, PyObject *args)
{
    Py_buffer view, starts, lengths, offsets, out;
    if (!PyArg_ParseTuple(args, "y*y*y*w*w*", &view, &starts, &lengths, &offsets, &out)) {
        return NULL;
    }
    Py_ssize_t n = lengths.len / (Py_ssize_t)sizeof(int32_t);
    const int64_t *s = starts.buf;
    const int32_t *l = lengths.buf;
    int32_t *off = offsets.buf;
    const uint8_t *d = view.buf;
    uint8_t *o = out.buf;
    Py_ssize_t at = 0;
    int ok = starts.len == n * (Py_ssize_t)sizeof(int64_t) && offsets.len >= (n + 1) * (Py_ssize_t)sizeof(int32_t);
    Py_BEGIN_ALLOW_THREADS
    if (ok) {
        off[0] = 0;
    }
    for (Py_ssize_t i = 0; ok && i < n; i++) {
        if (l[i] > 0) {
            if (s[i] < 0 || s[i] + l[i] > view.len || at + l[i] > out.len || at + l[i] > INT32_MAX) {
                ok = 0;
                break;
            }
            copy_short(o + at, d + s[i], (size_t)l[i]);
            at += l[i];
        }
        off[i + 1] = (int32_t)at;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    PyBuffer_Release(&starts);
    PyBuffer_Release(&lengths);
    PyBuffer_Release(&offsets);
    PyBuffer_Release(&out);
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "expected slices inside the view and outputs large enough");
        return NULL;
    }
    Py_RETURN_NONE;
}

/* The int64 columns of encode_restored, in its `ints` tuple's order: the v1 header's numbers. */
enum {
    ER_TOTAL_SIZE, ER_QUEUE_ID, ER_FLAG, ER_QUEUE_OFFSET, ER_PHYSICAL_OFFSET, ER_SYS_FLAG, ER_BORN_TS,
    ER_BORN_PORT, ER_STORE_TS, ER_STORE_PORT, ER_RECONSUME, ER_PREPARED, ER_INTS
};
/* How many rows ahead encode_restored starts loading a row's body and properties. */
#define ENCODE_AHEAD 8

/*
 * encode_restored(ints, born_ip, store_ip, body, body_starts, body_lengths, topic_fields, topic_at,
 *                 topic_code, props, prop_starts, prop_lengths, out, topic_pos, props_pos) -> bytes written
 *
 * The v1 messages (IPv4 hosts) of n rows, one after another into out, as the RocketMQ broker
 * lays them out (4.9.7 CommitLog.MessageExtEncoder.encode): the 88-byte header of the ints
 * (a tuple of ER_INTS int64 columns: each i4 field the column's low 32 bits, as numpy's cast),
 * born_ip / store_ip (4 bytes a row) and the body CRC (zlib CRC-32 & 0x7FFFFFFF of the body), the
 * body, the topic field (topic_fields[topic_at[topic_code[i]]:], its length byte and the topic), the
 * properties' i2 length and the properties.  Bodies and properties are slices (int64 starts,
 * int32 lengths >= 0) of their buffers, in any order (each row's are asked for ENCODE_AHEAD rows
 * ahead).  Fills topic_pos and props_pos (int64, n each): where each row's topic and properties
 * lie in out.  arrowwrite._layout_py is the reference (tests/test_rocketmq_speedups.py).  Every
 * slice and length is checked (ValueError).  Releases the GIL.
 */
static PyObject *
encode_restored(PyObject *module, PyObject *args)
{
    PyObject *ints;
    Py_buffer col[ER_INTS], born, store, body, bs, bl, topics, tat, tcode, props, ps, pl, out, tpos, ppos;
    if (!PyArg_ParseTuple(args, "O!y*y*y*y*y*y*y*y*y*y*y*w*w*w*", &PyTuple_Type, &ints, &born, &store, &body,
                          &bs, &bl, &topics, &tat, &tcode, &props, &ps, &pl, &out, &tpos, &ppos)) {
        return NULL;
    }
    Py_buffer *held[] = {&born, &store, &body, &bs, &bl, &topics, &tat, &tcode, &props, &ps, &pl, &out, &tpos,
                         &ppos};
    int got = 0, ok = PyTuple_GET_SIZE(ints) == ER_INTS;
    for (; ok && got < ER_INTS; got++) {
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(ints, got), &col[got], PyBUF_SIMPLE) < 0) {
            ok = -1;
            break;
        }
    }
    Py_ssize_t n = bl.len / (Py_ssize_t)sizeof(int32_t), ntopics = tat.len / (Py_ssize_t)sizeof(int64_t), at = 0;
    const char *problem = "expected 12 int64 columns, 4-byte hosts, int32 codes and lengths and int64 "
                          "starts of n rows each, and outputs large enough";
    if (ok > 0) {
        ok = born.len == 4 * n && store.len == 4 * n && bs.len == 8 * n && pl.len == 4 * n && ps.len == 8 * n
             && tcode.len == 4 * n && tpos.len >= 8 * n && ppos.len >= 8 * n;
        for (int j = 0; ok && j < ER_INTS; j++) {
            ok = col[j].len == 8 * n;
        }
    }
    if (ok > 0) {
        const int64_t *c[ER_INTS];
        for (int j = 0; j < ER_INTS; j++) {
            c[j] = col[j].buf;
        }
        const uint8_t *bip = born.buf, *sip = store.buf, *bd = body.buf, *td = topics.buf, *pd = props.buf;
        const int64_t *bst = bs.buf, *pst = ps.buf, *ta = tat.buf;
        const int32_t *bln = bl.buf, *pln = pl.buf, *code = tcode.buf;
        int64_t *tp = tpos.buf, *pp = ppos.buf;
        uint8_t *o = out.buf;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < n; i++) {
            if (i + ENCODE_AHEAD < n) {
                Py_ssize_t a = i + ENCODE_AHEAD;
                if (bst[a] >= 0 && bln[a] > 0 && bst[a] + bln[a] <= body.len) {
                    prefetch_span(bd + bst[a], bln[a]);
                }
                if (pst[a] >= 0 && pln[a] > 0 && pst[a] + pln[a] <= props.len) {
                    prefetch_span(pd + pst[a], pln[a]);
                }
            }
            int64_t b0 = bst[i], blen = bln[i], p0 = pst[i], plen = pln[i];
            int32_t t = code[i];
            if (b0 < 0 || blen < 0 || b0 + blen > body.len || p0 < 0 || plen < 0 || p0 + plen > props.len
                || t < 0 || t >= ntopics || ta[t] < 0 || ta[t] >= topics.len) {
                ok = 0;
                problem = "expected slices inside the bodies and properties and topic codes inside the topics";
                break;
            }
            const uint8_t *topic = td + ta[t];
            int64_t tlen = topic[0];
            if (ta[t] + 1 + tlen > topics.len) {
                ok = 0;
                problem = "expected topic fields inside topic_fields";
                break;
            }
            int64_t size = HEADER_V4 + blen + 1 + tlen + 2 + plen;
            if (at + size > out.len) {
                ok = 0;
                problem = "expected an output as large as the messages";
                break;
            }
            uint8_t *w = o + at;
            uint32_t crc = body_crc32(bd + b0, (size_t)blen) & 0x7FFFFFFFu;
            w = put_i32(w, (int32_t)c[ER_TOTAL_SIZE][i]);
            w = put_i32(w, MESSAGE_MAGIC);
            w = put_i32(w, (int32_t)crc);
            w = put_i32(w, (int32_t)c[ER_QUEUE_ID][i]);
            w = put_i32(w, (int32_t)c[ER_FLAG][i]);
            w = put_i64(w, c[ER_QUEUE_OFFSET][i]);
            w = put_i64(w, c[ER_PHYSICAL_OFFSET][i]);
            w = put_i32(w, (int32_t)c[ER_SYS_FLAG][i]);
            w = put_i64(w, c[ER_BORN_TS][i]);
            memcpy(w, bip + 4 * i, 4);
            w = put_i32(w + 4, (int32_t)c[ER_BORN_PORT][i]);
            w = put_i64(w, c[ER_STORE_TS][i]);
            memcpy(w, sip + 4 * i, 4);
            w = put_i32(w + 4, (int32_t)c[ER_STORE_PORT][i]);
            w = put_i32(w, (int32_t)c[ER_RECONSUME][i]);
            w = put_i64(w, c[ER_PREPARED][i]);
            w = put_i32(w, (int32_t)blen);
            copy_short(w, bd + b0, (size_t)blen);
            w += blen;
            tp[i] = (w - o) + 1;
            copy_short(w, topic, (size_t)(1 + tlen));
            w += 1 + tlen;
            w = put_i16(w, (int32_t)plen);
            pp[i] = w - o;
            copy_short(w, pd + p0, (size_t)plen);
            at += size;
        }
        Py_END_ALLOW_THREADS
    }
    for (int j = 0; j < got; j++) {
        PyBuffer_Release(&col[j]);
    }
    for (size_t j = 0; j < sizeof(held) / sizeof(held[0]); j++) {
        PyBuffer_Release(held[j]);
    }
    if (ok < 0) {
        return NULL;
    }
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, problem);
        return NULL;
    }
    return PyLong_FromSsize_t(at);
}

#define MAX_GATHER_SPECS 16

/*
 * gather_columns(view, rows, chunk, specs) -> None
 *
 * Several gathers at once: specs is a tuple of (starts, lengths, row_items, offsets, out), each
 * filled as gather fills it; row_items is None for one item per row, else the rows' int32 item
 * offsets (rows + 1: row r holds items row_items[r] to row_items[r + 1]).  The rows are taken
 * `chunk` at a time through every spec, so the bytes of a chunk of messages are copied into
 * all the columns while they are in the cache (a column at a time over a whole batch reads
 * them from memory again for each column).  Every slice is bounds-checked.  Releases the GIL.
 */
typedef struct {
    Py_buffer starts, lengths, items, offsets, out;
    int has_items;
    Py_ssize_t n, at;
} GatherSpec;

static PyObject *
gather_columns(PyObject *module, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t rows, chunk;
    PyObject *specs;
    if (!PyArg_ParseTuple(args, "y*nnO!", &view, &rows, &chunk, &PyTuple_Type, &specs)) {
        return NULL;
    }
    GatherSpec g[MAX_GATHER_SPECS];
    Py_ssize_t count = 0, want = PyTuple_GET_SIZE(specs);
    int ok = want <= MAX_GATHER_SPECS && rows >= 0 && chunk > 0;
    for (; ok && count < want; count++) {
        PyObject *spec = PyTuple_GET_ITEM(specs, count), *items;
        GatherSpec *k = &g[count];
        if (!PyTuple_Check(spec) ||
            !PyArg_ParseTuple(spec, "y*y*Ow*w*", &k->starts, &k->lengths, &items, &k->offsets, &k->out)) {
            ok = 0;
            break;
        }
        k->has_items = items != Py_None;
        if (k->has_items && PyObject_GetBuffer(items, &k->items, PyBUF_SIMPLE) < 0) {
            PyBuffer_Release(&k->starts);
            PyBuffer_Release(&k->lengths);
            PyBuffer_Release(&k->offsets);
            PyBuffer_Release(&k->out);
            ok = 0;
            break;
        }
        k->n = k->lengths.len / (Py_ssize_t)sizeof(int32_t);
        k->at = 0;
        if (k->starts.len != k->n * (Py_ssize_t)sizeof(int64_t) ||
            k->offsets.len < (k->n + 1) * (Py_ssize_t)sizeof(int32_t) ||
            (k->has_items ? k->items.len < (rows + 1) * (Py_ssize_t)sizeof(int32_t) : k->n != rows)) {
            count++;
            ok = 0;
            break;
        }
    }
    if (ok) {
        const uint8_t *d = view.buf;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t k = 0; k < count; k++) {
            ((int32_t *)g[k].offsets.buf)[0] = 0;
        }
        for (Py_ssize_t r0 = 0; ok && r0 < rows; r0 += chunk) {
            Py_ssize_t r1 = r0 + chunk < rows ? r0 + chunk : rows;
            for (Py_ssize_t k = 0; ok && k < count; k++) {
                GatherSpec *spec = &g[k];
                const int32_t *items = spec->has_items ? spec->items.buf : NULL;
                Py_ssize_t i0 = items ? items[r0] : r0, i1 = items ? items[r1] : r1;
                if (i0 < 0 || i1 < i0 || i1 > spec->n) {
                    ok = 0;
                    break;
                }
                const int64_t *s = spec->starts.buf;
                const int32_t *l = spec->lengths.buf;
                int32_t *off = spec->offsets.buf;
                uint8_t *o = spec->out.buf;
                Py_ssize_t at = spec->at, cap = spec->out.len;
                for (Py_ssize_t i = i0; i < i1; i++) {
                    if (i + PREFETCH_AHEAD < i1) {
                        PREFETCH_SPAN(d, view.len, s[i + PREFETCH_AHEAD], l[i + PREFETCH_AHEAD]);
                    }
                    if (l[i] > 0) {
                        if (s[i] < 0 || s[i] + l[i] > view.len || at + l[i] > cap || at + l[i] > INT32_MAX) {
                            ok = 0;
                            break;
                        }
                        copy_short(o + at, d + s[i], (size_t)l[i]);
                        at += l[i];
                    }
                    off[i + 1] = (int32_t)at;
                }
                spec->at = at;
            }
        }
        for (Py_ssize_t k = 0; ok && k < count; k++) {   /* items no row holds: none copied */
            if (g[k].has_items && ((const int32_t *)g[k].items.buf)[rows] != g[k].n) {
                ok = 0;
            }
        }
        Py_END_ALLOW_THREADS
    }
    for (Py_ssize_t k = 0; k < count; k++) {
        PyBuffer_Release(&g[k].starts);
        PyBuffer_Release(&g[k].lengths);
        if (g[k].has_items) {
            PyBuffer_Release(&g[k].items);
        }
        PyBuffer_Release(&g[k].offsets);
        PyBuffer_Release(&g[k].out);
    }
    PyBuffer_Release(&view);
    if (!ok) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_ValueError, "expected specs of slices inside the view, item offsets "
                            "covering every item and outputs large enough");
        }
        return NULL;
    }
    Py_RETURN_NONE;
}

/*
 * split_properties(view, starts, lengths, item_offsets, names, name_lens, values, value_lens,
 *                  tags, tags_lens, token_offsets, tokens, token_lens) -> (items, tokens)
 *
 * (tags_lens is -1 for a message without TAGS; a message's first KEYS token is
 * tokens[token_offsets[i]] when token_offsets[i + 1] > token_offsets[i].)
 *
 * Each properties string view[starts[i]:+lengths[i]] split as message.decode_properties:
 * items NAME 0x01 VALUE separated by 0x02, items without 0x01 or with an empty name or
 * value skipped (MessageDecoder.string2messageProperties), a repeated name keeps its
 * first place and takes the last value.  Per message: item_offsets
 * (n + 1 int32), its TAGS value in tags/tags_lens (-1: none), and the non-empty
 * space-separated tokens of its KEYS value (token_offsets n + 1).  Items and
 * tokens are view positions (int64) and lengths (int32).  Returns (-1, -1) when
 * the item or token outputs are too small (sum(lengths) // 2 + n each always do).
 */
static PyObject *
split_properties(PyObject *module, PyObject *args)
{
    Py_buffer b[13];
    if (!PyArg_ParseTuple(args, "y*y*y*w*w*w*w*w*w*w*w*w*w*", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5], &b[6],
                          &b[7], &b[8], &b[9], &b[10], &b[11], &b[12])) {
        return NULL;
    }
    const uint8_t *d = b[0].buf;
    const int64_t *starts = b[1].buf;
    const int32_t *lens = b[2].buf;
    int32_t *item_off = b[3].buf, *name_len = b[5].buf, *val_len = b[7].buf, *tags_len = b[9].buf;
    int64_t *name_pos = b[4].buf, *val_pos = b[6].buf, *tags_pos = b[8].buf, *tok_pos = b[11].buf;
    int32_t *tok_off = b[10].buf, *tok_len = b[12].buf;
    Py_ssize_t n = b[2].len / (Py_ssize_t)sizeof(int32_t);
    Py_ssize_t item_cap = b[5].len / (Py_ssize_t)sizeof(int32_t), tok_cap = b[12].len / (Py_ssize_t)sizeof(int32_t);
    int ok = b[1].len == n * 8 && b[3].len >= (n + 1) * 4 && b[8].len >= n * 8 && b[9].len >= n * 4 &&
             b[10].len >= (n + 1) * 4 && b[4].len >= item_cap * 8 && b[6].len >= item_cap * 8 &&
             b[7].len >= item_cap * 4 && b[11].len >= tok_cap * 8;
    Py_ssize_t items = 0, tokens = 0;
    int full = 0;
    if (ok) {
        item_off[0] = 0;
        tok_off[0] = 0;
    }
    for (Py_ssize_t i = 0; ok && !full && i < n; i++) {
        int64_t s = starts[i], e = s + lens[i];
        if (s < 0 || e > b[0].len || lens[i] < 0) {
            ok = 0;
            break;
        }
        Py_ssize_t first = items;
        int64_t p = s;
        while (!full && lens[i] > 0 && p <= e) {
            const uint8_t *q = memchr(d + p, PROPERTY_SEPARATOR, (size_t)(e - p));
            int64_t item_end = q ? q - d : e;
            const uint8_t *sep = memchr(d + p, NAME_VALUE_SEPARATOR, (size_t)(item_end - p));
            /* MessageDecoder.string2messageProperties: kvSepIndex > index && kvSepIndex < newIndex - 1 */
            if (sep && sep > d + p && sep < d + item_end - 1) {
                int64_t nl = sep - (d + p);
                Py_ssize_t k = first;
                for (; k < items; k++) {
                    if (name_len[k] == nl && memcmp(d + name_pos[k], d + p, (size_t)nl) == 0) {
                        break;
                    }
                }
                if (k == items) {
                    if (items >= item_cap) {
                        full = 1;
                        break;
                    }
                    name_pos[k] = p;
                    name_len[k] = (int32_t)nl;
                    items++;
                }
                val_pos[k] = p + nl + 1;
                val_len[k] = (int32_t)(item_end - (p + nl + 1));
            }
            p = item_end + 1;
        }
        item_off[i + 1] = (int32_t)items;
        tags_pos[i] = 0;
        tags_len[i] = -1;
        for (Py_ssize_t k = first; !full && k < items; k++) {
            if (name_len[k] != PROPERTY_NAME_LEN) {
                continue;
            }
            const uint8_t *nm = d + name_pos[k];
            if (memcmp(nm, "TAGS", PROPERTY_NAME_LEN) == 0) {
                tags_pos[i] = val_pos[k];
                tags_len[i] = val_len[k];
            } else if (memcmp(nm, "KEYS", PROPERTY_NAME_LEN) == 0) {
                int64_t t = val_pos[k], te = t + val_len[k];
                while (!full && t < te) {
                    const uint8_t *sp = memchr(d + t, KEY_SEPARATOR, (size_t)(te - t));
                    int64_t tok_end = sp ? sp - d : te;
                    if (tok_end > t) {
                        if (tokens >= tok_cap) {
                            full = 1;
                            break;
                        }
                        tok_pos[tokens] = t;
                        tok_len[tokens] = (int32_t)(tok_end - t);
                        tokens++;
                    }
                    t = tok_end + 1;
                }
            }
        }
        tok_off[i + 1] = (int32_t)tokens;
    }
    for (int k = 0; k < 13; k++) {
        PyBuffer_Release(&b[k]);
    }
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "expected properties inside the view and outputs of the documented sizes");
        return NULL;
    }
    if (full) {
        return Py_BuildValue("nn", (Py_ssize_t)-1, (Py_ssize_t)-1);
    }
    return Py_BuildValue("nn", items, tokens);
}

/*
 * The next item of properties s[0:e] from *p: its name s[*item:*sep] and value s[*sep + 1:*end] (the
 * name ends at the item's first NAME_VALUE_SEPARATOR; *sep is -1 when it has none, and then it is
 * no item), *p moved past its PROPERTY_SEPARATOR.  0 when no item starts at *p (*p > e).  Items
 * are short: glibc's memchr finds a byte in one vector compare, faster than a loop over them.
 */
static inline int
next_item(const uint8_t *s, int64_t *p, int64_t e, int64_t *item, int64_t *sep, int64_t *end)
{
    if (*p > e) {
        return 0;
    }
    const uint8_t *q = memchr(s + *p, PROPERTY_SEPARATOR, (size_t)(e - *p));
    *item = *p;
    *end = q ? q - s : e;
    const uint8_t *x = memchr(s + *p, NAME_VALUE_SEPARATOR, (size_t)(*end - *p));
    *sep = x ? x - s : -1;
    *p = *end + 1;
    return 1;
}

/* One property item of a message while property_columns splits it: view positions and lengths. */
typedef struct {
    int64_t name, value;
    int32_t name_len, value_len;
} PropItem;

/* An output column of property_columns: int32 offsets (one more than its values) and data. */
typedef struct {
    int32_t *off;
    uint8_t *data;
    Py_ssize_t count, off_cap, at, cap;
} OutColumn;

/* Append s[0:n] as the next value of o; 0 when o is full. */
static inline int
out_put(OutColumn *o, const uint8_t *s, Py_ssize_t n)
{
    if (o->count + 1 >= o->off_cap || o->at + n > o->cap) {
        return 0;
    }
    copy_short(o->data + o->at, s, (size_t)n);
    o->at += n;
    o->off[++o->count] = (int32_t)o->at;
    return 1;
}

/* A message's items while property_columns splits it (grown as needed, reused from row to row). */
typedef struct {
    PropItem *items;
    Py_ssize_t m, cap;
} ItemList;

/* Add the item d[item:end] whose name ends at sep to l: a name seen already takes the value in
   its first place (message.decode_properties keeps the last value).  0 when out of memory. */
static inline int
take_item(ItemList *l, const uint8_t *d, int64_t item, int64_t sep, int64_t end)
{
    int32_t nl = (int32_t)(sep - item);
    Py_ssize_t k = 0;
    while (k < l->m && !(l->items[k].name_len == nl && same_text(d + l->items[k].name, d + item, nl))) {
        k++;
    }
    if (k == l->m) {
        if (l->m == l->cap) {
            Py_ssize_t grown = l->cap ? 2 * l->cap : 16;
            PropItem *more = realloc(l->items, (size_t)grown * sizeof(PropItem));
            if (more == NULL) {
                return 0;
            }
            l->items = more;
            l->cap = grown;
        }
        l->items[k].name = item;
        l->items[k].name_len = nl;
        l->m++;
    }
    l->items[k].value = sep + 1;
    l->items[k].value_len = (int32_t)(end - sep - 1);
    return 1;
}

#if defined(__SSE2__)
#include <emmintrin.h>
#define HAVE_SEPARATOR_MASKS 1
/* Bit k of *ones and *twos: whether p[k] is NAME_VALUE_SEPARATOR or PROPERTY_SEPARATOR, k < 16 * blocks
   (blocks at most 4; the bits after are 0; p[0:64] must lie inside the view).  Only the blocks the
   properties take: a message's lone 12-byte KEYS item took four. */
static inline void
separator_masks(const uint8_t *p, int blocks, uint64_t *ones, uint64_t *twos)
{
    const __m128i c1 = _mm_set1_epi8(NAME_VALUE_SEPARATOR), c2 = _mm_set1_epi8(PROPERTY_SEPARATOR);
    uint64_t a = 0, b = 0;
    for (int k = 0; k < blocks; k++) {
        __m128i v = _mm_loadu_si128((const __m128i *)(p + 16 * k));
        a |= (uint64_t)(uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(v, c1)) << (16 * k);
        b |= (uint64_t)(uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(v, c2)) << (16 * k);
    }
    *ones = a;
    *twos = b;
}

#endif

/*
 * property_columns' loop over the messages (see there), ok its checks' answer; returns 1, 0 (an output
 * too small) or -1 (no memory).  Inlined in two copies: the key alone (all and tokens_too 0, constants:
 * no test of either a message) and any other columns.
 */
static inline __attribute__((always_inline)) int
property_rows(const uint8_t *d, Py_ssize_t view_len, const int64_t *starts, const int32_t *lens, Py_ssize_t n,
              int all, int tokens_too, int ok, int32_t *item_off, int32_t *token_off, uint8_t *tag_valid,
              uint8_t *key_valid, OutColumn *names_out, OutColumn *values_out, OutColumn *tags_out,
              OutColumn *tokens_out, OutColumn *keys_out, ItemList *items_list, Py_ssize_t *tag_nulls_out,
              Py_ssize_t *key_nulls_out)
{
    int key_only = !all && !tokens_too;
    OutColumn names = *names_out, values = *values_out, tags = *tags_out, tokens = *tokens_out, keys = *keys_out;
    ItemList items = *items_list;
    Py_ssize_t tag_nulls = 0, key_nulls = 0;
    for (Py_ssize_t i = 0; ok > 0 && i < n; i++) {
        int64_t s = starts[i], e = s + lens[i];
        if (s < 0 || lens[i] < 0 || e > view_len) {
            ok = 0;
            break;
        }
        if (i + PREFETCH_AHEAD < n) {
            /* the whole window the short-properties path loads */
            PREFETCH_SPAN(d, view_len, starts[i + PREFETCH_AHEAD], 64);
        }
        items.m = 0;        /* the message's items, a repeated name in its first place */
        PropItem last_keys;         /* key_only: the message's last KEYS item (a repeated name takes the last value) */
        const PropItem *key_list = NULL;
#ifdef HAVE_SEPARATOR_MASKS
        if (lens[i] < 64 && s + 64 <= view_len) {     /* the usual short properties: no call */
            uint64_t ones, twos, len = (uint64_t)lens[i];
            separator_masks(d + s, (int)((len + 15) / 16), &ones, &twos);
            uint64_t inside = (1ull << len) - 1;
            ones &= inside;
            twos = (twos & inside) | (1ull << len);     /* the end closes the last item */
            for (uint64_t a = 0; len > 0;) {
                uint64_t from_a = ~((1ull << a) - 1);
                uint64_t end = (uint64_t)__builtin_ctzll(twos & from_a);
                uint64_t seps = ones & from_a & ((1ull << end) - 1);
                uint64_t sep = seps ? (uint64_t)__builtin_ctzll(seps) : 0;
                /* an item only with a name before its first separator and a value after it */
                if (seps && sep > a && sep + 1 < end) {
                    if (key_only) {
                        if (sep - a == PROPERTY_NAME_LEN && same_text(d + s + a, (const uint8_t *)"KEYS",
                                                                      PROPERTY_NAME_LEN)) {
                            last_keys = (PropItem){s + (int64_t)a, s + (int64_t)sep + 1, PROPERTY_NAME_LEN,
                                                   (int32_t)(end - sep - 1)};
                            key_list = &last_keys;
                        }
                    } else if (!take_item(&items, d, s + (int64_t)a, s + (int64_t)sep, s + (int64_t)end)) {
                        ok = -1;
                        break;
                    }
                }
                if (end >= len) {
                    break;
                }
                a = end + 1;
            }
        } else
#endif
        {
            int64_t p = s, item, sep, item_end;
            while (lens[i] > 0 && next_item(d, &p, e, &item, &sep, &item_end)) {
                if (sep > item && sep < item_end - 1 && !take_item(&items, d, item, sep, item_end)) {
                    ok = -1;
                    break;
                }
            }
        }
        if (ok < 0) {
            break;
        }
        PropItem *scratch = items.items;
        Py_ssize_t m = items.m;
        const PropItem *tag = NULL;
        for (Py_ssize_t k = 0; ok > 0 && k < m; k++) {
            const PropItem *it = &scratch[k];
            if (all && (!out_put(&names, d + it->name, it->name_len)
                        || !out_put(&values, d + it->value, it->value_len))) {
                ok = 0;
                break;
            }
            if (it->name_len == PROPERTY_NAME_LEN) {
                if (same_text(d + it->name, (const uint8_t *)"TAGS", PROPERTY_NAME_LEN)) {
                    tag = it;
                } else if (same_text(d + it->name, (const uint8_t *)"KEYS", PROPERTY_NAME_LEN)) {
                    key_list = it;
                }
            }
        }
        if (ok <= 0) {
            break;
        }
        item_off[i + 1] = (int32_t)names.count;
        tag_valid[i] = tag != NULL;
        if (all && !out_put(&tags, tag ? d + tag->value : d, tag ? tag->value_len : 0)) {
            ok = 0;
            break;
        }
        tag_nulls += tag == NULL;
        if (key_only) {     /* the first token, found by memchr (a byte loop took 42 instructions a key) */
            const uint8_t *key = d;
            Py_ssize_t key_len = 0;
            if (key_list != NULL) {
                int64_t t = key_list->value, te = t + key_list->value_len;
                while (t < te && d[t] == KEY_SEPARATOR) {
                    t++;
                }
#ifdef HAVE_SEPARATOR_MASKS
                if (t < te && te - t <= 16 && t + 16 <= view_len) {
                    /* a short key: its end by one compare of 16 bytes, not a memchr call (25 instructions) */
                    __m128i v = _mm_loadu_si128((const __m128i *)(d + t));
                    uint32_t ends = (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8(KEY_SEPARATOR)))
                                    | (1u << (te - t));
                    key = d + t;
                    key_len = __builtin_ctz(ends);
                } else
#endif
                if (t < te) {
                    const uint8_t *stop = memchr(d + t, KEY_SEPARATOR, (size_t)(te - t));
                    key = d + t;
                    key_len = (stop ? stop - d : te) - t;
                }
            }
            token_off[i + 1] = 0;
            key_valid[i] = key_len > 0;
            key_nulls += key_len == 0;
            if (!out_put(&keys, key, key_len)) {
                ok = 0;
                break;
            }
            continue;
        }
        Py_ssize_t first = tokens.count;
        if (key_list != NULL) {
            int64_t t = key_list->value, te = t + key_list->value_len;
            while (t < te) {
                int64_t tok_end = t;
                while (tok_end < te && d[tok_end] != KEY_SEPARATOR) {
                    tok_end++;
                }
                if (tok_end > t && !out_put(&tokens, d + t, tok_end - t)) {
                    ok = 0;
                    break;
                }
                t = tok_end + 1;
            }
        }
        token_off[i + 1] = (int32_t)tokens.count;
        int has_key = tokens.count > first;
        key_valid[i] = (uint8_t)has_key;
        key_nulls += !has_key;
        if (ok <= 0 || !out_put(&keys, has_key ? tokens.data + tokens.off[first] : d,
                                has_key ? tokens.off[first + 1] - tokens.off[first] : 0)) {
            ok = ok < 0 ? ok : 0;
            break;
        }
    }
    *names_out = names;
    *values_out = values;
    *tags_out = tags;
    *tokens_out = tokens;
    *keys_out = keys;
    *items_list = items;
    *tag_nulls_out = tag_nulls;
    *key_nulls_out = key_nulls;
    return ok;
}

#ifdef HAVE_SEPARATOR_MASKS
/* Not inlined: property_rows for the one row i of key_rows that its masks do not take. */
static __attribute__((noinline)) int
key_row_slow(const uint8_t *d, Py_ssize_t view_len, const int64_t *starts, const int32_t *lens, Py_ssize_t i,
             int32_t *item_off, int32_t *token_off, uint8_t *tag_valid, uint8_t *key_valid, OutColumn *names,
             OutColumn *values, OutColumn *tags, OutColumn *tokens, OutColumn *keys, ItemList *items,
             Py_ssize_t *key_nulls)
{
    Py_ssize_t tag_null, key_null;
    int ok = property_rows(d, view_len, starts + i, lens + i, 1, 0, 0, 1, item_off + i, token_off + i, tag_valid + i,
                           key_valid + i, names, values, tags, tokens, keys, items, &tag_null, &key_null);
    *key_nulls += key_null;
    return ok;
}

/*
 * property_rows for the key alone (all and tokens_too 0), with no loop over a message's items where its
 * properties are short (under 64 bytes, as property_rows' masks take them): the masks of the 0x01, 0x02
 * and space bytes find the last KEYS item (an item starts at 0 and after each 0x02; "KEYS" then 0x01,
 * and a value: the byte after the 0x01 neither the end nor a 0x02) and its first token at once.  Item
 * offsets, tag validity and token offsets are not written (the key column alone reads none).  Other
 * rows: property_rows, one at a time.  bench_spark's one-item properties ("KEYS\x01k0"): 186 -> 127
 * instructions a message (2026-12-02, cachegrind), the prefetches and bounds 21 of them.
 */
static int
key_rows(const uint8_t *d, Py_ssize_t view_len, const int64_t *starts, const int32_t *lens, Py_ssize_t n,
         int32_t *item_off, int32_t *token_off, uint8_t *tag_valid, uint8_t *key_valid, OutColumn *names,
         OutColumn *values, OutColumn *tags, OutColumn *tokens, OutColumn *keys_out, ItemList *items,
         Py_ssize_t *key_nulls_out)
{
    const __m128i c1 = _mm_set1_epi8(NAME_VALUE_SEPARATOR), c2 = _mm_set1_epi8(PROPERTY_SEPARATOR),
                  cs = _mm_set1_epi8(KEY_SEPARATOR);
    uint32_t keys_name;
    memcpy(&keys_name, "KEYS", PROPERTY_NAME_LEN);
    OutColumn keys = *keys_out;
    Py_ssize_t key_nulls = 0;
    int ok = 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t s = starts[i];
        uint64_t len = (uint64_t)(int64_t)lens[i];      /* a negative length: past any view */
        if ((uint64_t)s > (uint64_t)view_len || len > (uint64_t)(view_len - s)) {
            ok = 0;
            break;
        }
        if (i + PREFETCH_AHEAD < n) {
            PREFETCH_SPAN(d, view_len, starts[i + PREFETCH_AHEAD], 64);
        }
        if (len >= 64 || s + 64 > view_len) {
            *keys_out = keys;
            ok = key_row_slow(d, view_len, starts, lens, i, item_off, token_off, tag_valid, key_valid, names, values,
                              tags, tokens, keys_out, items, &key_nulls);
            keys = *keys_out;
            if (ok <= 0) {
                break;
            }
            continue;
        }
        const uint8_t *p = d + s;
        __m128i v = _mm_loadu_si128((const __m128i *)p);     /* the first block whatever len is: inside the view */
        uint64_t ones = (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(v, c1)),
                 twos = (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(v, c2)),
                 spaces = (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(v, cs));
        for (uint64_t k = 1; 16 * k < len; k++) {
            v = _mm_loadu_si128((const __m128i *)(p + 16 * k));
            ones |= (uint64_t)(uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(v, c1)) << (16 * k);
            twos |= (uint64_t)(uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(v, c2)) << (16 * k);
            spaces |= (uint64_t)(uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(v, cs)) << (16 * k);
        }
        uint64_t inside = (1ull << len) - 1;           /* the masks' bits from len on are bytes after it */
        ones &= inside;
        twos = (twos & inside) | (1ull << len);         /* the end closes the last item */
        /* items' starts followed by 0x01 four bytes on; the last one named KEYS with a value is the key's */
        uint64_t found = ((twos << 1) | 1) & (ones >> PROPERTY_NAME_LEN);
        const uint8_t *key = d;
        uint64_t key_len = 0;
        while (found) {
            uint64_t a = 63 - (uint64_t)__builtin_clzll(found), v = a + PROPERTY_NAME_LEN + 1;
            uint32_t name;
            memcpy(&name, p + a, PROPERTY_NAME_LEN);
            if (name == keys_name && !((twos >> v) & 1)) {      /* v <= len: a bit of twos */
                uint64_t end = (uint64_t)__builtin_ctzll(twos >> v) + v, t = v;
                /* the first byte of [v, end) that is no space (mostly v), and the space or end after it */
                if (p[v] == KEY_SEPARATOR) {
                    uint64_t words = ~spaces & ((1ull << end) - 1) & ~((1ull << v) - 1);
                    t = words ? (uint64_t)__builtin_ctzll(words) : end;
                }
                key = p + t;
                key_len = (uint64_t)__builtin_ctzll((spaces | (1ull << end)) >> t);
                break;
            }
            found &= ~(1ull << a);
        }
        key_valid[i] = key_len > 0;
        key_nulls += key_len == 0;
        if (!out_put(&keys, key, (Py_ssize_t)key_len)) {
            ok = 0;
            break;
        }
    }
    *keys_out = keys;
    *key_nulls_out = key_nulls;
    return ok;
}
#endif

/*
 * property_columns(view, starts, lengths, item_offsets, names, name_data, values, value_data,
 *                  tags, tag_data, tag_valid, token_offsets, tokens, token_data, keys, key_data,
 *                  key_valid[, items_and_tags[, tokens_too]]) -> (items, tokens, tag_nulls, key_nulls)
 *
 * The property columns of n messages in one pass over their properties strings
 * view[starts[i]:+lengths[i]], split as split_properties splits them, their bytes copied while
 * they are in the cache: names/name_data and values/value_data (int32 offsets, items + 1, and
 * bytes: every message's items in order, item_offsets n + 1 delimiting each message's), tags
 * (offsets n + 1; tag_valid 0 for a message without TAGS), the non-empty KEYS tokens
 * (token_offsets n + 1 delimiting each message's in tokens/token_data) and keys, each message's
 * first token (key_valid 0 without one).  Data outputs of sum(lengths) bytes and offsets of
 * sum(lengths) // 2 + n + 1 always do (ValueError when an output is too small).  With
 * items_and_tags false only the KEYS tokens and keys are written (items counts none; names, values
 * and tags are left as they are): a read of the key column alone; with tokens_too false as well, only
 * the keys (tokens counts none; item offsets, token offsets and tag validity unspecified: key_rows; a
 * message's items other than KEYS are not kept while it is split).  Releases the GIL.
 */
static PyObject *
property_columns(PyObject *module, PyObject *args)
{
    Py_buffer b[17];
    int all = 1, tokens_too = 1;
    if (!PyArg_ParseTuple(args, "y*y*y*w*w*w*w*w*w*w*w*w*w*w*w*w*w*|pp", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5],
                          &b[6], &b[7], &b[8], &b[9], &b[10], &b[11], &b[12], &b[13], &b[14], &b[15], &b[16],
                          &all, &tokens_too)) {
        return NULL;
    }
    /* the key alone: a message's KEYS item is all its split keeps, its first token all it copies (an
     * every-column query of 4M one-KEYS-item messages: 1.43G instructions here, 0.90G so, with the masks
     * of the blocks the properties take only; 0.73G with a copy of the loop of its own, 0.82G without) */
    const uint8_t *d = b[0].buf;
    const int64_t *starts = b[1].buf;
    const int32_t *lens = b[2].buf;
    int32_t *item_off = b[3].buf, *token_off = b[11].buf;
    uint8_t *tag_valid = b[10].buf, *key_valid = b[16].buf;
    Py_ssize_t n = b[2].len / (Py_ssize_t)sizeof(int32_t);
#define OUT_COLUMN(k) {b[k].buf, b[(k) + 1].buf, 0, b[k].len / (Py_ssize_t)sizeof(int32_t), 0, b[(k) + 1].len}
    OutColumn names = OUT_COLUMN(4), values = OUT_COLUMN(6), tags = OUT_COLUMN(8), tokens = OUT_COLUMN(12),
              keys = OUT_COLUMN(14);
#undef OUT_COLUMN
    int ok = b[1].len == n * 8 && b[3].len >= (n + 1) * 4 && b[11].len >= (n + 1) * 4 && b[10].len >= n &&
             b[16].len >= n && tags.off_cap >= n + 1 && keys.off_cap >= n + 1 && names.off_cap >= 1 &&
             values.off_cap >= 1 && tokens.off_cap >= 1;
    Py_ssize_t tag_nulls = 0, key_nulls = 0;
    ItemList items = {NULL, 0, 0};
    Py_BEGIN_ALLOW_THREADS
    if (ok) {
        item_off[0] = token_off[0] = 0;
        names.off[0] = values.off[0] = tags.off[0] = tokens.off[0] = keys.off[0] = 0;
    }
    if (ok && !all && !tokens_too) {
#ifdef HAVE_SEPARATOR_MASKS
        ok = key_rows(d, b[0].len, starts, lens, n, item_off, token_off, tag_valid, key_valid, &names, &values, &tags,
                      &tokens, &keys, &items, &key_nulls);
#else
        ok = property_rows(d, b[0].len, starts, lens, n, 0, 0, ok, item_off, token_off, tag_valid, key_valid, &names,
                           &values, &tags, &tokens, &keys, &items, &tag_nulls, &key_nulls);
#endif
    } else if (ok) {
        ok = property_rows(d, b[0].len, starts, lens, n, all, tokens_too, ok, item_off, token_off, tag_valid,
                           key_valid, &names, &values, &tags, &tokens, &keys, &items, &tag_nulls, &key_nulls);
    }
    Py_END_ALLOW_THREADS
    free(items.items);
    for (int k = 0; k < 17; k++) {
        PyBuffer_Release(&b[k]);
    }
    if (ok < 0) {
        return PyErr_NoMemory();
    }
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "expected properties inside the view and outputs of the documented sizes");
        return NULL;
    }
    return Py_BuildValue("nnnn", names.count, tokens.count, tag_nulls, key_nulls);
}

static const char HEX_UPPER[] = "0123456789ABCDEF";
/* Each byte as two uppercase hex digits (a msgId's physical offset: 8 lookups, not 16 digit steps). */
static const char HEX_PAIRS[] =
    "000102030405060708090A0B0C0D0E0F101112131415161718191A1B1C1D1E1F202122232425262728292A2B2C2D2E2F"
    "303132333435363738393A3B3C3D3E3F404142434445464748494A4B4C4D4E4F505152535455565758595A5B5C5D5E5F"
    "606162636465666768696A6B6C6D6E6F707172737475767778797A7B7C7D7E7F808182838485868788898A8B8C8D8E8F"
    "909192939495969798999A9B9C9D9E9FA0A1A2A3A4A5A6A7A8A9AAABACADAEAFB0B1B2B3B4B5B6B7B8B9BABBBCBDBEBF"
    "C0C1C2C3C4C5C6C7C8C9CACBCCCDCECFD0D1D2D3D4D5D6D7D8D9DADBDCDDDEDFE0E1E2E3E4E5E6E7E8E9EAEBECEDEEEF"
    "F0F1F2F3F4F5F6F7F8F9FAFBFCFDFEFF";

/*
 * format_hosts(i8, i4, u8, n, which, offsets, out) -> bytes used
 *
 * One string for each of the first n rows of the column blocks: which 0 the born
 * host, 1 the store host, as Host.__str__ ("a.b.c.d:port", "[x:x:x:x:x:x:x:x]:port"
 * as Java prints IPv6), 2 the msgId (uppercase hex of store IP, int port, long
 * physical offset).  offsets: n + 1 int32; out: at least the longest text each row's
 * kind can take (HOST_TEXT_V4 or HOST_TEXT_V6 for a host, MSG_ID_V4 or MSG_ID_V6 for a msgId:
 * columnar.host_text_bound).  A host equal to the previous row's is copied (stores hold few hosts).
 */
#define HOST_TEXT_V4 27     /* "255.255.255.255:-2147483648" */
#define HOST_TEXT_V6 53     /* "[ffff:...:ffff]:-2147483648" */
#define MSG_ID_V4 32
#define MSG_ID_V6 56
static PyObject *
format_hosts(PyObject *module, PyObject *args)
{
    Py_buffer i8, i4, u8, offsets, out;
    Py_ssize_t n;
    int which;
    if (!PyArg_ParseTuple(args, "y*y*y*niw*w*", &i8, &i4, &u8, &n, &which, &offsets, &out)) {
        return NULL;
    }
    Cols c;
    PyObject *ret = NULL;
    if (!cols_init(&c, &i8, &i4, &u8)) {
        goto done;
    }
    if (n < 0 || n > c.cap || offsets.len < (n + 1) * 4 || which < 0 || which > 2) {
        PyErr_SetString(PyExc_ValueError, "expected n <= capacity, which in 0..2 and outputs of n rows");
        goto done;
    }
    int32_t *off = offsets.buf;
    uint8_t *o0 = out.buf, *o = o0;
    int born = which == 0;
    const uint8_t *ips = born ? c.born_ip : c.store_ip;
    const int32_t *ports = c.i4[born ? C_BORN_PORT : C_STORE_PORT], *flags = c.i4[C_SYS_FLAG];
    const int64_t *phys = c.i8[C_PHYSICAL_OFFSET];
    int32_t v6_bit = born ? SYSFLAG_BORNHOST_V6 : SYSFLAG_STOREHOST_V6;
    Py_ssize_t need = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int v6 = (flags[i] & v6_bit) != 0;
        need += which == 2 ? (v6 ? MSG_ID_V6 : MSG_ID_V4) : (v6 ? HOST_TEXT_V6 : HOST_TEXT_V4);
    }
    if (out.len < need) {
        PyErr_SetString(PyExc_ValueError, "expected an output holding the longest text of every row");
        goto done;
    }
    off[0] = 0;
    Py_BEGIN_ALLOW_THREADS      /* plain C over buffers held until done: another scan step may run */
    for (Py_ssize_t i = 0; i < n; i++) {
        const uint8_t *ip = ips + i * IPV6_LEN;
        int32_t port = ports[i];
        int v6 = (flags[i] & v6_bit) != 0;
        if (which == 2) {
            int len = v6 ? IPV6_LEN : IPV4_LEN;
            if (i > 0 && port == ports[i - 1] && v6 == ((flags[i - 1] & v6_bit) != 0) &&
                memcmp(ip, ip - IPV6_LEN, IPV6_LEN) == 0) {
                memcpy(o, o - (off[i] - off[i - 1]), (size_t)(2 * (len + 4)));   /* same host: same prefix */
                o += 2 * (len + 4);
            } else {
                for (int k = 0; k < len; k++) {
                    *o++ = (uint8_t)HEX_UPPER[ip[k] >> 4];
                    *o++ = (uint8_t)HEX_UPPER[ip[k] & 15];
                }
                uint8_t p4[4];
                put_i32(p4, port);
                for (int k = 0; k < 4; k++) {
                    *o++ = (uint8_t)HEX_UPPER[p4[k] >> 4];
                    *o++ = (uint8_t)HEX_UPPER[p4[k] & 15];
                }
            }
            uint64_t u = (uint64_t)phys[i];
            for (int shift = 56; shift >= 0; shift -= 8) {
                memcpy(o, HEX_PAIRS + 2 * ((u >> shift) & 0xFF), 2);
                o += 2;
            }
        } else if (i > 0 && port == ports[i - 1] && v6 == ((flags[i - 1] & v6_bit) != 0) &&
                   memcmp(ip, ip - IPV6_LEN, IPV6_LEN) == 0) {
            int32_t len = off[i] - off[i - 1];
            memcpy(o, o - len, (size_t)len);
            o += len;
        } else if (v6) {
            *o++ = '[';
            for (int g = 0; g < 8; g++) {
                unsigned v = ((unsigned)ip[2 * g] << 8) | ip[2 * g + 1];
                int started = 0;
                for (int shift = 12; shift >= 0; shift -= 4) {
                    unsigned nib = (v >> shift) & 15;
                    if (nib || started || shift == 0) {
                        *o++ = (uint8_t)HEX_LOWER[nib];
                        started = 1;
                    }
                }
                if (g < 7) {
                    *o++ = ':';
                }
            }
            *o++ = ']';
            *o++ = ':';
            o = put_decimal(o, port);
        } else {
            for (int k = 0; k < IPV4_LEN; k++) {
                o = put_decimal(o, ip[k]);
                *o++ = k < IPV4_LEN - 1 ? '.' : ':';
            }
            o = put_decimal(o, port);
        }
        off[i + 1] = (int32_t)(o - o0);
    }
    Py_END_ALLOW_THREADS
    ret = PyLong_FromSsize_t(o - o0);
done:
    PyBuffer_Release(&i8);
    PyBuffer_Release(&i4);
    PyBuffer_Release(&u8);
    PyBuffer_Release(&offsets);
    PyBuffer_Release(&out);
    return ret;
}

#define TRANSACTION_TYPE_MASK 0xC
#define TRANSACTION_ROLLBACK_TYPE 0xC

/* Whether c is a UTF-8 continuation byte (10xxxxxx). */
#define IS_CONTINUATION(c) (((c) & 0xC0) == 0x80)

/*
 * The length of the UTF-8 character at s[0:n] (n >= 1, s[0] >= 0x80) and, into *cp, its code point, or
 * U+FFFD for a malformed sequence as Java's new String(bytes, UTF_8) reads it (segstore/javatext.py): the
 * longest prefix of a well-formed sequence (Unicode's maximal subpart, JDK String.decodeUTF8_UTF16's
 * malformed3/malformed4), but for an encoded surrogate, ED A0..BF, one malformed character of its lead,
 * second byte and a third that is a continuation byte.
 */
static Py_ssize_t
java_utf8_char(const uint8_t *s, Py_ssize_t n, uint32_t *cp)
{
    uint32_t c = s[0];
    *cp = 0xFFFDu;
    if (c < 0xC2 || c > 0xF4) {
        return 1;
    }
    if (c < 0xE0) {
        if (n < 2 || !IS_CONTINUATION(s[1])) {
            return 1;
        }
        *cp = ((c & 0x1F) << 6) | (s[1] & 0x3F);
        return 2;
    }
    uint8_t lo = 0x80, hi = 0xBF;
    if (c == 0xE0) {
        lo = 0xA0;
    } else if (c == 0xED) {
        hi = 0x9F;
    } else if (c == 0xF0) {
        lo = 0x90;
    } else if (c == 0xF4) {
        hi = 0x8F;
    }
    if (n < 2 || s[1] < lo || s[1] > hi) {
        if (c == 0xED && n >= 2 && s[1] >= 0xA0 && s[1] <= 0xBF) {
            return n >= 3 && IS_CONTINUATION(s[2]) ? 3 : 2; /* a surrogate's three bytes, or two */
        }
        return 1;
    }
    if (n < 3 || !IS_CONTINUATION(s[2])) {
        return 2;
    }
    if (c < 0xF0) {
        *cp = ((c & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
        return 3;
    }
    if (n < 4 || !IS_CONTINUATION(s[3])) {
        return 3;
    }
    *cp = ((c & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) | ((uint32_t)(s[2] & 0x3F) << 6) | (s[3] & 0x3F);
    return 4;
}

/* 31^k mod 2^32: String.hashCode over k characters at once is h * 31^k + (c0 * 31^(k-1) + ... + c(k-1)). */
#define POW31_2 961u
#define POW31_3 29791u
#define POW31_4 923521u
#define POW31_5 28629151u
#define POW31_6 887503681u
#define POW31_7 1742810335u
#define POW31_8 2487512833u
#define ASCII_MASK_8 0x8080808080808080ull
#define ASCII_MASK_4 0x80808080u

/*
 * Java String.hashCode continued from h over the UTF-16 code units of new String(s[0:n], UTF_8): UTF-8 as it
 * is, and stored bytes that are not (a property a 4.9.7 batch stored as its client sent it) as Java reads
 * them, a U+FFFD for each malformed sequence (java_utf8_char).  ASCII runs go 8 and then 4 bytes at a
 * time: a block's terms do not wait on each other, so the chain through h is one multiply and one add per
 * block where a character at a time waits on a multiply per character (the keys verify and recovery hash,
 * a message's UNIQ_KEY and KEYS: 3.7x fewer cycles of that chain on the benchmark's messages).
 */
static uint32_t
java_hash_utf8(uint32_t h, const uint8_t *s, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    while (i < n) {
        if (n - i >= 8) {
            uint64_t w;
            memcpy(&w, s + i, sizeof w);
            if (!(w & ASCII_MASK_8)) {
                const uint8_t *b = s + i;
                h = h * POW31_8 + (b[0] * POW31_7 + b[1] * POW31_6 + b[2] * POW31_5 + b[3] * POW31_4) +
                    (b[4] * POW31_3 + b[5] * POW31_2 + b[6] * 31u + b[7]);
                i += 8;
                continue;
            }
        }
        if (n - i >= 4) {
            uint32_t w;
            memcpy(&w, s + i, sizeof w);
            if (!(w & ASCII_MASK_4)) {
                const uint8_t *b = s + i;
                h = h * POW31_4 + (b[0] * POW31_3 + b[1] * POW31_2) + (b[2] * 31u + b[3]);
                i += 4;
                continue;
            }
        }
        uint32_t c = s[i], cp;
        if (c < 0x80) {
            cp = c;
            i += 1;
        } else {
            i += java_utf8_char(s + i, n - i, &cp);
        }
        if (cp > 0xFFFF) {
            cp -= 0x10000;
            h = h * 31u + (0xD800u + (cp >> 10));
            h = h * 31u + (0xDC00u + (cp & 0x3FF));
        } else {
            h = h * 31u + cp;
        }
    }
    return h;
}

/* The properties decode needs per message: TAGS, KEYS, UNIQ_KEY. */
enum { P_TAGS, P_KEYS, P_UNIQ_KEY, N_KNOWN };
typedef struct {
    const uint8_t *value;
    int32_t len;        /* -1: none */
} Known;

/*
 * TAGS, KEYS and UNIQ_KEY of properties p[0:len] in one pass over the bytes: for each
 * the value of the last item of that name (message.decode_properties keeps the last), len -1 when none.
 * An empty value is no item (MessageDecoder.string2messageProperties drops it: an empty UNIQ_KEY
 * is no key to index, an empty TAGS does not replace an earlier one).
 */
static void
known_properties(const uint8_t *p, int32_t len, Known out[N_KNOWN])
{
    for (int k = 0; k < N_KNOWN; k++) {
        out[k].value = NULL;
        out[k].len = -1;
    }
    /* an item at a time (memchr finds its end): only an item whose name is one of the three can
       matter, and its name ends at its first NAME_VALUE_SEPARATOR, so the name's bytes and the
       separator after them tell it */
    for (int32_t item = 0; item <= len;) {
        const uint8_t *q = memchr(p + item, PROPERTY_SEPARATOR, (size_t)(len - item));
        int32_t end = q ? (int32_t)(q - p) : len, item_len = end - item, name_len = 0;
        const uint8_t *it = p + item;
        int k = -1;
        if (item_len > PROPERTY_NAME_LEN + 1 && it[PROPERTY_NAME_LEN] == NAME_VALUE_SEPARATOR) {
            if (memcmp(it, "TAGS", PROPERTY_NAME_LEN) == 0) {
                k = P_TAGS;
            } else if (memcmp(it, "KEYS", PROPERTY_NAME_LEN) == 0) {
                k = P_KEYS;
            }
            name_len = PROPERTY_NAME_LEN;
        } else if (item_len > 8 + 1 && it[8] == NAME_VALUE_SEPARATOR && memcmp(it, "UNIQ_KEY", 8) == 0) {
            k = P_UNIQ_KEY;
            name_len = 8;
        }
        if (k >= 0) {
            out[k].value = it + name_len + 1;
            out[k].len = item_len - name_len - 1;
        }
        item = end + 1;
    }
}

/*
 * put_be64(view, positions, values) -> None
 *
 * Write each int64 of values big-endian at byte positions[i] of view (n int64 each): the queue
 * and physical offsets written into messages laid out before they were placed
 * (arrowwrite.placed; its numpy scatter is the reference).  Every position is checked
 * (ValueError, nothing written past the first bad one).  Keeps the GIL: a write is microseconds,
 * and a thread that lets it go waits to take it back from the reading thread's Python (py-spy: 84
 * of the writer's 1174 samples in this call with the GIL released, in its re-take).
 */
static PyObject *
put_be64(PyObject *module, PyObject *args)
{
    Py_buffer view, pos, vals;
    if (!PyArg_ParseTuple(args, "w*y*y*", &view, &pos, &vals)) {
        return NULL;
    }
    Py_ssize_t n = pos.len / (Py_ssize_t)sizeof(int64_t);
    const int64_t *ps = pos.buf, *vs = vals.buf;
    uint8_t *o = view.buf;
    int ok = vals.len == pos.len && pos.len % (Py_ssize_t)sizeof(int64_t) == 0;
    for (Py_ssize_t i = 0; ok && i < n; i++) {
        if (ps[i] < 0 || ps[i] > view.len - 8) {
            ok = 0;
            break;
        }
        put_i64(o + ps[i], vs[i]);
    }
    PyBuffer_Release(&view);
    PyBuffer_Release(&pos);
    PyBuffer_Release(&vals);
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "expected n int64 positions and values, each position 8 bytes inside the view");
        return NULL;
    }
    Py_RETURN_NONE;
}

/*
 * tags_hashes(view, props_pos, props_len, out) -> None
 *
 * Per message, the Java String.hashCode of its TAGS property (0 without TAGS or
 * for an empty one): a plain message's consume-queue tags code.  The properties
 * need not be UTF-8: a TAGS value that is not hashes as Java's text of it (java_hash_utf8).
 */
static PyObject *
tags_hashes(PyObject *module, PyObject *args)
{
    Py_buffer view, pos, len, tags;
    if (!PyArg_ParseTuple(args, "y*y*y*w*", &view, &pos, &len, &tags)) {
        return NULL;
    }
    Py_ssize_t n = len.len / (Py_ssize_t)sizeof(int32_t);
    const int64_t *ps = pos.buf;
    const int32_t *ls = len.buf;
    int64_t *th = tags.buf;
    int ok = pos.len == n * 8 && tags.len >= n * 8;
    for (Py_ssize_t i = 0; ok && i < n; i++) {
        if (ps[i] < 0 || ls[i] < 0 || ps[i] + ls[i] > view.len) {
            ok = 0;
            break;
        }
        if (i + PREFETCH_AHEAD < n) {
            PREFETCH((const uint8_t *)view.buf, view.len, ps[i + PREFETCH_AHEAD]);
        }
        Known known[N_KNOWN];
        known_properties((const uint8_t *)view.buf + ps[i], ls[i], known);
        th[i] = known[P_TAGS].len > 0 ? (int64_t)(int32_t)java_hash_utf8(0, known[P_TAGS].value, known[P_TAGS].len) : 0;
    }
    PyBuffer_Release(&view);
    PyBuffer_Release(&pos);
    PyBuffer_Release(&len);
    PyBuffer_Release(&tags);
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "expected properties inside the view and an output of n rows");
        return NULL;
    }
    Py_RETURN_NONE;
}

/*
 * Rows [from, to) of the columns into ix (see RowIndex).  The properties need not be UTF-8 (java_hash_utf8
 * hashes Java's text of them).  Returns 0 where a field lies outside the view (nothing more is done); a
 * hashes array too small sets ix->total to -1 and the remaining rows' entries are not put.  Runs no Python.
 */
static int
index_rows(const uint8_t *d, Py_ssize_t view_len, const int64_t *tp, const int32_t *tl, const int64_t *pp,
           const int32_t *pl, const int32_t *sf, Py_ssize_t from, Py_ssize_t to, RowIndex *ix)
{
    int32_t *cnt = ix->counts;
    int64_t *out = ix->hashes, *th = ix->tags;
    Py_ssize_t total = ix->total, cap = ix->cap;
    for (Py_ssize_t i = from; total >= 0 && i < to; i++) {
        if (tp[i] < 0 || tl[i] < 0 || tp[i] + tl[i] > view_len || pp[i] < 0 || pl[i] < 0 || pp[i] + pl[i] > view_len) {
            ix->total = total;
            return 0;
        }
        if (i + PREFETCH_AHEAD < to) {
            PREFETCH(d, view_len, pp[i + PREFETCH_AHEAD]);
        }
        cnt[i] = 0;
        Known known[N_KNOWN];
        known_properties(d + pp[i], pl[i], known);
        th[i] = known[P_TAGS].len > 0 ? (int64_t)(int32_t)java_hash_utf8(0, known[P_TAGS].value, known[P_TAGS].len) : 0;
        if ((sf[i] & TRANSACTION_TYPE_MASK) == TRANSACTION_ROLLBACK_TYPE) {
            continue;
        }
        /* messages of a batch mostly share their topic: its hash is computed again only when it changes */
        if (tl[i] != ix->last_topic_len || memcmp(d + tp[i], ix->last_topic, (size_t)tl[i]) != 0) {
            ix->last_topic = d + tp[i];
            ix->last_topic_len = tl[i];
            ix->prefix_hash = java_hash_utf8(0, ix->last_topic, ix->last_topic_len) * 31u + TOPIC_KEY_SEPARATOR;
        }
        uint32_t prefix = ix->prefix_hash;
        const uint8_t *v = known[P_UNIQ_KEY].value;
        int32_t vl = known[P_UNIQ_KEY].len;
        if (vl >= 0) {
            if (total >= cap) {
                total = -1;
                break;
            }
            out[total++] = index_hash(java_hash_utf8(prefix, v, vl));
            cnt[i]++;
        }
        v = known[P_KEYS].value;
        vl = known[P_KEYS].len;
        const uint8_t *t = v, *te = v + (vl > 0 ? vl : 0);
        while (vl > 0 && t < te) {
            const uint8_t *sp = memchr(t, KEY_SEPARATOR, (size_t)(te - t));
            const uint8_t *tok_end = sp ? sp : te;
            if (tok_end > t) {
                if (total >= cap) {
                    total = -1;
                    break;
                }
                out[total++] = index_hash(java_hash_utf8(prefix, t, tok_end - t));
                cnt[i]++;
            }
            t = tok_end + 1;
        }
    }
    ix->total = total;
    return 1;
}

/*
 * index_entries(view, topic_pos, topic_len, props_pos, props_len, sys_flag, counts, hashes, tags) -> total
 *
 * tags: each message's TAGS hash as tags_hashes gives it (n int64), found in the same
 * pass over the properties.
 *
 * The IndexFile entries the broker puts for each message (IndexService.buildIndex):
 * none for a rollback transaction, else topic#UNIQ_KEY (when the property is
 * there) then topic#token for each non-empty space-separated KEYS token, each as
 * the index hash abs(String.hashCode), MIN_VALUE -> 0.  counts: entries per
 * message (n int32); hashes: the entries in order.  Returns -1 when hashes is too
 * small (sum(props_len) // 2 + n always does).  The properties need not be UTF-8
 * (java_hash_utf8 hashes Java's text of them).
 */
static PyObject *
index_entries(PyObject *module, PyObject *args)
{
    Py_buffer view, tpos, tlen, ppos, plen, flags, counts, hashes, tags;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*y*w*w*w*", &view, &tpos, &tlen, &ppos, &plen, &flags, &counts, &hashes,
                          &tags)) {
        return NULL;
    }
    Py_ssize_t n = tlen.len / (Py_ssize_t)sizeof(int32_t);
    int ok = tpos.len == n * 8 && ppos.len == n * 8 && plen.len == n * 4 && flags.len == n * 4 && counts.len >= n * 4 &&
             tags.len >= n * 8;
    RowIndex ix = {counts.buf, tags.buf, hashes.buf, hashes.len / (Py_ssize_t)sizeof(int64_t), 0, NULL, -1, 0};
    /* no Python object inside: a conversion's reading thread runs meanwhile */
    if (ok) {
        Py_BEGIN_ALLOW_THREADS
        ok = index_rows(view.buf, view.len, tpos.buf, tlen.buf, ppos.buf, plen.buf, flags.buf, 0, n, &ix);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&view);
    PyBuffer_Release(&tpos);
    PyBuffer_Release(&tlen);
    PyBuffer_Release(&ppos);
    PyBuffer_Release(&plen);
    PyBuffer_Release(&flags);
    PyBuffer_Release(&counts);
    PyBuffer_Release(&hashes);
    PyBuffer_Release(&tags);
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "expected fields inside the view and outputs of n rows");
        return NULL;
    }
    return PyLong_FromSsize_t(ix.total);
}

/*
 * topic_codes(view, topic_pos, topic_len, codes) -> list of first rows
 *
 * Number the rows' topics view[topic_pos[i]:+topic_len[i]] 0, 1, ... in order of first
 * appearance into codes (n int32; topic_number); returns, for each number, the first row holding
 * it.  Every slice is bounds-checked.  Releases the GIL.
 */
static PyObject *
topic_codes(PyObject *module, PyObject *args)
{
    Py_buffer view, tpos, tlen, codes;
    if (!PyArg_ParseTuple(args, "y*y*y*w*", &view, &tpos, &tlen, &codes)) {
        return NULL;
    }
    Py_ssize_t n = tlen.len / (Py_ssize_t)sizeof(int32_t);
    const int64_t *tp = tpos.buf;
    const int32_t *tl = tlen.buf;
    PyObject *ret = NULL;
    int ok = tpos.len == n * 8 && codes.len >= n * 4 && n < INT32_MAX;
    TopicTable t = {codes.buf, ok ? PyMem_RawMalloc((size_t)(n > 0 ? n : 1) * sizeof(int64_t)) : NULL, 0, -1,
                    NULL, 0, n};
    if (ok && t.firsts == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; ok && i < n; i++) {
        if (tp[i] < 0 || tl[i] < 0 || tp[i] + tl[i] > view.len) {
            ok = 0;
            break;
        }
        if (i + PREFETCH_AHEAD < n) {
            PREFETCH((const uint8_t *)view.buf, view.len, tp[i + PREFETCH_AHEAD]);
        }
        if (!topic_number(&t, view.buf, tp, tl, i)) {
            ok = -1;
            break;
        }
    }
    Py_END_ALLOW_THREADS
    if (ok < 0) {
        PyErr_NoMemory();
    } else if (!ok) {
        PyErr_SetString(PyExc_ValueError, "expected topics inside the view and an output of n rows");
    } else if ((ret = PyList_New(t.k)) != NULL) {
        for (int32_t j = 0; j < t.k; j++) {
            PyObject *v = PyLong_FromLongLong(t.firsts[j]);
            if (v == NULL) {
                Py_CLEAR(ret);
                break;
            }
            PyList_SET_ITEM(ret, j, v);
        }
    }
done:
    free(t.table);
    PyMem_RawFree(t.firsts);
    PyBuffer_Release(&view);
    PyBuffer_Release(&tpos);
    PyBuffer_Release(&tlen);
    PyBuffer_Release(&codes);
    return ret;
}

/*
 * queue_run_confirmed(entries, rows, phy, size, tags_code, ext_max_addr) -> bool
 *
 * Whether consume-queue entries (20 bytes as stored: offset i8, size i4, tags code i8) are exactly the
 * messages rows[j] of a walk's columns (phy int64, size int32, tags_code int64; rows intp, one per
 * entry): entry j at the message's offset, with its size and its tags code, which is no extension
 * address (above ext_max_addr).  Walked.confirms_queue_run's numpy reference in one pass over the
 * entries where they lie, without gathering the messages' columns first.  Bounds-checked; releases
 * the GIL.
 */
static PyObject *
queue_run_confirmed(PyObject *module, PyObject *args)
{
    Py_buffer entries, rows, phys, sizes, tags;
    long long ext_max;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*L", &entries, &rows, &phys, &sizes, &tags, &ext_max)) {
        return NULL;
    }
    Py_ssize_t count = rows.len / (Py_ssize_t)sizeof(Py_ssize_t), n = phys.len / (Py_ssize_t)sizeof(int64_t);
    int ok = entries.len == count * CQ_ROW_SIZE && rows.len % (Py_ssize_t)sizeof(Py_ssize_t) == 0 &&
             sizes.len == n * (Py_ssize_t)sizeof(int32_t) && tags.len == n * (Py_ssize_t)sizeof(int64_t);
    const Py_ssize_t *r = rows.buf;
    const int64_t *p = phys.buf, *t = tags.buf;
    const int32_t *z = sizes.buf;
    const uint8_t *e = entries.buf;
    int same = ok;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t j = 0; same && j < count; j++) {
        const uint8_t *at = e + j * CQ_ROW_SIZE;
        Py_ssize_t m = r[j];
        if (m < 0 || m >= n) {
            ok = same = 0;
            break;
        }
        int64_t code = get_i64(at + 12);
        same = get_i64(at) == p[m] && get_i32(at + 8) == z[m] && code > ext_max && code == t[m];
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&entries);
    PyBuffer_Release(&rows);
    PyBuffer_Release(&phys);
    PyBuffer_Release(&sizes);
    PyBuffer_Release(&tags);
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "expected 20-byte entries, one row index in range for each, and "
                                          "columns of one length");
        return NULL;
    }
    return PyBool_FromLong(same);
}

/*
 * match_entries(view, position, size, queue_id, queue_offset, topic_pos, topic_len, phys, order, sizes, bounds,
 *               part_slots, part_firsts, first, last, queue_ids, topic_offsets, topic_data, met, hits)
 *     -> (count, wrong, identity)
 *
 * The consume-queue entries phys[first:last] (ascending) matched against a walk's rows (position
 * ascending; size, queue_id int32, queue_offset int64, topic_pos int64, topic_len int32).  Entry j is
 * the order[j]-th of the ranges' entries one range after another: range r holds those from bounds[r]
 * to bounds[r + 1], of slot part_slots[r] from queue offset part_firsts[r] on; sizes[j] is its
 * message size (all int64).  Each entry at a row's position must be that row's message (its size, its
 * slot's queue id queue_ids[slot], its queue offset, its slot's topic
 * topic_data[topic_offsets[slot]:topic_offsets[slot + 1]]).  An entry at no row's position is passed
 * over (the caller finds it unmet).  Row indexes of the matched entries go to hits in entry order and
 * met[j] is set for each, up to the first entry that fails the check: count is how many, wrong that
 * entry (-1: none), identity whether hits are exactly 0 .. n-1 (every row, once, in order).  A range
 * whose slot lies outside the tables fails the call (ValueError), an entry of it met or not.  One
 * merge of both ascending lists: O(ranges + rows + entries log ranges).  Releases the GIL.
 */
/* how many entries ahead match_entries asks for the memory it will read */
#define MATCH_AHEAD 8

static PyObject *
match_entries(PyObject *module, PyObject *args)
{
    Py_buffer view, pos, size, qid, qoff, tpos, tlen, phys, order, sizes, bounds, pslots, pfirsts, qids, toff,
        tdata, met, hits;
    Py_ssize_t first, last;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*y*y*y*y*y*y*y*y*nny*y*y*w*w*", &view, &pos, &size, &qid, &qoff, &tpos,
                          &tlen, &phys, &order, &sizes, &bounds, &pslots, &pfirsts, &first, &last, &qids, &toff,
                          &tdata, &met, &hits)) {
        return NULL;
    }
    Py_ssize_t n = pos.len / 8, entries = phys.len / 8, nslots = qids.len / 8, nparts = pslots.len / 8;
    const int64_t *p = pos.buf, *qo = qoff.buf, *tp = tpos.buf, *ep = phys.buf, *eo = order.buf, *es = sizes.buf,
                  *pb = bounds.buf, *ps = pslots.buf, *pf = pfirsts.buf, *sq = qids.buf, *to = toff.buf;
    const int32_t *sz = size.buf, *qi = qid.buf, *tl = tlen.buf;
    const uint8_t *d = view.buf, *td = tdata.buf;
    uint8_t *m = met.buf;
    int64_t *h = hits.buf;
    int ok = size.len == n * 4 && qid.len == n * 4 && qoff.len == n * 8 && tpos.len == n * 8 && tlen.len == n * 4
             && order.len == entries * 8 && sizes.len == entries * 8 && bounds.len == (nparts + 1) * 8
             && pfirsts.len == nparts * 8 && nparts > 0 && pb[0] == 0 && pb[nparts] == entries
             && toff.len == (nslots + 1) * 8 && met.len >= entries && 0 <= first && first <= last
             && last <= entries && hits.len >= (last - first) * 8;
    Py_ssize_t count = 0, wrong = -1;
    int identity = 1;
    match_part *part = ok ? PyMem_RawMalloc((size_t)nparts * sizeof(match_part)) : NULL;
    int no_memory = ok && part == NULL;
    ok = ok && !no_memory;
    Py_BEGIN_ALLOW_THREADS
    /* what an entry of each range is checked against, its slot's table entries checked once */
    for (Py_ssize_t r = 0; ok && r < nparts; r++) {
        int64_t s = ps[r];
        ok = 0 <= s && s < nslots && 0 <= to[s] && to[s] <= to[s + 1] && to[s + 1] <= tdata.len;
        if (ok) {
            part[r] = (match_part){sq[s], pf[r] - pb[r], td + to[s], to[s + 1] - to[s]};
        }
    }
    Py_ssize_t i = 0;
    for (Py_ssize_t j = first; ok && j < last; j++) {
        int64_t at = ep[j];
        while (i < n && p[i] < at) {
            i++;
        }
        if (i == n) {
            break;
        }
        if (p[i] != at) {
            continue;           /* inside a message, or past the walk: unmet */
        }
        /* The checks below read each row's topic in the mapped region (walked megabytes ago: out of
         * the L2 cache).  That load missed on every entry; asked for a few entries ahead it arrives in
         * time. */
        if (i + MATCH_AHEAD < n && tp[i + MATCH_AHEAD] >= 0 && tp[i + MATCH_AHEAD] < view.len) {
            __builtin_prefetch(d + tp[i + MATCH_AHEAD]);
        }
        int64_t o = eo[j];
        /* the range holding entry o (bounds[lo] <= o < bounds[lo + 1]), without branches: the ranges
         * of a read's queues alternate from entry to entry, and a branch per step mispredicted */
        Py_ssize_t lo = 0, span = nparts;
        while (span > 1) {
            Py_ssize_t half = span / 2;
            lo = pb[lo + half] <= o ? lo + half : lo;
            span -= half;
        }
        const match_part *e = part + lo;
        if (o < 0 || o >= entries || tp[i] < 0 || tl[i] < 0 || tp[i] + tl[i] > view.len) {
            ok = 0;
            break;
        }
        if (sz[i] != es[j] || qi[i] != e->queue_id || qo[i] != e->base + o || tl[i] != e->topic_len
            || !same_text(d + tp[i], e->topic, tl[i])) {
            wrong = j;
            break;
        }
        m[j] = 1;
        identity &= count == i;
        h[count++] = i;
    }
    Py_END_ALLOW_THREADS
    PyMem_RawFree(part);
    PyObject *ret = NULL;
    if (no_memory) {
        PyErr_NoMemory();
    } else if (!ok) {
        PyErr_SetString(PyExc_ValueError, "expected rows and entries of matching lengths, ranges, slots and "
                                          "topics inside their tables, and room for the hits");
    } else {
        ret = Py_BuildValue("nnO", count, wrong, identity && count == n ? Py_True : Py_False);
    }
    Py_buffer *held[] = {&view, &pos, &size, &qid, &qoff, &tpos, &tlen, &phys, &order, &sizes, &bounds, &pslots,
                         &pfirsts, &qids, &toff, &tdata, &met, &hits};
    for (size_t k = 0; k < sizeof(held) / sizeof(held[0]); k++) {
        PyBuffer_Release(held[k]);
    }
    return ret;
}

/*
 * claim_entries(view, position, size, queue_id, queue_offset, topic_pos, topic_len, positions, sizes, bounds,
 *               part_slots, part_firsts, queue_ids, topic_offsets, topic_data, cursors, met, hits[, claims])
 *     -> (count, passed, identity)
 *
 * match_entries without the merge, for ranges of distinct queues each ascending: each row claims the
 * one entry it can be, the entry of its queue offset in the range of its queue id and topic (slots
 * as match_entries has them; positions and sizes int64 one range after another, range r from
 * bounds[r] to bounds[r + 1], of slot part_slots[r] from queue offset part_firsts[r] on), which must
 * lie at the row's position with the row's size.  Row indexes of the claimed entries go to hits in row
 * order (so in position order) and met[o] is set for each claimed entry o (range order).  Each range's
 * cursors[r] (in and out, int64) passes over its entries at or before the last row's position:
 * passed is how many.  count == passed says that every entry passed was claimed, each by the row
 * at its position: what match_entries finds of the same entries (none wrong, none unmet, the same hits).
 * Else the caller matches these rows by match_entries to find what is wrong, in its order.  identity:
 * every row claimed.  A slot outside the tables fails the call (ValueError).  O(rows + entries passed),
 * no merge.  claims (int64, one per row): the entry each row claims (-1: none) as decode_region found it
 * with these tables while it decoded the row: no row's topic, queue or entry read again here (the rows'
 * topics are not then read, nor their bounds checked).  Releases the GIL.
 */
static PyObject *
claim_entries(PyObject *module, PyObject *args)
{
    Py_buffer view, pos, size, qid, qoff, tpos, tlen, positions, sizes, bounds, pslots, pfirsts, qids, toff, tdata,
        cursors, met, hits, claims = {0};
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*y*y*y*y*y*y*y*y*y*y*w*w*w*|y*", &view, &pos, &size, &qid, &qoff, &tpos,
                          &tlen, &positions, &sizes, &bounds, &pslots, &pfirsts, &qids, &toff, &tdata, &cursors,
                          &met, &hits, &claims)) {
        return NULL;
    }
    Py_ssize_t n = pos.len / 8, entries = positions.len / 8, nparts = pslots.len / 8;
    const int64_t *p = pos.buf, *qo = qoff.buf, *tp = tpos.buf, *ep = positions.buf, *pb = bounds.buf,
                  *given = claims.buf;
    const int32_t *sz = size.buf, *qi = qid.buf, *tl = tlen.buf;
    const uint8_t *d = view.buf;
    int64_t *cur = cursors.buf, *h = hits.buf;
    uint8_t *m = met.buf;
    ClaimTable t;
    int ok = size.len == n * 4 && qid.len == n * 4 && qoff.len == n * 8 && tpos.len == n * 8 && tlen.len == n * 4
             && cursors.len == nparts * 8 && met.len >= entries && hits.len >= n * 8
             && (given == NULL || claims.len == n * 8);
    int built = ok ? claim_table_init(&t, &positions, &sizes, &bounds, &pslots, &pfirsts, &qids, &toff, &tdata) : 0;
    for (Py_ssize_t r = 0; built > 0 && r < nparts; r++) {
        ok = ok && pb[r] <= cur[r] && cur[r] <= pb[r + 1];
    }
    int no_memory = built < 0;
    ok = ok && built > 0;
    Py_ssize_t count = 0, passed = 0;
    Py_BEGIN_ALLOW_THREADS
    if (ok && given != NULL) {      /* each row's entry found by the walk that decoded it (decode_region) */
        for (Py_ssize_t i = 0; i < n; i++) {
            int64_t o = given[i];
            if (o >= 0) {
                if (o >= entries) {
                    ok = 0;
                    break;
                }
                m[o] = 1;
                h[count++] = i;
            }
        }
    } else {
        for (Py_ssize_t i = 0; ok && i < n; i++) {
            if (i + MATCH_AHEAD < n) {
                PREFETCH(d, view.len, tp[i + MATCH_AHEAD]);        /* as match_entries asks for it */
            }
            if (tp[i] < 0 || tl[i] < 0 || tp[i] + tl[i] > view.len) {
                ok = 0;
                break;
            }
            Py_ssize_t o = claim_one(&t, d + tp[i], tl[i], qi[i], qo[i], p[i], sz[i]);
            if (o >= 0) {
                m[o] = 1;
                h[count++] = i;
            }
        }
    }
    for (Py_ssize_t r = 0; ok && n > 0 && r < nparts; r++) {
        Py_ssize_t c = cur[r], end = pb[r + 1];
        while (c < end && ep[c] <= p[n - 1]) {
            c++;
        }
        passed += c - cur[r];
        cur[r] = c;
    }
    Py_END_ALLOW_THREADS
    if (built > 0) {
        claim_table_free(&t);
    }
    PyObject *ret = NULL;
    if (no_memory) {
        PyErr_NoMemory();
    } else if (!ok) {
        PyErr_SetString(PyExc_ValueError, "expected rows and entries of matching lengths, ranges, cursors, slots "
                                          "and topics inside their tables, room for the hits and claims of entries");
    } else {
        ret = Py_BuildValue("nnO", count, passed, count == n ? Py_True : Py_False);
    }
    Py_buffer *held[] = {&view, &pos, &size, &qid, &qoff, &tpos, &tlen, &positions, &sizes, &bounds, &pslots,
                         &pfirsts, &qids, &toff, &tdata, &cursors, &met, &hits};
    for (size_t k = 0; k < sizeof(held) / sizeof(held[0]); k++) {
        PyBuffer_Release(held[k]);
    }
    if (claims.obj != NULL) {
        PyBuffer_Release(&claims);
    }
    return ret;
}

/*
 * merge_order(positions, bounds, order[, sizes, phys, sorted_sizes]) -> bool
 *
 * The order that sorts positions (int64) stably, into order (int64, as many), where positions is
 * ranges one after another (range r from bounds[r] to bounds[r + 1], int64) each ascending (a queue's
 * entries): a merge of the ranges by a tree of losers over their heads, ties to the lower range (so
 * the order numpy's stable argsort gives).  With sizes (int64, as many as positions), the merge also writes
 * positions[order] to phys and sizes[order] to sorted_sizes (int64, as many each), as it goes: no
 * gather after it.  False, the outputs unspecified, where a range descends somewhere (a damaged
 * queue: the caller sorts).  O(n log ranges), no memory but the tree.  Releases the GIL.
 */
/* a range's head in merge_order's tree: its position, and the range (plus MERGE_DONE once it is done:
 * a done range goes after every live one, whatever the positions) */
typedef struct {
    int64_t key;
    int64_t tie;
} merge_head;

#define MERGE_DONE ((int64_t)1 << 48)

static PyObject *
merge_order(PyObject *module, PyObject *args)
{
    Py_buffer pos, bounds, order, sizes = {0}, phys = {0}, sorted = {0};
    if (!PyArg_ParseTuple(args, "y*y*w*|y*w*w*", &pos, &bounds, &order, &sizes, &phys, &sorted)) {
        return NULL;
    }
    Py_ssize_t n = pos.len / 8, parts = bounds.len / 8 - 1;
    const int64_t *p = pos.buf, *b = bounds.buf, *s = sizes.buf;
    int64_t *o = order.buf, *ph = phys.buf, *ss = sorted.buf;
    int ok = parts >= 0 && order.len == n * 8 && (parts == 0 ? n == 0 : b[0] == 0 && b[parts] == n)
             && (sizes.obj == NULL ? phys.obj == NULL && sorted.obj == NULL
                 : phys.obj != NULL && sorted.obj != NULL && sizes.len == n * 8 && phys.len == n * 8
                   && sorted.len == n * 8);
    for (Py_ssize_t r = 0; ok && r < parts; r++) {
        ok = b[r] <= b[r + 1];
    }
    int ascending = 1;
    ok = ok && parts < MERGE_DONE;
    Py_ssize_t leaves = 1;              /* the tree's leaves: the ranges, and done ones up to a power of 2 */
    while (ok && leaves < parts) {
        leaves *= 2;
    }
    merge_head *head = ok ? PyMem_RawMalloc((size_t)leaves * sizeof(merge_head)) : NULL;
    /* per leaf its cursor, then the tree (tree[0] the winner, tree[1..] each match's loser), then the
     * winners of the matches while it is built */
    Py_ssize_t *at = ok ? PyMem_RawMalloc((size_t)leaves * 4 * sizeof(Py_ssize_t)) : NULL;
    if (ok && (head == NULL || at == NULL)) {
        PyMem_RawFree(head);
        PyMem_RawFree(at);
        Py_buffer *held[] = {&pos, &bounds, &order, &sizes, &phys, &sorted};
        for (size_t k = 0; k < sizeof(held) / sizeof(held[0]); k++) {
            if (held[k]->obj != NULL) {
                PyBuffer_Release(held[k]);
            }
        }
        return PyErr_NoMemory();
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t r = 0; ok && ascending && r < parts; r++) {
        for (Py_ssize_t k = b[r] + 1; k < b[r + 1]; k++) {
            if (p[k] < p[k - 1]) {
                ascending = 0;
                break;
            }
        }
    }
/* whether range x's head goes before range y's: the smaller position, ties to the lower range; done
 * ranges last */
#define BEFORE(x, y) (head[x].key < head[y].key || (head[x].key == head[y].key && head[x].tie < head[y].tie))
    if (ok && ascending) {
        /* A tree of losers: each match of two ranges' heads keeps the loser, the winner going up; a
         * step replays only the matches on the way up from the range just taken from, one
         * comparison each (log2 ranges), and reads no position but the heads */
        Py_ssize_t *tree = at + leaves, *win = at + 2 * leaves;
        for (Py_ssize_t r = 0; r < leaves; r++) {
            int live = r < parts && b[r] < b[r + 1];
            at[r] = r < parts ? b[r] : 0;
            head[r].key = live ? p[b[r]] : INT64_MAX;
            head[r].tie = live ? r : MERGE_DONE + r;
            win[leaves + r] = r;
        }
        for (Py_ssize_t m = leaves - 1; m >= 1; m--) {
            Py_ssize_t x = win[2 * m], y = win[2 * m + 1];
            win[m] = BEFORE(y, x) ? y : x;
            tree[m] = win[m] == x ? y : x;
        }
        tree[0] = win[1];
        for (Py_ssize_t i = 0; i < n; i++) {
            Py_ssize_t r = tree[0], k = at[r]++;
            if (s != NULL) {
                ph[i] = head[r].key;
                ss[i] = s[k];
            }
            o[i] = k;
            if (k + 1 == b[r + 1]) {        /* range done */
                head[r].key = INT64_MAX;
                head[r].tie = MERGE_DONE + r;
            } else {
                head[r].key = p[k + 1];
            }
            for (Py_ssize_t m = (r + leaves) / 2; m >= 1; m /= 2) {
                Py_ssize_t other = tree[m];
                if (BEFORE(other, r)) {
                    tree[m] = r;
                    r = other;
                }
            }
            tree[0] = r;
        }
    }
#undef BEFORE
    Py_END_ALLOW_THREADS
    PyMem_RawFree(head);
    PyMem_RawFree(at);
    Py_buffer *held[] = {&pos, &bounds, &order, &sizes, &phys, &sorted};
    for (size_t k = 0; k < sizeof(held) / sizeof(held[0]); k++) {
        if (held[k]->obj != NULL) {
            PyBuffer_Release(held[k]);
        }
    }
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "expected ascending bounds from 0 to the positions' count, an "
                                          "order of as many, and sizes, phys and sorted sizes of as many "
                                          "or none");
        return NULL;
    }
    return PyBool_FromLong(ascending);
}

/*
 * next_boundary(view, pos, limit, base) -> int
 *
 * columnar.next_boundary: the first p in [pos, limit) where a whole header prefix fits in view
 * (p + BOUNDARY_PREFIX <= len(view)) and plausibly starts a message, a message magic at p + 4 and
 * a big-endian PHYSICALOFFSET equal to base + p at p + 28; limit where none does.  The sync mark
 * by which a parallel walk splits a file.  One memchr for the magics' first byte, the rest only
 * where it matched.  The Python reference (columnar.next_boundary_py) ran about twenty numpy calls
 * a call, each giving up the GIL: 0.1 s of CPU over the 894 ranges of a 4M-message scan on two
 * threads, and a wait for the GIL back after each.  The first BOUNDARY_HELD bytes are searched
 * with the GIL held (a message boundary lies a message away); the GIL is given up past them (a
 * range of zeros after a crashed file's data is searched whole).
 */
#define BOUNDARY_PREFIX 36
#define BOUNDARY_PHYSICAL_OFFSET_AT 28
#define BOUNDARY_HELD (64 << 10)

static Py_ssize_t
boundary_search(const uint8_t *buf, Py_ssize_t pos, Py_ssize_t end, int64_t base)
{
    /* candidates p in [pos, end): each a magic's first byte at p + 4 */
    while (pos < end) {
        const uint8_t *hit = memchr(buf + pos + 4, (uint8_t)((uint32_t)MESSAGE_MAGIC >> 24), (size_t)(end - pos));
        if (hit == NULL) {
            break;
        }
        Py_ssize_t p = (hit - buf) - 4;
        int32_t magic = get_i32(buf + p + 4);
        if ((magic == MESSAGE_MAGIC || magic == MESSAGE_MAGIC_V2)
            && get_i64(buf + p + BOUNDARY_PHYSICAL_OFFSET_AT) == base + p) {
            return p;
        }
        pos = p + 1;
    }
    return -1;
}

static PyObject *
next_boundary(PyObject *module, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t pos, limit;
    long long base;
    if (!PyArg_ParseTuple(args, "y*nnL", &view, &pos, &limit, &base)) {
        return NULL;
    }
    if (pos < 0) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "expected 0 <= pos");
        return NULL;
    }
    Py_ssize_t end = view.len - BOUNDARY_PREFIX + 1;     /* where a whole header prefix may start */
    if (end > limit) {
        end = limit;
    }
    Py_ssize_t found = -1;
    if (pos < end) {
        Py_ssize_t held = end - pos > BOUNDARY_HELD ? pos + BOUNDARY_HELD : end;
        found = boundary_search(view.buf, pos, held, base);
        if (found < 0 && held < end) {
            Py_BEGIN_ALLOW_THREADS
            found = boundary_search(view.buf, held, end, base);
            Py_END_ALLOW_THREADS
        }
    }
    PyBuffer_Release(&view);
    return PyLong_FromSsize_t(found < 0 ? limit : found);
}
