/*
 * segstore_rocketmq._speedups: the IndexFile put, index_put, and the loop the single append shares
 * (segstore/indexes/keyhash.py holds the Python reference); index_chains, the slots and links
 * verify expects of a file (verify.py's _chain_facts_reference); index_run_confirmed, a run of entries
 * against a walk's messages (recovery.Walked.confirms_index_run); index_key_runs, the runs of one message's
 * entries holding a hash twice (verify.py's _key_runs_py).
 *
 * Included by _speedups.c (one translation unit): the layouts, constants and helpers defined
 * there, and in the files included before this one, are this file's.
 */

/* ------------------------------------------------------------------------------ */
/* IndexFile put */

#define INDEX_HEADER_SIZE 40
#define INDEX_SLOT_SIZE 4
#define INDEX_ENTRY_SIZE 20
#define INDEX_INVALID 0
#define INDEX_FIRST_ENTRY 1
#define MS_PER_SECOND 1000

enum { H_BEGIN_TS, H_END_TS, H_BEGIN_PHY, H_END_PHY, H_SLOT_COUNT, H_INDEX_COUNT, N_HEADER };

static inline int32_t
get_i32(const uint8_t *p)
{
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3]);
}

/* Two big-endian halves: compilers turn get_i32's shifts into one load and a byte swap, which they
 * did not do for a loop over the eight bytes (a fifth of decode_row's time went to that loop). */
static inline int64_t
get_i64(const uint8_t *p)
{
    return (int64_t)(((uint64_t)(uint32_t)get_i32(p) << 32) | (uint32_t)get_i32(p + 4));
}

/* The slot of a key hash: hash % slot_num made >= 0 (Python's %, which keyhash.py uses). */
static inline int64_t
slot_of_hash(int64_t hash, Py_ssize_t slot_num)
{
    int64_t slot = hash % slot_num;
    return slot < 0 ? slot + slot_num : slot;
}

/*
 * Put entries (hs, ps, ts: n native int64 each) while the file has room (index_num entries), each as
 * IndexFile.putKey: chained to its slot's newest entry (if that is a valid entry number), the slot
 * then pointing at it; h is the header, updated.  Returns how many were put.  Runs no Python code.
 */
static Py_ssize_t
index_put_entries(long long *h, uint8_t *slot_table, Py_ssize_t slot_num, uint8_t *entry_table,
                  Py_ssize_t index_num, const int64_t *hs, const int64_t *ps, const int64_t *ts, Py_ssize_t n)
{
    Py_ssize_t put = 0;
    for (; put < n && h[H_INDEX_COUNT] < index_num; put++) {
        int64_t number = h[H_INDEX_COUNT];
        int64_t slot = slot_of_hash(hs[put], slot_num);
        uint8_t *slot_at = slot_table + slot * INDEX_SLOT_SIZE;
        int32_t prev = get_i32(slot_at);
        if (prev <= INDEX_INVALID || prev > number) {
            prev = INDEX_INVALID;
            h[H_SLOT_COUNT]++;
        }
        int64_t begin = h[H_BEGIN_TS], stamp = ts[put], diff = 0;
        if (begin > 0 && stamp > begin) {
            uint64_t seconds = ((uint64_t)stamp - (uint64_t)begin) / MS_PER_SECOND;
            diff = seconds > INT32_MAX ? INT32_MAX : (int64_t)seconds;
        }
        uint8_t *e = entry_table + number * INDEX_ENTRY_SIZE;
        e = put_i32(e, (int32_t)hs[put]);
        e = put_i64(e, ps[put]);
        e = put_i32(e, (int32_t)diff);
        put_i32(e, prev);
        put_i32(slot_at, (int32_t)number);
        if (number <= INDEX_FIRST_ENTRY) {
            h[H_BEGIN_PHY] = ps[put];
            h[H_BEGIN_TS] = stamp;
        }
        h[H_INDEX_COUNT] = number + 1;
        h[H_END_PHY] = ps[put];
        h[H_END_TS] = stamp;
    }
    return put;
}

/* The 40-byte header h at head (IndexHeader.pack). */
static void
index_put_head(uint8_t *head, const long long *h)
{
    uint8_t *p = head;
    for (int i = H_BEGIN_TS; i <= H_END_PHY; i++) {
        p = put_i64(p, h[i]);
    }
    p = put_i32(p, (int32_t)h[H_SLOT_COUNT]);
    put_i32(p, (int32_t)h[H_INDEX_COUNT]);
}

/*
 * index_put(head, slots, entries, slot_num, header, hashes, phys, stamps) -> (header, count)
 *
 * head: the file's 40-byte header (writable), rewritten from the header after the
 * puts (beginTimestamp, endTimestamp, beginPhyOffset, endPhyOffset i8, hashSlotCount,
 * indexCount i4); slots: the file's slot table (slot_num big-endian int32, writable); entries: its
 * entry table (index_num entries of 20 bytes: hash i4, phyOffset i8, timeDiff i4,
 * prevIndex i4); header: (beginTimestamp, endTimestamp, beginPhyOffset,
 * endPhyOffset, hashSlotCount, indexCount); hashes, phys, stamps: native int64
 * columns.  Entries are put while the file has room, each as IndexFile.putKey:
 * chained to its slot's newest entry (if that is a valid entry number), the slot
 * then pointing at it.  Returns the header after and how many were put.
 */
static PyObject *
index_put(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    /* arguments converted by hand (once per append: PyArg_ParseTuple's format walk cost more than the put) */
    Py_buffer head = {0}, slots = {0}, entries = {0}, hashes = {0}, phys = {0}, stamps = {0};
    Py_ssize_t slot_num;
    long long h[N_HEADER];
    PyObject *ret = NULL;
    if (nargs != 8) {
        PyErr_Format(PyExc_TypeError, "index_put() takes 8 arguments (%zd given)", nargs);
        return NULL;
    }
    if (!PyTuple_Check(args[4]) || PyTuple_GET_SIZE(args[4]) != N_HEADER) {
        PyErr_SetString(PyExc_TypeError, "expected the header as a tuple of 6 ints");
        return NULL;
    }
    slot_num = PyNumber_AsSsize_t(args[3], PyExc_OverflowError);
    if (slot_num == -1 && PyErr_Occurred()) {
        return NULL;
    }
    for (int i = 0; i < N_HEADER; i++) {
        if (arg_ll(PyTuple_GET_ITEM(args[4], i), &h[i]) < 0) {
            return NULL;
        }
    }
    if (PyObject_GetBuffer(args[0], &head, PyBUF_WRITABLE) < 0 ||
        PyObject_GetBuffer(args[1], &slots, PyBUF_WRITABLE) < 0 ||
        PyObject_GetBuffer(args[2], &entries, PyBUF_WRITABLE) < 0 ||
        PyObject_GetBuffer(args[5], &hashes, PyBUF_SIMPLE) < 0 ||
        PyObject_GetBuffer(args[6], &phys, PyBUF_SIMPLE) < 0 ||
        PyObject_GetBuffer(args[7], &stamps, PyBUF_SIMPLE) < 0) {
        goto done;
    }
    Py_ssize_t n = hashes.len / (Py_ssize_t)sizeof(int64_t);
    Py_ssize_t index_num = entries.len / INDEX_ENTRY_SIZE;
    if (head.len != INDEX_HEADER_SIZE || slot_num <= 0 || slots.len != slot_num * INDEX_SLOT_SIZE ||
        hashes.len % sizeof(int64_t) ||
        phys.len != hashes.len || stamps.len != hashes.len || h[H_INDEX_COUNT] < INDEX_FIRST_ENTRY) {
        PyErr_SetString(PyExc_ValueError, "expected a 40-byte header, slot_num 4-byte slots, equal int64 columns "
                                          "and indexCount >= 1");
        goto done;
    }
    Py_ssize_t put;
    /* the buffers held pin the IndexFile's map: the puts run without the GIL (a conversion's
       reading thread runs meanwhile; a first write into a page of the map can fault for long) */
    Py_BEGIN_ALLOW_THREADS
    put = index_put_entries(h, slots.buf, slot_num, entries.buf, index_num, hashes.buf, phys.buf, stamps.buf, n);
    Py_END_ALLOW_THREADS
    index_put_head(head.buf, h);
    PyObject *fields = PyTuple_New(N_HEADER);
    if (fields == NULL) {
        goto done;
    }
    for (int i = 0; i < N_HEADER; i++) {
        PyObject *v = PyLong_FromLongLong(h[i]);
        if (v == NULL) {
            Py_DECREF(fields);
            goto done;
        }
        PyTuple_SET_ITEM(fields, i, v);
    }
    PyObject *count = PyLong_FromSsize_t(put);
    if (count != NULL) {
        ret = PyTuple_Pack(2, fields, count);
        Py_DECREF(count);
    }
    Py_DECREF(fields);
done:
    PyBuffer_Release(&head);
    PyBuffer_Release(&slots);
    PyBuffer_Release(&entries);
    PyBuffer_Release(&hashes);
    PyBuffer_Release(&phys);
    PyBuffer_Release(&stamps);
    return ret;
}

/* ------------------------------------------------------------------------------ */
/* IndexFile chains, as verify checks them */

enum {
    CHAIN_NEGATIVE, CHAIN_WRONG_LINKS, CHAIN_FIRST_LINK, CHAIN_EXPECTED_LINK, CHAIN_WRONG_SLOTS, CHAIN_FIRST_SLOT,
    CHAIN_EXPECTED_SLOT, N_CHAIN_FACTS
};

/*
 * The chain facts of n entries (20 bytes each, as in the entry table) over slot_num slots (big-endian
 * int32): each entry should link to the newest entry before it whose hash falls in its slot
 * (hash % slot_num, made >= 0; INDEX_INVALID for the first), and each slot hold its newest entry
 * (INDEX_INVALID: none); slots holding index_count or more are skipped (verify reports them
 * apart).  last: slot_num zeroed int32, the scratch.  facts: see the enum; -1 where none.  O(n +
 * slot_num), runs no Python code.
 */
static void
index_chain_facts(const uint8_t *entries, Py_ssize_t n, const uint8_t *slots, Py_ssize_t slot_num,
                  long long index_count, int32_t *last, long long *facts)
{
    for (int i = 0; i < N_CHAIN_FACTS; i++) {
        facts[i] = -1;
    }
    facts[CHAIN_WRONG_LINKS] = facts[CHAIN_WRONG_SLOTS] = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        const uint8_t *e = entries + i * INDEX_ENTRY_SIZE;
        int64_t hash = get_i32(e);
        if (hash < 0 && facts[CHAIN_NEGATIVE] < 0) {
            facts[CHAIN_NEGATIVE] = i;
        }
        int64_t slot = slot_of_hash(hash, slot_num);
        int32_t expected = last[slot];
        if (get_i32(e + 16) != expected && facts[CHAIN_WRONG_LINKS]++ == 0) {
            facts[CHAIN_FIRST_LINK] = i;
            facts[CHAIN_EXPECTED_LINK] = expected;
        }
        last[slot] = (int32_t)(INDEX_FIRST_ENTRY + i);
    }
    for (Py_ssize_t s = 0; s < slot_num; s++) {
        int32_t held = get_i32(slots + s * INDEX_SLOT_SIZE);
        if (held != last[s] && held < index_count && facts[CHAIN_WRONG_SLOTS]++ == 0) {
            facts[CHAIN_FIRST_SLOT] = s;
            facts[CHAIN_EXPECTED_SLOT] = last[s];
        }
    }
}

/*
 * The usual case, a sound file, checked without index_chain_facts' scratch of an int32 per slot (20 MB
 * for the broker's 5M slots, a page fault per 4 KiB of it in each verify): every link points at an
 * earlier entry of its own slot or is INDEX_INVALID, no entry is linked to twice (linked: n zeroed
 * bits), every entry no other links to (a chain's newest) is what its slot holds, and no other slot
 * holds an entry below index_count.  Then each slot holds one chain through all its entries, newest
 * first: the links and slots index_chain_facts expects.  Returns 1 with facts filled as it would
 * fill them; 0 where anything differs (index_chain_facts then finds what).  O(n + slot_num).
 */
#define CHAIN_AHEAD 64
#if defined(__GNUC__)
#define CHAIN_PREFETCH(p) __builtin_prefetch(p)
#else
#define CHAIN_PREFETCH(p) do { } while (0)
#endif

static int
index_chains_sound(const uint8_t *entries, Py_ssize_t n, const uint8_t *slots, Py_ssize_t slot_num,
                   long long index_count, uint8_t *linked, long long *facts)
{
    /* An entry's link and a chain head's slot point anywhere in the file's entries (40 MB for 2M
     * entries) and slots (20 MB for the broker's 5M): a cache miss each, mostly a TLB miss too, one
     * after another.  They are asked for CHAIN_AHEAD entries ahead (a prefetch never faults), the
     * heads' slots kept in a ring meanwhile so each is computed once: a 2M-entry file's first check
     * 22-25 -> 19 ms of CPU, a second 18-20 -> 14 ms (16 and 48 ahead measured less). */
    int64_t ring[CHAIN_AHEAD];
    long long negative = -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (i + CHAIN_AHEAD < n) {
            int32_t ahead = get_i32(entries + (i + CHAIN_AHEAD) * INDEX_ENTRY_SIZE + 16);
            if (ahead >= INDEX_FIRST_ENTRY && ahead - INDEX_FIRST_ENTRY < n) {
                CHAIN_PREFETCH(entries + (ahead - INDEX_FIRST_ENTRY) * INDEX_ENTRY_SIZE);
            }
        }
        const uint8_t *e = entries + i * INDEX_ENTRY_SIZE;
        int64_t hash = get_i32(e);
        if (hash < 0 && negative < 0) {
            negative = i;
        }
        int32_t prev = get_i32(e + 16);
        if (prev == INDEX_INVALID) {
            continue;
        }
        if (prev < INDEX_FIRST_ENTRY || prev > i) {     /* entry i is number INDEX_FIRST_ENTRY + i */
            return 0;
        }
        Py_ssize_t p = prev - INDEX_FIRST_ENTRY;
        if (linked[p >> 3] & (1u << (p & 7))) {
            return 0;
        }
        linked[p >> 3] |= (uint8_t)(1u << (p & 7));
        if (slot_of_hash(get_i32(entries + p * INDEX_ENTRY_SIZE), slot_num) != slot_of_hash(hash, slot_num)) {
            return 0;
        }
    }
    Py_ssize_t heads = 0, held_slots = 0;
    for (Py_ssize_t i = 0; i < n + CHAIN_AHEAD; i++) {
        Py_ssize_t h = i - CHAIN_AHEAD;     /* the head checked now, CHAIN_AHEAD entries behind */
        if (h >= 0 && !(linked[h >> 3] & (1u << (h & 7)))) {
            int64_t slot = ring[h % CHAIN_AHEAD];
            if (get_i32(slots + slot * INDEX_SLOT_SIZE) != INDEX_FIRST_ENTRY + h || INDEX_FIRST_ENTRY + h >= index_count) {
                return 0;
            }
            heads++;
        }
        if (i < n && !(linked[i >> 3] & (1u << (i & 7)))) {     /* a head: its slot into the ring, asked for */
            ring[i % CHAIN_AHEAD] = slot_of_hash(get_i32(entries + i * INDEX_ENTRY_SIZE), slot_num);
            CHAIN_PREFETCH(slots + ring[i % CHAIN_AHEAD] * INDEX_SLOT_SIZE);
        }
    }
    for (Py_ssize_t s = 0; s < slot_num; s++) {
        int32_t held = get_i32(slots + s * INDEX_SLOT_SIZE);
        held_slots += held != INDEX_INVALID && held < index_count;
    }
    if (held_slots != heads) {      /* the heads' slots hold them: any other such slot is wrong */
        return 0;
    }
    for (int i = 0; i < N_CHAIN_FACTS; i++) {
        facts[i] = -1;
    }
    facts[CHAIN_WRONG_LINKS] = facts[CHAIN_WRONG_SLOTS] = 0;
    facts[CHAIN_NEGATIVE] = negative;
    return 1;
}

/*
 * index_chains(entries, slots, index_count) -> (first negative hash, wrong links, first wrong link,
 * its expected link, wrong slots, first wrong slot, its expected entry), -1 where none; entries and
 * slots as in index_put.  The GIL is released meanwhile.
 */
static PyObject *
index_chains(PyObject *module, PyObject *args)
{
    Py_buffer entries = {0}, slots = {0};
    long long index_count, facts[N_CHAIN_FACTS];
    PyObject *ret = NULL;
    if (!PyArg_ParseTuple(args, "y*y*L", &entries, &slots, &index_count)) {
        return NULL;
    }
    Py_ssize_t n = entries.len / INDEX_ENTRY_SIZE, slot_num = slots.len / INDEX_SLOT_SIZE;
    if (entries.len % INDEX_ENTRY_SIZE || slots.len % INDEX_SLOT_SIZE || slot_num == 0 ||
        n > (Py_ssize_t)INT32_MAX - INDEX_FIRST_ENTRY) {
        PyErr_SetString(PyExc_ValueError, "expected 20-byte entries, at least one 4-byte slot and fewer than "
                                          "2^31 - 1 entries");
        goto done;
    }
    uint8_t *linked = PyMem_RawCalloc((size_t)(n >> 3) + 1, 1);
    if (linked == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    int sound;
    Py_BEGIN_ALLOW_THREADS
    sound = index_chains_sound(entries.buf, n, slots.buf, slot_num, index_count, linked, facts);
    Py_END_ALLOW_THREADS
    PyMem_RawFree(linked);
    if (!sound) {
        int32_t *last = PyMem_RawCalloc((size_t)slot_num, sizeof(int32_t));
        if (last == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        Py_BEGIN_ALLOW_THREADS
        index_chain_facts(entries.buf, n, slots.buf, slot_num, index_count, last, facts);
        Py_END_ALLOW_THREADS
        PyMem_RawFree(last);
    }
    ret = Py_BuildValue("(LLLLLLL)", facts[0], facts[1], facts[2], facts[3], facts[4], facts[5], facts[6]);
done:
    PyBuffer_Release(&entries);
    PyBuffer_Release(&slots);
    return ret;
}

/*
 * index_run_confirmed(entries, lo, key_hashes, key_offsets, phy) -> bool
 *
 * Whether the IndexFile entries ``entries`` (entries lo + 1, lo + 2, ... of their file, as stored) are
 * exactly a walk's messages' entries in put order from the message at their first entry's offset
 * (phy: the messages' offsets, ascending; key_offsets: n + 1, where each one's entry hashes start in
 * key_hashes; all int64), each with a time diff >= 0 and a previous entry from INDEX_INVALID to below
 * its own number: Walked.confirms_index_run's numpy reference in one pass over the entries where they
 * lie (its big-endian fields converted, compared and the messages' offsets repeated, column by column,
 * took 20 ms of a 1M-message verify).  Releases the GIL.
 */
static PyObject *
index_run_confirmed(PyObject *module, PyObject *args)
{
    Py_buffer entries, hashes, offsets, phys;
    long long lo;
    if (!PyArg_ParseTuple(args, "y*Ly*y*y*", &entries, &lo, &hashes, &offsets, &phys)) {
        return NULL;
    }
    Py_ssize_t count = entries.len / INDEX_ENTRY_SIZE, total = hashes.len / (Py_ssize_t)sizeof(int64_t);
    Py_ssize_t n = phys.len / (Py_ssize_t)sizeof(int64_t);
    int ok = entries.len % INDEX_ENTRY_SIZE == 0 && offsets.len == (n + 1) * (Py_ssize_t)sizeof(int64_t) && lo >= 0;
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "expected 20-byte entries, lo >= 0 and n + 1 key offsets for n offsets");
    }
    int same = ok && count > 0;
    const uint8_t *e = entries.buf;
    const int64_t *h = hashes.buf, *ko = offsets.buf, *p = phys.buf;
    Py_BEGIN_ALLOW_THREADS
    Py_ssize_t m = 0;
    if (same) {     /* the first message at or after the first entry's offset (numpy's searchsorted) */
        int64_t first_phy = get_i64(e + 4);
        Py_ssize_t a = 0, b = n;
        while (a < b) {
            Py_ssize_t mid = a + (b - a) / 2;
            if (p[mid] < first_phy) {
                a = mid + 1;
            } else {
                b = mid;
            }
        }
        m = a;
        same = ko[m] >= 0 && ko[m] + count <= total;
    }
    Py_ssize_t k = same ? (Py_ssize_t)ko[m] : 0;
    for (Py_ssize_t j = 0; same && j < count; j++, k++) {
        const uint8_t *at = e + j * INDEX_ENTRY_SIZE;
        int32_t diff = get_i32(at + 12), prev = get_i32(at + 16);
        while (m < n && ko[m + 1] <= k) {       /* the message whose entries hold position k */
            m++;
        }
        same = diff >= 0 && prev >= INDEX_INVALID && prev < lo + j + 1 && m < n &&
               (int64_t)get_i32(at) == h[k] && get_i64(at + 4) == p[m];
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&entries);
    PyBuffer_Release(&hashes);
    PyBuffer_Release(&offsets);
    PyBuffer_Release(&phys);
    if (!ok) {
        return NULL;
    }
    return PyBool_FromLong(same);
}

/* The longest run of one message's entries index_key_runs follows (longer: None, numpy's sort instead). */
#define KEY_RUN_MAX 64

/*
 * index_key_runs(entries, carry_phy, carry, chunk) -> (segments, tail_start) | None
 *
 * The runs of one message's IndexFile entries that hold a hash twice, as verify.py's _key_runs_py finds
 * them chunk by chunk (chunk entries at a time; a run is the entries of one commitlog offset one after
 * another, carry the hashes of the run the entries before ended with, at carry_phy, which the first
 * entry joins when it has that offset): segments, int64 triples (s, e, rs) in file order, one for each
 * run and chunk where the run from its start rs (negative: -len(carry), the run began before these
 * entries) to e (exclusive) holds a hash twice, s the run's first entry in that chunk; tail_start, the
 * start of the run the entries end with.  None where an offset falls below the one before it or a run
 * grows past KEY_RUN_MAX entries: the reference's sort handles those.  O(entries * run), one pass over
 * the entries where they lie (the numpy version converted and compared each chunk's columns several
 * times: 12 ms of a 1M-message verify).  Releases the GIL.
 */
static PyObject *
index_key_runs(PyObject *module, PyObject *args)
{
    Py_buffer entries, carry;
    long long carry_phy, chunk;
    if (!PyArg_ParseTuple(args, "y*Ly*L", &entries, &carry_phy, &carry, &chunk)) {
        return NULL;
    }
    PyObject *ret = NULL;
    Py_ssize_t n = entries.len / INDEX_ENTRY_SIZE, c = carry.len / (Py_ssize_t)sizeof(int64_t);
    if (entries.len % INDEX_ENTRY_SIZE != 0 || carry.len % (Py_ssize_t)sizeof(int64_t) != 0 || chunk <= 0) {
        PyErr_SetString(PyExc_ValueError, "expected 20-byte entries, int64 carried hashes and chunk > 0");
        goto done;
    }
    if (c > KEY_RUN_MAX) {
        Py_INCREF(Py_None);
        ret = Py_None;
        goto done;
    }
    Py_ssize_t cap = 64, used = 0;
    int64_t *seg = PyMem_RawMalloc((size_t)cap * 3 * sizeof(int64_t));
    if (seg == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    const uint8_t *e = entries.buf;
    const int64_t *carried = carry.buf;
    int64_t window[KEY_RUN_MAX];
    int sound = 1, nomem = 0;
    Py_ssize_t run_start = 0, run_len = 0;
    Py_BEGIN_ALLOW_THREADS
    int dup = 0;
    int64_t run_phy = 0;
    if (n > 0 && c > 0 && get_i64(e + 4) == carry_phy) {     /* the first entry goes on with the carried run */
        for (Py_ssize_t k = 0; k < c; k++) {
            for (Py_ssize_t j = 0; j < k && !dup; j++) {
                dup = carried[j] == carried[k];
            }
            window[k] = carried[k];
        }
        run_start = -c;
        run_len = c;
        run_phy = carry_phy;
    }
    Py_ssize_t chunk_start = 0, next_chunk = (Py_ssize_t)chunk;
    for (Py_ssize_t i = 0; i <= n && sound; i++) {
        const uint8_t *at = e + i * INDEX_ENTRY_SIZE;
        int64_t phy = i < n ? get_i64(at + 4) : 0;
        int boundary = i == n || i == next_chunk, ends = run_len > 0 && (i == n || phy != run_phy);
        if (i > 0 && i < n && phy < run_phy) {
            sound = 0;
            break;
        }
        if (boundary || ends) {     /* the run's segment in this chunk is done */
            Py_ssize_t s = run_start > chunk_start ? run_start : chunk_start;
            if (dup && s < i) {
                if (used == cap) {
                    int64_t *more = PyMem_RawRealloc(seg, (size_t)cap * 6 * sizeof(int64_t));
                    if (more == NULL) {
                        nomem = 1;
                        break;
                    }
                    seg = more;
                    cap *= 2;
                }
                seg[3 * used] = s;
                seg[3 * used + 1] = i;
                seg[3 * used + 2] = run_start;
                used++;
            }
            if (boundary) {
                chunk_start = i;
                next_chunk = i + (Py_ssize_t)chunk;
            }
        }
        if (i == n) {
            break;
        }
        if (ends || run_len == 0) {
            run_start = i;
            run_len = 0;
            run_phy = phy;
            dup = 0;
        }
        if (run_len == KEY_RUN_MAX) {
            sound = 0;
            break;
        }
        int64_t hash = (int64_t)get_i32(at);
        for (Py_ssize_t j = 0; j < run_len && !dup; j++) {
            dup = window[j] == hash;
        }
        window[run_len++] = hash;
    }
    Py_END_ALLOW_THREADS
    if (nomem) {
        PyErr_NoMemory();
    } else if (!sound) {
        Py_INCREF(Py_None);
        ret = Py_None;
    } else {
        PyObject *segments = PyBytes_FromStringAndSize((const char *)seg, used * 3 * (Py_ssize_t)sizeof(int64_t));
        if (segments != NULL) {
            ret = Py_BuildValue("(Nn)", segments, run_start);
        }
    }
    PyMem_RawFree(seg);
done:
    PyBuffer_Release(&entries);
    PyBuffer_Release(&carry);
    return ret;
}
