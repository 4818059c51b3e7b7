/*
 * segstore_rocketmq._speedups: the common appends in one call each, Appender (fastappend.appender).
 *
 * Included by _speedups.c (one translation unit): the layouts, constants and helpers defined
 * there, and in the files included before this one, are this file's.
 */

/* ------------------------------------------------------------------------------ */
/* the single and batch append: Appender */

/*
 * Appender(store, commitlog, flusher, index, clock, topic_configs, store_ip, store_port, keys_first, file_size,
 *          limit, writeback)
 * .append(item) -> AppendResult | None
 * .append_batch(items) -> [AppendResult] | None     (items: a list)
 *
 * What RocketMQStore.append and append_batch do for plain items (see encode_plain; the same parse and
 * the same bytes), in one call: the messages encoded into the active commitlog file's map at the data
 * end, each queue's entries written at its end, the IndexFile entries put (index_put's loop), all
 * through the files' maps within their reserved blocks (through the descriptors, as files.MappedFile.write,
 * where a file reserves none), and what the Python path updates afterwards set on the Python objects
 * themselves: CommitLogFile.wrote, each log's dirty set, ConsumeQueueFile._count, store._next_offsets,
 * the IndexFile header, the flusher's bookkeeping (FlushService.appended).  Nothing is cached between
 * calls: every position is read from those objects at each call, so any Python path may run between
 * two calls.
 *
 * None, nothing changed, for anything the common path does not hold and the store's general path
 * (store._append) does, for any item of a batch: an item that is not plain or of a topic not validated
 * yet, the flusher's lock held by another thread, messages that do not fit in the reserved blocks of
 * the active commitlog file with 8 bytes to spare (a roll, a BLANK, a reservation), a queue not yet
 * made or whose active file has no reserved room for its entries, a topic config to extend, IndexFile
 * entries that need a new file or a reservation, extra index layouts (store.indexes), the properties
 * style not yet known, an empty batch.
 *
 * store._clock is called once a call for the store time unless clock is None (then the wall clock,
 * time.time_ns() // 10**6).  Holds the GIL throughout, and the flusher's lock while it writes.
 */
#include <time.h>
#include <unistd.h>
#include <errno.h>

#define INDEX_STACK_ENTRIES 16

enum {
    S_ACTIVE, S_WROTE, S_BASE, S_FILE, S_MM, S_RESERVED, S_QUEUES, S_LOG, S_SEGMENTS, S_LAST, S_COUNT, S_FD,
    S_SIZE, S_NEXT_OFFSETS, S_TOPICS, S_WRITE_QUEUE_NUMS, S_FILES, S_HEADER, S_INDEX_NUM, S_SLOT_NUM, S_DIRTY,
    S_APPENDED_END, S_LAST_STORE_TS, S_CQ_DIRTY_ENTRIES, S_CQ_LAST_TS, S_ACQUIRE, S_RELEASE, S_APPENDED,
    S_WRITE, S_INDEXES, S_TRAILING, S_PLAIN_TOPICS, S_RESERVING,
    S_HEADER_FIELDS,    /* then the IndexHeader fields, N_HEADER of them in the order of H_* */
    N_STR = S_HEADER_FIELDS + N_HEADER
};
static const char *const STR_NAMES[N_STR] = {
    "_active", "wrote", "base", "file", "_mm", "reserved", "queues", "log", "segments", "_last", "_count", "_fd",
    "size", "_next_offsets", "topics", "writeQueueNums", "files", "header", "index_num", "slot_num", "_dirty",
    "_appended_end", "_last_store_ts", "_cq_dirty_entries", "_cq_last_ts", "acquire", "release", "appended",
    "write", "indexes", "_trailing_separator", "_plain_topics", "_reserving",
    "begin_timestamp", "end_timestamp", "begin_phy_offset", "end_phy_offset", "hash_slot_count", "index_count",
};
static PyObject *str_[N_STR];

typedef struct {
    PyObject_HEAD
    PyObject *store, *commitlog, *flusher, *acquire, *release, *index, *clock, *topic_configs, *ip;
    /* acquire, release: the flusher's lock's bound methods */
    int32_t port;
    int keys_first;
    long long file_size, limit, writeback;
} Appender;

/*
 * Attribute access (through getattr, half of a call's instructions when measured).  What a call reads
 * and sets lies in __slots__ members, read and set at their offset in the object: every class a call
 * touches declares the names it reads there (the store, CommitLog, CommitLogFile, the queues'
 * ConsumeQueue, SegmentedLog and ConsumeQueueFile, MappedFile, the flusher, the topic configs, the
 * IndexService, IndexFile and IndexHeader; 2026-11-29: 17-20% more single appends a second than with
 * the dicts).  A name in an instance dict instead is read and set in the dict.  Which one is found once
 * per (name, type), from the type (a member descriptor, as init() finds AppendResult's; no data
 * descriptor of that name: the instance dict decides, as getattr's look-up does).  Anything else (a
 * property, a name the dict lacks, a fifth type of one name) goes through getattr.
 */
#define IN_DICT (-2)
#define SLOT_WAYS 4     /* "file" is read on three types, "base" and "log" on two */
typedef struct {
    PyTypeObject *type;     /* owned; NULL: free */
    Py_ssize_t offset;      /* -1: not a writable object member of type */
} SlotAt;
static SlotAt slot_at[N_STR][SLOT_WAYS];

static Py_ssize_t
member_offset(PyTypeObject *type, PyObject *name)
{
    PyObject *descr = _PyType_Lookup(type, name);     /* borrowed: what getattr finds on the type */
    if (descr != NULL && Py_TYPE(descr)->tp_descr_set == NULL) {
        descr = NULL;       /* a method or class attribute: the instance dict comes first */
    }
    Py_XINCREF(descr);
    Py_ssize_t offset = -1;
    if (descr == NULL) {
        return type->tp_dictoffset != 0 ? IN_DICT : -1;
    }
    if (Py_IS_TYPE(descr, &PyMemberDescr_Type) && ((PyMemberDescrObject *)descr)->d_member->type == T_OBJECT_EX &&
        !(((PyMemberDescrObject *)descr)->d_member->flags & READONLY)) {
        offset = ((PyMemberDescrObject *)descr)->d_member->offset;
    }
    Py_DECREF(descr);
    return offset;
}

/* Where o keeps name: its offset, IN_DICT, or -1 (getattr's business).  Inlined into its callers: it
   runs about forty times a call, and the first way almost always answers. */
static inline __attribute__((always_inline)) Py_ssize_t
slot_of(PyObject *o, int name)
{
    PyTypeObject *t = Py_TYPE(o);
    for (int w = 0; w < SLOT_WAYS; w++) {
        SlotAt *at = &slot_at[name][w];
        if (at->type == t) {
            return at->offset;
        }
        if (at->type == NULL) {
            at->offset = member_offset(t, str_[name]);
            at->type = (PyTypeObject *)Py_NewRef(t);
            return at->offset;
        }
    }
    return -1;
}

/* getattr(o, str_[name]): a new reference, NULL with the exception set. */
static inline PyObject *
get_attr(PyObject *o, int name)
{
    Py_ssize_t offset = slot_of(o, name);
    if (offset >= 0) {
        PyObject *v = *(PyObject **)((char *)o + offset);
        if (v != NULL) {
            return Py_NewRef(v);
        }
    } else if (offset == IN_DICT) {
        PyObject *dict = PyObject_GenericGetDict(o, NULL);
        if (dict == NULL) {
            return NULL;
        }
        PyObject *v = PyDict_GetItemWithError(dict, str_[name]);
        Py_DECREF(dict);
        if (v != NULL) {
            return Py_NewRef(v);
        }
        if (PyErr_Occurred()) {
            return NULL;
        }
    }
    return PyObject_GetAttr(o, str_[name]);   /* an unset member or missing key raises its AttributeError */
}

/* setattr(o, str_[name], value): 0, or -1 with the exception set.  Steals nothing. */
static int
set_attr(PyObject *o, int name, PyObject *value)
{
    Py_ssize_t offset = slot_of(o, name);
    if (offset >= 0) {
        Py_XSETREF(*(PyObject **)((char *)o + offset), Py_NewRef(value));
        return 0;
    }
    if (offset == IN_DICT) {
        PyObject *dict = PyObject_GenericGetDict(o, NULL);
        if (dict == NULL) {
            return -1;
        }
        int rc = PyDict_SetItem(dict, str_[name], value);
        Py_DECREF(dict);
        return rc;
    }
    return PyObject_SetAttr(o, str_[name], value);
}

/* getattr(o, str_[name]) as a long long; 0 ok, -1 error, 1 not an int (not plain). */
static int
attr_ll(PyObject *o, int name, long long *out)
{
    PyObject *v = get_attr(o, name);
    if (v == NULL) {
        return -1;
    }
    int rc = 1;
    if (PyLong_CheckExact(v)) {
        *out = PyLong_AsLongLong(v);
        rc = *out == -1 && PyErr_Occurred() ? -1 : 0;
    }
    Py_DECREF(v);
    return rc;
}

/* Whether a MappedFile keeps blocks reserved ahead of its writer (False on a filesystem without
   posix_fallocate: then nothing is written through its map, as files.MappedFile.write does).  0/1, -1 error. */
static int
reserving(PyObject *mapped)
{
    PyObject *v = get_attr(mapped, S_RESERVING);
    if (v == NULL) {
        return -1;
    }
    int rc = PyObject_IsTrue(v);
    Py_DECREF(v);
    return rc;
}

/* fd's bytes [at, at + n) = data, by pwrite; on a failure the file's own write (files.MappedFile.write), which
   raises the typed error (or writes them).  0 ok, -1 error. */
static int
write_through(PyObject *mapped, int fd, const uint8_t *data, Py_ssize_t n, long long at)
{
    Py_ssize_t done = 0;
    while (done < n) {
        ssize_t w = pwrite(fd, data + done, (size_t)(n - done), (off_t)(at + done));
        if (w <= 0) {
            if (w < 0 && errno == EINTR) {
                continue;
            }
            PyObject *res = PyObject_CallMethod(mapped, "write", "Ly#", at + done, data + done, n - done);
            if (res == NULL) {
                return -1;
            }
            Py_DECREF(res);
            return 0;
        }
        done += w;
    }
    return 0;
}

static int
set_ll(PyObject *o, int name, long long value)
{
    PyObject *v = PyLong_FromLongLong(value);
    if (v == NULL) {
        return -1;
    }
    int rc = set_attr(o, name, v);
    Py_DECREF(v);
    return rc;
}

/* log._dirty[seg.base] = seg (SegmentedLog.mark_dirty). */
static int
mark_dirty(PyObject *log, PyObject *seg, long long base)
{
    PyObject *dirty = get_attr(log, S_DIRTY);
    PyObject *key = PyLong_FromLongLong(base);
    int rc = dirty == NULL || key == NULL ? -1 : PyDict_SetItem(dirty, key, seg);
    Py_XDECREF(dirty);
    Py_XDECREF(key);
    return rc;
}

static int
appender_traverse(Appender *self, visitproc visit, void *arg)
{
    Py_VISIT(self->store);
    Py_VISIT(self->commitlog);
    Py_VISIT(self->flusher);
    Py_VISIT(self->acquire);
    Py_VISIT(self->release);
    Py_VISIT(self->index);
    Py_VISIT(self->clock);
    Py_VISIT(self->topic_configs);
    Py_VISIT(self->ip);
    return 0;
}

static int
appender_clear(Appender *self)
{
    Py_CLEAR(self->store);
    Py_CLEAR(self->commitlog);
    Py_CLEAR(self->flusher);
    Py_CLEAR(self->acquire);
    Py_CLEAR(self->release);
    Py_CLEAR(self->index);
    Py_CLEAR(self->clock);
    Py_CLEAR(self->topic_configs);
    Py_CLEAR(self->ip);
    return 0;
}

static void
appender_dealloc(Appender *self)
{
    PyObject_GC_UnTrack(self);
    appender_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int
appender_init(Appender *self, PyObject *args, PyObject *kwds)
{
    PyObject *store, *commitlog, *flusher, *index, *clock, *topic_configs, *ip;
    int port, keys_first;
    long long file_size, limit, writeback;
    if (!PyArg_ParseTuple(args, "OOOOOOSipLLL", &store, &commitlog, &flusher, &index, &clock, &topic_configs, &ip,
                          &port, &keys_first, &file_size, &limit, &writeback)) {
        return -1;
    }
    if ((PyBytes_GET_SIZE(ip) != IPV4_LEN && PyBytes_GET_SIZE(ip) != IPV6_LEN) ||
        file_size <= END_FILE_MIN_BLANK_LENGTH || writeback <= 0) {
        PyErr_SetString(PyExc_ValueError, "expected a 4- or 16-byte store IP, a file size above 8, writeback > 0");
        return -1;
    }
    if (result_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "init(AppendResult) was not called");
        return -1;
    }
    PyObject *lock = PyObject_GetAttrString(flusher, "lock");
    if (lock == NULL) {
        return -1;
    }
    PyObject *acquire = PyObject_GetAttr(lock, str_[S_ACQUIRE]);
    PyObject *release = acquire == NULL ? NULL : PyObject_GetAttr(lock, str_[S_RELEASE]);
    Py_DECREF(lock);
    if (release == NULL) {
        Py_XDECREF(acquire);
        return -1;
    }
    appender_clear(self);
    self->store = Py_NewRef(store);
    self->commitlog = Py_NewRef(commitlog);
    self->flusher = Py_NewRef(flusher);
    self->acquire = acquire;
    self->release = release;
    self->index = Py_NewRef(index);
    self->clock = Py_NewRef(clock);
    self->topic_configs = Py_NewRef(topic_configs);
    self->ip = Py_NewRef(ip);
    self->port = (int32_t)port;
    self->keys_first = keys_first;
    self->file_size = file_size;
    self->limit = limit < file_size - END_FILE_MIN_BLANK_LENGTH ? limit : file_size - END_FILE_MIN_BLANK_LENGTH;
    self->writeback = writeback;
    return 0;
}

/* The IndexFile an append puts into (index.files[-1]) and what it needs of it. */
typedef struct {
    PyObject *file;    /* the IndexFile, owned */
    PyObject *header;  /* its IndexHeader, owned */
    PyObject *mm;      /* its MappedFile's map, owned */
    long long h[N_HEADER], was[N_HEADER], index_num, slot_num;    /* was: h as read */
} IndexTarget;

static void
index_target_clear(IndexTarget *t)
{
    Py_CLEAR(t->file);
    Py_CLEAR(t->header);
    Py_CLEAR(t->mm);
}

/* 0: t filled and k entries fit it with no reservation; 1: not the common path; -1: error. */
static int
index_target(PyObject *index, Py_ssize_t k, int64_t phys, IndexTarget *t)
{
    PyObject *files = get_attr(index, S_FILES);
    if (files == NULL) {
        return -1;
    }
    if (!PyList_CheckExact(files) || PyList_GET_SIZE(files) == 0) {
        Py_DECREF(files);
        return 1;
    }
    t->file = Py_NewRef(PyList_GET_ITEM(files, PyList_GET_SIZE(files) - 1));
    Py_DECREF(files);
    t->header = get_attr(t->file, S_HEADER);
    if (t->header == NULL) {
        return -1;
    }
    int rc;
    for (int i = 0; i < N_HEADER; i++) {
        PyObject *v = get_attr(t->header, S_HEADER_FIELDS + i);
        if (v == NULL) {
            return -1;
        }
        rc = 1;
        if (PyLong_CheckExact(v)) {
            t->h[i] = t->was[i] = PyLong_AsLongLong(v);
            rc = t->h[i] == -1 && PyErr_Occurred() ? -1 : 0;
        }
        Py_DECREF(v);
        if (rc) {
            return rc;
        }
    }
    long long reserved, size;
    if ((rc = attr_ll(t->file, S_INDEX_NUM, &t->index_num)) || (rc = attr_ll(t->file, S_SLOT_NUM, &t->slot_num))) {
        return rc;
    }
    PyObject *mapped = get_attr(t->file, S_FILE);
    if (mapped == NULL) {
        return -1;
    }
    int reserves = reserving(mapped);
    rc = reserves < 0 ? -1 : attr_ll(mapped, S_RESERVED, &reserved);
    if (rc == 0) {
        rc = attr_ll(mapped, S_SIZE, &size);
    }
    if (rc == 0) {
        t->mm = get_attr(mapped, S_MM);
        rc = t->mm == NULL ? -1 : 0;
    }
    Py_DECREF(mapped);
    if (rc) {
        return rc;
    }
    long long end = INDEX_HEADER_SIZE + t->slot_num * INDEX_SLOT_SIZE + (t->h[H_INDEX_COUNT] + k) * INDEX_ENTRY_SIZE;
    /* full, or filled by these entries (the general path opens the next file, for a message after the
       one that fills it too: RocketMQStore._open_index_after_full), past the reserved blocks (it
       reserves), behind the file's end offset (IndexService.put_hashes skips such entries), or a header
       the loop refuses */
    if (t->mm == Py_None || t->slot_num <= 0 || t->h[H_INDEX_COUNT] < INDEX_FIRST_ENTRY ||
        t->h[H_INDEX_COUNT] >= t->index_num || t->h[H_INDEX_COUNT] + k >= t->index_num || (reserves && end > reserved) ||
        end > size || phys < t->h[H_END_PHY]) {
        return 1;
    }
    return 0;
}

/* The queue-config check of the Python path (TopicConfigs.ensure would change nothing): 0 yes, 1 no. */
static int
queue_configured(PyObject *topic_configs, PyObject *topic, int32_t queue_id)
{
    PyObject *topics = get_attr(topic_configs, S_TOPICS);
    if (topics == NULL) {
        return -1;
    }
    int rc = 1;
    PyObject *entry = PyDict_CheckExact(topics) ? PyDict_GetItemWithError(topics, topic) : NULL;
    if (entry != NULL && PyDict_CheckExact(entry)) {
        PyObject *nums = PyDict_GetItemWithError(entry, str_[S_WRITE_QUEUE_NUMS]);
        if (nums != NULL && PyLong_CheckExact(nums)) {
            long long n = PyLong_AsLongLong(nums);
            rc = n == -1 && PyErr_Occurred() ? -1 : (n >= (long long)queue_id + 1 ? 0 : 1);
        }
    }
    if (PyErr_Occurred()) {
        rc = -1;
    }
    Py_DECREF(topics);
    return rc;
}

/* One queue a call appends to: what the checks found of it, and where its messages' rows go. */
typedef struct {
    PyObject *key;      /* (topic, queue_id), owned */
    PyObject *topic;    /* borrowed from the item that named it first */
    int32_t queue_id;
    PyObject *log;      /* the queue's SegmentedLog, owned */
    PyObject *seg;      /* its active ConsumeQueueFile, owned */
    PyObject *file;     /* that file's MappedFile, owned */
    long long count, base, fd, next;    /* entries in the active file, its base, its descriptor; the next offset */
    int reserving;
    Py_ssize_t n, row, seen;    /* the call's messages to it, the first of their rows, rows made */
    uint32_t prefix;    /* the Java hash of "topic#" (its index keys' start), once prefixed */
    int prefixed;
} Target;

/* Items handled without allocating (a single append, a small batch): their messages, queues and rows. */
#define STACK_ITEMS 32
/* Queues found by a scan of those seen; past this many, through a dict of their keys. */
#define QUEUE_SCAN 16

/* The index of m's queue among qs[0, nq) (a scan, or slots once there are more than QUEUE_SCAN), or -1
   (not among them); -2 on an error. */
static Py_ssize_t
find_target(const Target *qs, Py_ssize_t nq, PyObject *slots, const Msg *m)
{
    if (slots == NULL) {
        for (Py_ssize_t q = nq - 1; q >= 0; q--) {  /* the latest first: a batch runs to one queue at a time */
            if (qs[q].queue_id == m->queue_id_value &&
                (qs[q].topic == m->topic || PyUnicode_Compare(qs[q].topic, m->topic) == 0)) {
                return q;
            }
        }
        return -1;
    }
    PyObject *key = PyTuple_Pack(2, m->topic, m->queue_id);
    if (key == NULL) {
        return -2;
    }
    PyObject *slot = PyDict_GetItemWithError(slots, key);
    Py_DECREF(key);
    if (slot == NULL) {
        return PyErr_Occurred() ? -2 : -1;
    }
    return PyLong_AsSsize_t(slot);
}

static int
add_slot(PyObject *slots, PyObject *key, Py_ssize_t q)
{
    PyObject *slot = PyLong_FromSsize_t(q);
    int rc = slot == NULL ? -1 : PyDict_SetItem(slots, key, slot);
    Py_XDECREF(slot);
    return rc;
}

/*
 * The append of items[0, n) under the lock, in one go: every item parsed, every file's room checked,
 * every object returned made before a byte is written.  The result (many: the list of them), Py_None
 * (not the common path: nothing changed) or NULL (an error).
 */
static PyObject *
append_items(Appender *self, PyObject *const *items, Py_ssize_t n, int many)
{
    PyObject *ret = NULL, *topic_fields = NULL, *seg = NULL, *mapped = NULL, *mm = NULL, *queues = NULL,
             *next_offsets = NULL, *cl_log = NULL, *indexes = NULL, *trailing_obj = NULL, *slots = NULL,
             *out = NULL, *stamp = NULL;
    IndexTarget it = {0};
    Msg msg_stack[STACK_ITEMS];
    Target target_stack[STACK_ITEMS];
    uint8_t row_stack[STACK_ITEMS * CQ_ROW_SIZE];
    int64_t idx_stack[3 * INDEX_STACK_ENTRIES];
    Msg *msgs = msg_stack;
    Target *qs = target_stack;
    uint8_t *rows = row_stack, *data = NULL;
    int64_t *idx = idx_stack;
    Py_buffer dest = {0};
    Py_ssize_t nq = 0;
    int rc;

    /* extra index layouts and the properties style: the general path's */
    indexes = get_attr(self->store, S_INDEXES);
    trailing_obj = indexes == NULL ? NULL : get_attr(self->store, S_TRAILING);
    if (trailing_obj == NULL) {
        goto done;
    }
    if (indexes != Py_None || !PyBool_Check(trailing_obj) || n <= 0) {
        ret = Py_NewRef(Py_None);
        goto done;
    }
    long long now;
    if (self->clock == Py_None) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        now = (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    } else {
        PyObject *t = PyObject_CallNoArgs(self->clock);
        if (t == NULL) {
            goto done;
        }
        if (!PyLong_CheckExact(t)) {  /* the general path converts it */
            Py_DECREF(t);
            ret = Py_NewRef(Py_None);
            goto done;
        }
        now = PyLong_AsLongLong(t);
        Py_DECREF(t);
        if (now == -1 && PyErr_Occurred()) {
            goto done;
        }
    }
    Py_ssize_t ip_len = PyBytes_GET_SIZE(self->ip);
    const uint8_t *ip = (const uint8_t *)PyBytes_AS_STRING(self->ip);
    Py_ssize_t header_size = HEADER_V4 + (ip_len == IPV6_LEN ? 2 * (IPV6_LEN - IPV4_LEN) : 0);
    int32_t sys_flag = ip_len == IPV6_LEN ? (SYSFLAG_BORNHOST_V6 | SYSFLAG_STOREHOST_V6) : 0;
    topic_fields = get_attr(self->store, S_PLAIN_TOPICS);
    if (topic_fields == NULL) {
        goto done;
    }
    if (!PyDict_CheckExact(topic_fields)) {
        ret = Py_NewRef(Py_None);
        goto done;
    }
    if (n > STACK_ITEMS) {
        msgs = PyMem_Malloc((size_t)n * sizeof(Msg));
        qs = PyMem_Malloc((size_t)n * sizeof(Target));
        rows = PyMem_Malloc((size_t)n * CQ_ROW_SIZE);
        if (msgs == NULL || qs == NULL || rows == NULL) {
            PyErr_NoMemory();
            goto done;
        }
    }

    /* every item parsed (plain, of a validated topic), its queue found, the sizes summed */
    Py_ssize_t total = 0, k = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        Msg *m = &msgs[i];
        rc = parse_item(items[i], topic_fields, now, header_size, (Py_ssize_t)self->limit,
                        trailing_obj == Py_True, m);
        if (rc < 0) {
            goto done;
        }
        if (rc) {
            ret = Py_NewRef(Py_None);
            goto done;
        }
        Py_ssize_t q = find_target(qs, nq, slots, m);
        if (q == -2) {
            goto done;
        }
        if (q < 0) {
            Target *t = &qs[nq];
            memset(t, 0, sizeof(Target));
            q = nq++;
            t->topic = m->topic;
            t->queue_id = m->queue_id_value;
            t->key = PyTuple_Pack(2, m->topic, m->queue_id);
            if (t->key == NULL) {
                goto done;
            }
            if (slots == NULL && nq > QUEUE_SCAN) {
                if ((slots = PyDict_New()) == NULL) {
                    goto done;
                }
                for (Py_ssize_t j = 0; j < nq; j++) {
                    if (add_slot(slots, qs[j].key, j) < 0) {
                        goto done;
                    }
                }
            } else if (slots != NULL && add_slot(slots, t->key, q) < 0) {
                goto done;
            }
        }
        m->slot = q;
        qs[q].n++;
        total += m->size;
        if (self->index != Py_None) {
            k += index_tokens(m);
        }
    }

    /* the commitlog: room in the active file's reserved blocks, with 8 bytes to spare (no BLANK) */
    long long wrote, base, reserved;
    seg = get_attr(self->commitlog, S_ACTIVE);
    if (seg == NULL) {
        goto done;
    }
    if (seg == Py_None) {
        ret = Py_NewRef(Py_None);
        goto done;
    }
    if ((rc = attr_ll(seg, S_WROTE, &wrote)) || (rc = attr_ll(seg, S_BASE, &base))) {
        goto not_common;
    }
    mapped = get_attr(seg, S_FILE);
    if (mapped == NULL) {
        goto done;
    }
    long long cl_fd;
    int cl_reserving = reserving(mapped);
    if (cl_reserving < 0) {
        goto done;
    }
    if ((rc = attr_ll(mapped, S_RESERVED, &reserved)) || (rc = attr_ll(mapped, S_FD, &cl_fd))) {
        goto not_common;
    }
    mm = get_attr(mapped, S_MM);
    if (mm == NULL) {
        goto done;
    }
    /* in place within the reserved blocks (CommitLog.unwritten_map); a file that reserves none is
       written through its descriptor (CommitLog.write_batch); a file's first message takes the general
       path, which tells the flusher before it is written (CommitLog.before_file_begun) */
    long long room = cl_reserving && reserved < self->file_size ? reserved : self->file_size;
    if (mm == Py_None || cl_fd < 0 || wrote <= 0 || wrote + total + END_FILE_MIN_BLANK_LENGTH > room) {
        ret = Py_NewRef(Py_None);
        goto done;
    }
    int64_t start = base + wrote;

    /* each queue: made already, its active file with reserved slots for its entries, its topic config
       holding it */
    queues = get_attr(self->store, S_QUEUES);
    next_offsets = queues == NULL ? NULL : get_attr(self->store, S_NEXT_OFFSETS);
    if (next_offsets == NULL) {
        goto done;
    }
    if (!PyDict_CheckExact(queues) || !PyDict_CheckExact(next_offsets)) {
        ret = Py_NewRef(Py_None);
        goto done;
    }
    Py_ssize_t row = 0;
    for (Py_ssize_t q = 0; q < nq; q++) {
        Target *t = &qs[q];
        t->row = row;
        row += t->n;
        PyObject *cq = PyDict_GetItemWithError(queues, t->key);
        if (cq == NULL) {
            if (!PyErr_Occurred()) {
                ret = Py_NewRef(Py_None);
            }
            goto done;
        }
        t->log = get_attr(cq, S_LOG);
        PyObject *segments = t->log == NULL ? NULL : get_attr(t->log, S_SEGMENTS);
        if (segments == NULL) {
            goto done;
        }
        t->seg = get_attr(segments, S_LAST);
        Py_DECREF(segments);
        if (t->seg == NULL) {
            goto done;
        }
        if (t->seg == Py_None) {
            ret = Py_NewRef(Py_None);
            goto done;
        }
        if ((rc = attr_ll(t->seg, S_COUNT, &t->count)) || (rc = attr_ll(t->seg, S_BASE, &t->base))) {
            goto not_common;
        }
        t->file = get_attr(t->seg, S_FILE);
        if (t->file == NULL) {
            goto done;
        }
        long long cq_reserved, cq_size;
        if ((rc = attr_ll(t->file, S_RESERVED, &cq_reserved)) || (rc = attr_ll(t->file, S_SIZE, &cq_size)) ||
            (rc = attr_ll(t->file, S_FD, &t->fd))) {
            goto not_common;
        }
        t->reserving = reserving(t->file);
        if (t->reserving < 0) {
            goto done;
        }
        long long end = (t->count + t->n) * CQ_ROW_SIZE;
        if (t->count < 0 || t->fd < 0 || end > cq_size || (t->reserving && end > cq_reserved)) {
            ret = Py_NewRef(Py_None);
            goto done;
        }
        if ((rc = queue_configured(self->topic_configs, t->topic, t->queue_id))) {
            goto not_common;
        }
        PyObject *next = PyDict_GetItemWithError(next_offsets, t->key);
        if (next == NULL && PyErr_Occurred()) {
            goto done;
        }
        int64_t value = 0;
        if (next != NULL && (rc = plain_int(next, 0, 0, INT64_MAX - n, &value))) {
            goto not_common;
        }
        t->next = value;
    }

    /* the IndexFile: the messages' entries fit the last file's reserved entries */
    if (self->index != Py_None) {
        if ((rc = index_target(self->index, k, start, &it))) {
            goto not_common;
        }
        if (k > INDEX_STACK_ENTRIES) {
            idx = PyMem_Malloc(3 * (size_t)k * sizeof(int64_t));
            if (idx == NULL) {
                PyErr_NoMemory();
                goto done;
            }
        }
    }

    /* every check passed: the results first (nothing is written unless every one is made) */
    if (many && (out = PyList_New(n)) == NULL) {
        goto done;
    }
    int64_t pos = start, last_stamp = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        Msg *m = &msgs[i];
        Target *t = &qs[m->slot];
        m->phys = pos;
        m->queue_offset = t->next + t->seen++;
        pos += m->size;
        if (stamp == NULL || m->store_ts != last_stamp) {
            Py_XSETREF(stamp, PyLong_FromLongLong(m->store_ts));
            if (stamp == NULL) {
                goto done;
            }
            last_stamp = m->store_ts;
        }
        PyObject *id = msg_id(ip, ip_len, self->port, m->phys);
        PyObject *res = id == NULL ? NULL : make_result(m->topic, m->queue_id, m->queue_offset, m->phys, m->size,
                                                        id, stamp);
        Py_XDECREF(id);
        if (res == NULL) {
            goto done;
        }
        if (many) {
            PyList_SET_ITEM(out, i, res);
        } else {
            out = res;
        }
    }

    /* the messages, their queue rows and index entries */
    uint8_t *at;
    if (cl_reserving) {
        if (PyObject_GetBuffer(mm, &dest, PyBUF_WRITABLE) < 0) {
            goto done;
        }
        if (dest.len < wrote + total) {
            PyErr_SetString(PyExc_ValueError, "expected the commitlog map to hold the reserved blocks");
            goto done;
        }
        at = (uint8_t *)dest.buf + wrote;
    } else {
        at = data = PyMem_Malloc((size_t)total);
        if (data == NULL) {
            PyErr_NoMemory();
            goto done;
        }
    }
    IndexOut iout = {idx, idx + k, idx + 2 * k, 0};
    for (Py_ssize_t q = 0; q < nq; q++) {
        qs[q].seen = 0;
    }
    PyObject *last_tags = NULL;     /* the tags code of the last tags object hashed (a batch's repeat) */
    int64_t tags_code = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        Msg *m = &msgs[i];
        Target *t = &qs[m->slot];
        at = put_message(at, m, m->queue_offset, m->phys, sys_flag, ip, ip_len, self->port, self->keys_first);
        uint8_t *r = rows + (t->row + t->seen++) * CQ_ROW_SIZE;
        r = put_i64(r, m->phys);
        r = put_i32(r, (int32_t)m->size);
        if (m->tags != last_tags) {
            last_tags = m->tags;
            tags_code = m->tags != NULL ? (int32_t)java_hash(0, m->tags, 0, PyUnicode_GET_LENGTH(m->tags)) : 0;
        }
        put_i64(r, tags_code);
        if (self->index != Py_None && m->keys != NULL) {
            if (!t->prefixed) {
                t->prefix = java_hash(0, m->topic, 0, PyUnicode_GET_LENGTH(m->topic)) * 31u + TOPIC_KEY_SEPARATOR;
                t->prefixed = 1;
            }
            uint32_t prefix = t->prefix;
            if (PyUnicode_CheckExact(m->keys)) {
                index_string(&iout, prefix, m->keys, m->phys, m->store_ts);
            } else {
                Py_ssize_t nk = PySequence_Fast_GET_SIZE(m->keys);
                PyObject **ks = PySequence_Fast_ITEMS(m->keys);
                for (Py_ssize_t j = 0; j < nk; j++) {
                    index_string(&iout, prefix, ks[j], m->phys, m->store_ts);
                }
            }
        }
    }
    if (cl_reserving) {
        PyBuffer_Release(&dest);
    } else if (write_through(mapped, (int)cl_fd, data, total, wrote) < 0) {
        goto done;
    }
    /* CommitLog.written_in_place */
    long long after = wrote + total;
    if (set_ll(seg, S_WROTE, after) < 0) {
        goto done;
    }
    if (wrote / self->writeback != after / self->writeback) {   /* MappedFile.appended: starts writeback */
        PyObject *r = PyObject_CallMethod(mapped, "appended", "LL", wrote, after);
        if (r == NULL) {
            goto done;
        }
        Py_DECREF(r);
    }
    cl_log = get_attr(self->commitlog, S_LOG);
    if (cl_log == NULL || mark_dirty(cl_log, seg, base) < 0) {
        goto done;
    }
    /* each queue's entries (ConsumeQueue.append_packed), its next offset: in place within the queue
       file's reserved blocks, as the commitlog (a pwrite of 20 bytes cost about 1 us on ext4, the
       inode's time updated through the journal on every call, against 0.04 us through the map); a
       file that reserves none through its descriptor (files.MappedFile.write) */
    for (Py_ssize_t q = 0; q < nq; q++) {
        Target *t = &qs[q];
        PyObject *next_value = PyLong_FromLongLong(t->next + t->n);
        if (next_value == NULL || PyDict_SetItem(next_offsets, t->key, next_value) < 0) {
            Py_XDECREF(next_value);
            goto done;
        }
        Py_DECREF(next_value);
        const uint8_t *from = rows + t->row * CQ_ROW_SIZE;
        Py_ssize_t len = t->n * CQ_ROW_SIZE;
        if (t->reserving) {
            PyObject *cq_mm = get_attr(t->file, S_MM);
            if (cq_mm == NULL) {
                goto done;
            }
            int got = cq_mm == Py_None ? -1 : PyObject_GetBuffer(cq_mm, &dest, PyBUF_WRITABLE);
            Py_DECREF(cq_mm);
            if (got < 0) {
                if (!PyErr_Occurred()) {
                    PyErr_SetString(PyExc_ValueError, "expected the consume-queue file to be mapped");
                }
                goto done;
            }
            if (dest.len < t->count * CQ_ROW_SIZE + len) {
                PyErr_SetString(PyExc_ValueError, "expected the consume-queue map to hold the reserved blocks");
                goto done;
            }
            memcpy((uint8_t *)dest.buf + t->count * CQ_ROW_SIZE, from, (size_t)len);
            PyBuffer_Release(&dest);
        } else if (write_through(t->file, (int)t->fd, from, len, t->count * CQ_ROW_SIZE) < 0) {
            goto done;
        }
        if (set_ll(t->seg, S_COUNT, t->count + t->n) < 0 || mark_dirty(t->log, t->seg, t->base) < 0) {
            goto done;
        }
    }
    /* the key index (IndexFile.put) */
    if (k > 0) {
        if (PyObject_GetBuffer(it.mm, &dest, PyBUF_WRITABLE) < 0) {
            goto done;
        }
        long long entries_at = INDEX_HEADER_SIZE + it.slot_num * INDEX_SLOT_SIZE;
        if (dest.len < entries_at + it.index_num * INDEX_ENTRY_SIZE) {
            PyErr_SetString(PyExc_ValueError, "expected the IndexFile map to hold its slots and entries");
            goto done;
        }
        uint8_t *b = dest.buf;
        index_put_entries(it.h, b + INDEX_HEADER_SIZE, (Py_ssize_t)it.slot_num, b + entries_at,
                          (Py_ssize_t)it.index_num, idx, idx + k, idx + 2 * k, k);
        index_put_head(b, it.h);
        PyBuffer_Release(&dest);
        for (int i = 0; i < N_HEADER; i++) {   /* the fields that changed (begin_* seldom do) */
            if (it.h[i] != it.was[i] && set_ll(it.header, S_HEADER_FIELDS + i, it.h[i]) < 0) {
                goto done;
            }
        }
    }
    /* FlushService.appended */
    long long dirty_entries;
    if (set_ll(self->flusher, S_APPENDED_END, pos) < 0 ||
        set_attr(self->flusher, S_LAST_STORE_TS, stamp) < 0 ||      /* stamp: the last message's */
        attr_ll(self->flusher, S_CQ_DIRTY_ENTRIES, &dirty_entries) != 0 ||
        set_ll(self->flusher, S_CQ_DIRTY_ENTRIES, dirty_entries + n) < 0 ||
        set_attr(self->flusher, S_CQ_LAST_TS, stamp) < 0) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError, "expected FlushService._cq_dirty_entries an int");
        }
        goto done;
    }
    ret = out;
    out = NULL;
    goto done;

not_common:
    if (rc > 0) {
        ret = Py_NewRef(Py_None);
    }
done:
    if (dest.obj != NULL) {
        PyBuffer_Release(&dest);
    }
    if (idx != idx_stack) {
        PyMem_Free(idx);
    }
    PyMem_Free(data);
    for (Py_ssize_t q = 0; q < nq; q++) {
        Py_XDECREF(qs[q].key);
        Py_XDECREF(qs[q].log);
        Py_XDECREF(qs[q].seg);
        Py_XDECREF(qs[q].file);
    }
    if (msgs != msg_stack) {
        PyMem_Free(msgs);
    }
    if (qs != target_stack) {
        PyMem_Free(qs);
    }
    if (rows != row_stack) {
        PyMem_Free(rows);
    }
    index_target_clear(&it);
    Py_XDECREF(out);
    Py_XDECREF(stamp);
    Py_XDECREF(slots);
    Py_XDECREF(indexes);
    Py_XDECREF(trailing_obj);
    Py_XDECREF(topic_fields);
    Py_XDECREF(seg);
    Py_XDECREF(mapped);
    Py_XDECREF(mm);
    Py_XDECREF(queues);
    Py_XDECREF(next_offsets);
    Py_XDECREF(cl_log);
    return ret;
}

/* append_items(items, n, many) holding the flusher's lock, if it is free at once: a flusher holding it
   (or another writer) sends the items to the general path, which waits for it (Py_None). */
static PyObject *
append_holding_lock(Appender *self, PyObject *const *items, Py_ssize_t n, int many)
{
    if (self->store == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Appender not initialised");
        return NULL;
    }
    PyObject *got = PyObject_CallOneArg(self->acquire, Py_False);
    if (got == NULL) {
        return NULL;
    }
    int taken = PyObject_IsTrue(got);
    Py_DECREF(got);
    if (taken <= 0) {
        return taken < 0 ? NULL : Py_NewRef(Py_None);
    }
    PyObject *ret = append_items(self, items, n, many);
    PyObject *exc_type, *exc_value, *exc_tb;
    PyErr_Fetch(&exc_type, &exc_value, &exc_tb);
    PyObject *released = PyObject_CallNoArgs(self->release);
    if (released == NULL) {
        Py_XDECREF(exc_type);
        Py_XDECREF(exc_value);
        Py_XDECREF(exc_tb);
        Py_XDECREF(ret);
        return NULL;
    }
    Py_DECREF(released);
    PyErr_Restore(exc_type, exc_value, exc_tb);
    return ret;
}

static PyObject *
appender_append(Appender *self, PyObject *item)
{
    return append_holding_lock(self, &item, 1, 0);
}

static PyObject *
appender_append_batch(Appender *self, PyObject *items)
{
    if (!PyList_CheckExact(items)) {
        Py_RETURN_NONE;     /* the general path takes any iterable */
    }
    /* the list is the caller's: no Python code runs while the call reads it (no item is replaced) */
    return append_holding_lock(self, PySequence_Fast_ITEMS(items), PyList_GET_SIZE(items), 1);
}

static PyMethodDef appender_methods[] = {
    {"append", (PyCFunction)appender_append, METH_O,
     "append(item) -> AppendResult, or None: not the common path (nothing changed; take the general one)."},
    {"append_batch", (PyCFunction)appender_append_batch, METH_O,
     "append_batch(items) -> [AppendResult], or None: not the common path for every item (nothing changed; "
     "take the general one)."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject AppenderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "segstore_rocketmq._speedups.Appender",
    .tp_basicsize = sizeof(Appender),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The single and batch append of a RocketMQ store in one call (see the comment atop _speedups_single.c).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)appender_init,
    .tp_dealloc = (destructor)appender_dealloc,
    .tp_traverse = (traverseproc)appender_traverse,
    .tp_clear = (inquiry)appender_clear,
    .tp_methods = appender_methods,
};
