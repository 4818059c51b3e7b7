package segstore.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * A planned read: the pruned columns and the planner's input partitions (byte ranges of the
 * stores' segments, as {@code segstore.spark.planning.plan} cuts them, in a multiple of the
 * session's parallelism). Planning runs once per scan, on the driver, in a warm Python worker.
 */
final class SegstoreScan implements Scan, Batch {
    private final StructType tableSchema;
    private final StructType required;
    private final CaseInsensitiveStringMap options;
    private final ArrayNode filters;
    private InputPartition[] partitions;

    SegstoreScan(StructType tableSchema, StructType required, CaseInsensitiveStringMap options,
                 ArrayNode filters) {
        this.tableSchema = tableSchema;
        this.required = required;
        this.options = options;
        this.filters = filters;
    }

    @Override
    public StructType readSchema() {
        return required;
    }

    @Override
    public String description() {
        return "segstore [" + String.join(", ", required.fieldNames()) + "] " + options.getOrDefault("path", "");
    }

    @Override
    public Batch toBatch() {
        return this;
    }

    @Override
    public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
        return new SegstoreStream(tableSchema, required, options);
    }

    @Override
    public synchronized InputPartition[] planInputPartitions() {
        if (partitions == null) {
            ObjectNode request = WorkerConnection.MAPPER.createObjectNode();
            request.put("op", "plan");
            request.set("options", Requests.options(options));
            request.put("schema", tableSchema.json());
            request.set("filters", filters);
            request.put("parallelism", SparkSession.active().sparkContext().defaultParallelism());
            JsonNode answer = PythonWorkers.of(PythonWorkers.executable(true)).call(request);
            JsonNode planned = answer.path("partitions");
            partitions = new InputPartition[planned.size()];
            for (int i = 0; i < partitions.length; i++) {
                partitions[i] = new SegstorePartition(planned.get(i).toString());
            }
        }
        return partitions;
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
        return new SegstoreReaderFactory(required.json());
    }
}
