package segstore.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.connector.read.streaming.ReadLimit;
import org.apache.spark.sql.connector.read.streaming.ReadMaxRows;
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

    @Override
    public ReadLimit getDefaultReadLimit() {
        String max = options.get("maxOffsetsPerTrigger");
        if (max == null) {
            return ReadLimit.allAvailable();
        }
        // the Python option parser's messages (segstore/spark/options.py _int): Spark may ask this
        // before any request has had the worker parse the options; untrimmed, as the connector's toLong
        String text = max;
        long rows;
        try {
            rows = Long.parseLong(text);
        } catch (NumberFormatException e) {
            if (text.matches("[+-]?[0-9]+")) {
                throw new SegstoreException("ConfigError", "option maxOffsetsPerTrigger must be at most "
                        + Long.MAX_VALUE + ", found " + new java.math.BigInteger(text));
            }
            throw new SegstoreException("ConfigError", "option maxOffsetsPerTrigger must be an integer, found '"
                    + max + "'");
        }
        if (rows < 1) {
            throw new SegstoreException("ConfigError", "option maxOffsetsPerTrigger must be at least 1, found "
                    + rows);
        }
        return ReadLimit.maxRows(rows);
    }

    @Override
    public Offset latestOffset() {
        throw new UnsupportedOperationException("latestOffset(Offset, ReadLimit) is used instead");
    }

    @Override
    public Offset latestOffset(Offset start, ReadLimit limit) {
        ObjectNode request = request("stream_latest");
        request.set("start", ((SegstoreOffset) start).offsets);
        if (limit instanceof ReadMaxRows rows) {
            request.put("maxRows", rows.maxRows());
        }
        return new SegstoreOffset(call(request).path("offsets"));
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
