/*
 * segstore_kafka._speedups: the hot loops of the Kafka RecordBatch v2 codec, one translation unit of
 * one file per concern, each with a pure-Python reference it is tested equal to:
 *
 *   _speedups_records.c      decode_records: a records region into Record objects
 *   _speedups_encode.c       encode_records: Record objects into a records region
 *   _speedups_crc.c          crc32c: the batch checksum
 *   _speedups_columns.c      decode_columns: a log region's batches into column buffers
 *   _speedups_json.c         json_lines: the dump --json lines of those buffers
 *   _speedups_text.c         text_lines: the text dump's lines of those buffers
 *   _speedups_spread.c       the per-batch columns written out once per row
 *   _speedups_arrow.c        export_chunk: a decoded chunk's columns as one Arrow record batch
 *   _speedups_arrowencode.c  encode_columns / encode_batch: records and batches from Arrow columns
 *   _speedups_partitioner.c  murmur2: the Java producer's partition of a keyed record
 *   _speedups_dicts.c        append_batch of plain dicts
 *
 * This file holds what they share (the record layout below, varints, constants), init(Record) and
 * the module.  setup.py builds this file only; its SOURCE_HASH covers the included files too
 * (segstore.speedups.source_files).  The functions:
 *
 * decode_records(region, count, base_offset, base_timestamp, log_append_time, base_sequence)
 *     -> list[Record]: decode an uncompressed record region (the bytes after the
 *     61-byte batch header, or the decompressed stream).
 * encode_records(records, offset_deltas) -> (region bytes, base_timestamp, max_timestamp)
 * init(Record): remember the Record dataclass (slots) and where its slots live.
 * crc32c(data, crc=0) -> int: CRC-32C (SSE 4.2 on three blocks at once where the CPU has it, else a table).
 * decode_columns(log, pos, end, want, decompress, buffers): a log region's v2 batches into
 *     the column buffers of columnar.py (see there and _speedups_columns.c).
 * json_lines(prefix, timestamp_types, tails, buffers, n_rows, n_batches) -> bytes: the
 *     dump --json lines of those buffers (ASCII).
 * text_lines(heads, timestamp_types, tails, buffers, n_rows, n_batches, start) -> bytes: the text
 *     dump's batch and record lines of those buffers (_speedups_text.c).
 * encode_columns / encode_batch: a records region / a whole batch from Arrow column buffers
 *     (arrowencode.py).
 * murmur2 / murmur2_offsets: Kafka's Utils.murmur2 of one key / of an Arrow binary array's values
 *     (partitioner.py).
 * plain_groups / plain_bounds / encode_plain / plain_results / init_results(AppendResult): append_batch of
 *     plain dicts (dictappend.py): grouped by partition (a keyed dict naming none routed as the
 *     Java producer routes it), one whole batch per partition, results.
 *
 * These mirror _decode_records_py / _encode_records_py in batch.py exactly: the
 * same results, the same ValueError(message, position) on malformed input.  Every
 * read is bounds-checked against the end of the current record, so malformed
 * input raises and never reads out of bounds.  Record layout (DefaultRecord.java):
 *
 *     varint   length of the rest
 *     int8     attributes
 *     varlong  timestampDelta
 *     varint   offsetDelta
 *     varint   keyLength (<0: null), key
 *     varint   valueLength (<0: null), value
 *     varint   headerCount, then per header:
 *              varint keyLength (>= 0), UTF-8 key, varint valueLength (<0: null), value
 *
 * Varints are zigzag-encoded, 7 bits per byte, least significant group first.
 * The functions hold the GIL throughout and keep no state besides the Record
 * type set once by init(); they are safe to call from any thread.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>

#include "speedups_common.h"

#define MAX_VARINT_BYTES 5
#define MAX_VARLONG_BYTES 10
#define NULL_LENGTH (-1)
#define NO_SEQUENCE (-1)
#define NO_TIMESTAMP (-1)
/* The smallest record: length, attributes, timestampDelta, offsetDelta, keyLength,
 * valueLength and headerCount of one byte each. */
#define MIN_RECORD_SIZE 7

enum { F_OFFSET, F_TIMESTAMP, F_KEY, F_VALUE, F_HEADERS, F_ATTRIBUTES, F_SIZE, F_SEQUENCE, N_FIELDS };
static const char *const FIELD_NAMES[N_FIELDS] = {
    "offset", "timestamp", "key", "value", "headers", "attributes", "size_in_bytes", "sequence",
};

static PyTypeObject *record_type = NULL;
static Py_ssize_t field_offset[N_FIELDS];

/* ------------------------------------------------------------------------------ */
/* varints */

enum { VARINT_OK = 0, VARINT_SHORT = 1, VARINT_BAD = 2 };

/* Unsigned 7-bit groups at buf[*pos], at most max_bytes of them, not past end. */
static inline int
read_unsigned(const uint8_t *buf, Py_ssize_t end, Py_ssize_t *pos, int max_bytes, uint64_t *out)
{
    uint64_t raw = 0;
    Py_ssize_t p = *pos;
    if (p < end && buf[p] < 0x80) {     /* one byte: header lengths, deltas of small batches */
        *pos = p + 1;
        *out = buf[p];
        return VARINT_OK;
    }
    /* two bytes: record lengths, value lengths and deltas up to 8191 (most records' other varints);
     * the loop below gives the same for them, a dozen instructions more each */
    if (end - p >= 2 && buf[p + 1] < 0x80) {
        *pos = p + 2;
        *out = (uint64_t)(buf[p] & 0x7F) | ((uint64_t)buf[p + 1] << 7);
        return VARINT_OK;
    }
    for (int i = 0; i < max_bytes; i++) {
        if (p >= end) {
            return VARINT_SHORT;
        }
        uint8_t byte = buf[p++];
        if (i == MAX_VARLONG_BYTES - 1 && (byte & 0x7E)) {
            return VARINT_BAD; /* more than 64 bits */
        }
        raw |= (uint64_t)(byte & 0x7F) << (7 * i);
        if (!(byte & 0x80)) {
            *pos = p;
            *out = raw;
            return VARINT_OK;
        }
    }
    return VARINT_BAD; /* max_bytes bytes, the last still saying "more follows" */
}

static inline int
read_varlong(const uint8_t *buf, Py_ssize_t end, Py_ssize_t *pos, int64_t *out)
{
    uint64_t raw;
    int rc = read_unsigned(buf, end, pos, MAX_VARLONG_BYTES, &raw);
    if (rc == VARINT_OK) {
        *out = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
    }
    return rc;
}

static inline int
read_varint(const uint8_t *buf, Py_ssize_t end, Py_ssize_t *pos, int32_t *out)
{
    uint64_t raw;
    int rc = read_unsigned(buf, end, pos, MAX_VARINT_BYTES, &raw);
    if (rc != VARINT_OK) {
        return rc;
    }
    if (raw > UINT32_MAX) {
        return VARINT_BAD;
    }
    *out = (int32_t)((uint32_t)(raw >> 1) ^ -(uint32_t)(raw & 1));
    return VARINT_OK;
}

static inline uint64_t
zigzag64(int64_t value)
{
    return ((uint64_t)value << 1) ^ (uint64_t)(value >> 63);
}

static inline int
unsigned_size(uint64_t raw)
{
    int n = 1;
    while (raw > 0x7F) {
        raw >>= 7;
        n++;
    }
    return n;
}

static inline uint8_t *
write_unsigned(uint8_t *out, uint64_t raw)
{
    while (raw > 0x7F) {
        *out++ = (uint8_t)((raw & 0x7F) | 0x80);
        raw >>= 7;
    }
    *out++ = (uint8_t)raw;
    return out;
}

#include "_speedups_records.c"
#include "_speedups_encode.c"
#include "_speedups_crc.c"
#include "_speedups_columns.c"
#include "_speedups_json.c"
#include "_speedups_text.c"
#include "_speedups_spread.c"
#include "_speedups_arrow.c"

/* ------------------------------------------------------------------------------ */
/* init */

/* Slots class ``cls`` (at most MAX_SLOT_FIELDS ``names``): its members' offsets into ``offsets_out``
 * and the class into ``*type_out``; both left as they were where it is not one. */
#define MAX_SLOT_FIELDS 8
static PyObject *
take_slots_class(PyObject *cls, const char *const *names, int n, Py_ssize_t *offsets_out,
                 PyTypeObject **type_out)
{
    Py_ssize_t offsets[MAX_SLOT_FIELDS];
    if (n > MAX_SLOT_FIELDS) {
        PyErr_Format(PyExc_SystemError, "take_slots_class: %d fields, room for %d", n, MAX_SLOT_FIELDS);
        return NULL;
    }
    if (slot_offsets(cls, names, n, offsets) < 0) {
        return NULL;
    }
    memcpy(offsets_out, offsets, (size_t)n * sizeof(Py_ssize_t));
    Py_INCREF(cls);
    Py_XSETREF(*type_out, (PyTypeObject *)cls);
    Py_RETURN_NONE;
}

static PyObject *
init(PyObject *module, PyObject *cls)
{
    return take_slots_class(cls, FIELD_NAMES, N_FIELDS, field_offset, &record_type);
}


#include "_speedups_arrowencode.c"
#include "_speedups_partitioner.c"
#include "_speedups_dicts.c"

static PyMethodDef methods[] = {
    {"init", init, METH_O, "init(Record): the slots dataclass decode_records builds."},
    {"decode_records", decode_records, METH_VARARGS,
     "decode_records(region, count, base_offset, base_timestamp, log_append_time, base_sequence) -> list"},
    {"encode_records", encode_records, METH_VARARGS,
     "encode_records(records, offset_deltas) -> (region, base_timestamp, max_timestamp)"},
    {"encode_columns", encode_columns, METH_VARARGS,
     "encode_columns(n, base_timestamp, rows, key valid/offsets/data, value valid/offsets/data, timestamps, "
     "deltas, header offsets, header key offsets/data, header value valid/offsets/data) -> (region, max_ts)"},
    {"encode_batch", encode_batch, METH_VARARGS,
     "encode_batch(n, base_timestamp, <encode_columns' columns>, header, compress) -> one whole batch"},
    {"plain_groups", plain_groups, METH_VARARGS,
     "plain_groups(items, counts) -> None or ([(topic, partition, rows, bound, routed)], snapshot): plain items "
     "by partition"},
    {"murmur2", murmur2_py, METH_O, "murmur2(data) -> int: Kafka's Utils.murmur2 (a signed int32)."},
    {"murmur2_offsets", murmur2_offsets, METH_VARARGS,
     "murmur2_offsets(offsets, data) -> bytes: the int32 murmur2 of each value of an Arrow binary array"},
    {"encode_plain", encode_plain, METH_VARARGS,
     "encode_plain(items, snapshot, rows, bound, now, header, compress) -> one whole batch of plain items"},
    {"plain_bounds", plain_bounds, METH_VARARGS,
     "plain_bounds(items, rows) -> bytes: the int64 record size bound of each plain item at rows"},
    {"plain_results", plain_results, METH_VARARGS,
     "plain_results(results, rows, topic, partition, base_offset, position, size, extra)"},
    {"init_results", init_results, METH_O, "init_results(AppendResult): the slots dataclass of results."},
    {"init_message", init_message, METH_O, "init_message(Message): the slots dataclass plain items may be."},
    {"crc32c", crc32c_py, METH_VARARGS, "crc32c(data, crc=0) -> int: CRC-32C, as the crc32c package."},
    {"valid_v2_end", valid_v2_end, METH_VARARGS,
     "valid_v2_end(buf, start, rising=0) -> int: the end of the run of whole v2 batches whose CRC holds "
     "(and, rising, whose last offsets rise)."},
    {"decode_columns", decode_columns, METH_VARARGS,
     "decode_columns(log, pos, end, want, decompress, buffers) -> (stop, pos, counts, need)"},
    {"json_lines", json_lines, METH_VARARGS,
     "json_lines(prefix, timestamp_types, tails, buffers, n_rows, n_batches) -> bytes"},
    {"spread_runs", spread_runs, METH_VARARGS,
     "spread_runs(counts, ((source, target, itemsize), ...)): each source item counts[i] times in target"},
    {"export_chunk", export_chunk, METH_VARARGS,
     "export_chunk(codes, counts, buffers, scratch, topic, partition, segment) -> address of an ArrowArray"},
    {"export_scratch", export_scratch, METH_VARARGS,
     "export_scratch(codes, rows, topic_len) -> the scratch bytes export_chunk needs for those columns"},
    {"release_export", release_export, METH_O,
     "release_export(address): release an ArrowArray export_chunk made that was not imported"},
    {"text_lines", text_lines, METH_VARARGS,
     "text_lines(heads, timestamp_types, tails, buffers, n_rows, n_batches, start) -> bytes"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "segstore_kafka._speedups",
    "C loops of the Kafka RecordBatch v2 record codec (see batch.py for the reference).", -1, methods,
};

#ifndef SEGSTORE_SOURCE_HASH
#define SEGSTORE_SOURCE_HASH ""    /* built without setup.py: not checked */
#endif

PyMODINIT_FUNC
PyInit__speedups(void)
{
    str_key = PyUnicode_InternFromString("key");
    str_value = PyUnicode_InternFromString("value");
    str_timestamp = PyUnicode_InternFromString("timestamp");
    str_headers = PyUnicode_InternFromString("headers");
    str_topic = PyUnicode_InternFromString("topic");
    str_partition = PyUnicode_InternFromString("partition");
    if (!str_key || !str_value || !str_timestamp || !str_headers || !str_topic || !str_partition) {
        return NULL;
    }
    crc32c_init();
    PyObject *module = PyModule_Create(&module_def);
    /* the hash of the source this was built from (setup.py): segstore.speedups refuses a stale build */
    if (module != NULL && PyModule_AddStringConstant(module, "SOURCE_HASH", SEGSTORE_SOURCE_HASH) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
