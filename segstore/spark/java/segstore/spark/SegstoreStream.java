package segstore.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.streaming.CompositeReadLimit;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.connector.read.streaming.ReadAllAvailable;
import org.apache.spark.sql.connector.read.streaming.ReadLimit;
import org.apache.spark.sql.connector.read.streaming.ReadMaxRows;
import org.apache.spark.sql.connector.read.streaming.ReadMinRows;
import org.apache.spark.sql.connector.read.streaming.SupportsTriggerAvailableNow;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * A micro-batch stream tailing a live store, read with the same columnar readers as batches.
 *
 * <p>Offsets are {@code {topic: {partition: next offset}}}, segstore's Python stream reader's
 * ({@code segstore.spark.datasource.SegstoreStreamReader}): each call here asks a warm worker to
 * run it on the store as it is now (the store is reopened, so appends by another process are
 * seen), and each micro-batch is planned into byte-range partitions as batch reads are.
 */
final class SegstoreStream implements MicroBatchStream, SupportsTriggerAvailableNow {
    /** The query's schema (the user's, where given), which the worker checks as a batch plan's. */
    private final StructType tableSchema;
    private final StructType schema;
    private final CaseInsensitiveStringMap options;
    /** Where an availableNow query stops: the store's ends when it started. */
    private JsonNode availableNow;
    /** When the last micro-batch minOffsetsPerTrigger admitted was made (ms; 0: none yet). */
    private long lastTriggerMillis;

    SegstoreStream(StructType tableSchema, StructType schema, CaseInsensitiveStringMap options) {
        this.tableSchema = tableSchema;
        this.schema = schema;
        this.options = options;
    }

    private ObjectNode request(String op) {
        ObjectNode request = WorkerConnection.MAPPER.createObjectNode();
        request.put("op", op);
        request.set("options", Requests.options(options));
        request.put("schema", tableSchema.json());
        request.put("parallelism", SparkSession.active().sparkContext().defaultParallelism());
        if (availableNow != null) {
            request.set("availableNow", availableNow);
        }
        return request;
    }

    private static JsonNode call(ObjectNode request) {
        return PythonWorkers.of(PythonWorkers.executable(true)).call(request);
    }

    @Override
    public Offset initialOffset() {
        return new SegstoreOffset(call(request("stream_initial")).path("offsets"));
    }

    @Override
    public void prepareForTriggerAvailableNow() {
        availableNow = call(request("stream_snapshot")).path("offsets");
    }

    /**
     * The connector's read limits (Spark 4 KafkaMicroBatchStream.getDefaultReadLimit): minOffsetsPerTrigger
     * with maxTriggerDelay and maxOffsetsPerTrigger together as a composite limit, else the one given, else
     * all available.  Spark may ask this before any request has had the worker parse the options, so the
     * options are read here as the Python option parser reads them, with its messages
     * (segstore/spark/options.py: _int, time_string_ms).
     */
    @Override
    public ReadLimit getDefaultReadLimit() {
        String max = options.get("maxOffsetsPerTrigger");
        String min = options.get("minOffsetsPerTrigger");
        ReadLimit most = max == null ? null : ReadLimit.maxRows(parseLong("maxOffsetsPerTrigger", max, 1));
        if (min == null) {
            return most == null ? ReadLimit.allAvailable() : most;
        }
        ReadLimit least = ReadLimit.minRows(parseLong("minOffsetsPerTrigger", min, Long.MIN_VALUE),
                triggerDelayMs());
        return most == null ? least : ReadLimit.compositeLimit(new ReadLimit[] {least, most});
    }

    /** An option as the connector's toLong reads it (untrimmed), at least {@code minimum}. */
    private static long parseLong(String name, String text, long minimum) {
        long value;
        try {
            value = Long.parseLong(text);
        } catch (NumberFormatException e) {
            if (text.matches("[+-]?[0-9]+")) {
                throw new SegstoreException("ConfigError", "option " + name + " must be at most "
                        + Long.MAX_VALUE + ", found " + new java.math.BigInteger(text));
            }
            throw new SegstoreException("ConfigError", "option " + name + " must be an integer, found '"
                    + text + "'");
        }
        if (value < minimum) {
            throw new SegstoreException("ConfigError", "option " + name + " must be at least " + minimum
                    + ", found " + value);
        }
        return value;
    }

    /** maxTriggerDelay (default 15m) in ms, read by Spark's own time strings as the connector reads it. */
    private long triggerDelayMs() {
        String text = options.getOrDefault("maxTriggerDelay", "15m");
        try {
            return org.apache.spark.network.util.JavaUtils.timeStringAsMs(text);
        } catch (NumberFormatException e) {
            throw new SegstoreException("ConfigError", "option maxTriggerDelay: time must be specified as "
                    + "seconds (s), milliseconds (ms), microseconds (us), minutes (m or min), hour (h), or day "
                    + "(d), e.g. 50s, 100ms or 250us; found '" + text + "'");
        }
    }

    @Override
    public Offset latestOffset() {
        throw new UnsupportedOperationException("latestOffset(Offset, ReadLimit) is used instead");
    }

    /**
     * The next micro-batch's end, as the connector admits it (Spark 4 KafkaMicroBatchStream.latestOffset):
     * all available where the limits hold ReadAllAvailable, else what the worker gives for the minimum
     * (with the time of the last micro-batch, kept here across triggers as the connector keeps
     * lastTriggerMillis) and the maximum.
     */
    @Override
    public Offset latestOffset(Offset start, ReadLimit limit) {
        ObjectNode request = request("stream_latest");
        request.set("start", ((SegstoreOffset) start).offsets);
        ReadLimit[] limits = limit instanceof CompositeReadLimit composite
                ? composite.getReadLimits() : new ReadLimit[] {limit};
        boolean all = false;
        for (ReadLimit one : limits) {
            all |= one instanceof ReadAllAvailable;
        }
        for (ReadLimit one : all ? new ReadLimit[0] : limits) {
            if (one instanceof ReadMaxRows rows) {
                request.put("maxRows", rows.maxRows());
            } else if (one instanceof ReadMinRows rows) {
                request.put("minRows", rows.minRows());
                request.put("lastTriggerMillis", lastTriggerMillis);
            }
        }
        JsonNode answer = call(request);
        lastTriggerMillis = answer.path("lastTriggerMillis").asLong(lastTriggerMillis);
        return new SegstoreOffset(answer.path("offsets"));
    }

    @Override
    public InputPartition[] planInputPartitions(Offset start, Offset end) {
        ObjectNode request = request("stream_plan");
        request.set("start", ((SegstoreOffset) start).offsets);
        request.set("end", ((SegstoreOffset) end).offsets);
        JsonNode planned = call(request).path("partitions");
        InputPartition[] partitions = new InputPartition[planned.size()];
        for (int i = 0; i < partitions.length; i++) {
            partitions[i] = new SegstorePartition(planned.get(i).toString());
        }
        return partitions;
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
        return new SegstoreReaderFactory(schema.json());
    }

    @Override
    public Offset deserializeOffset(String json) {
        try {
            return new SegstoreOffset(WorkerConnection.MAPPER.readTree(json));
        } catch (java.io.IOException e) {
            throw new SegstoreException("ConfigError", "the stream's checkpoint holds an offset that is not "
                    + "JSON: " + json);
        }
    }

    @Override
    public void commit(Offset end) {
        // the source holds no files between micro-batches: nothing to release
    }

    @Override
    public void stop() {
        // nothing held
    }

    /** {@code {topic: {partition: next offset}}} as JSON. */
    static final class SegstoreOffset extends Offset {
        final JsonNode offsets;

        SegstoreOffset(JsonNode offsets) {
            this.offsets = offsets;
        }

        @Override
        public String json() {
            return offsets.toString();
        }
    }
}
