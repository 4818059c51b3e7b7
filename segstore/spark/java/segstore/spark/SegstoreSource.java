package segstore.spark;

import java.util.Map;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * {@code spark.read.format("segstore")}: the columnar JVM side of the segstore source.
 *
 * <p>It decodes no format. The driver asks segstore's Python planner (a warm worker, see
 * {@link PythonWorkers}) for the schema and the input partitions; each task asks a worker on its
 * executor for the pruned columns of its partition as Arrow record batches, which Spark reads as
 * they are ({@link ArrowBatchReader}); streams too ({@link SegstoreStream}). A batch write's tasks
 * stage Arrow files and the driver's Python appends them ({@link SegstoreBatchWrite}). Streaming
 * writes go to segstore's Python data source, which {@code segstore.spark.register(spark)}
 * registers beside it.
 */
public final class SegstoreSource implements TableProvider, DataSourceRegister {
    static final String NAME = "segstore";

    @Override
    public String shortName() {
        return NAME;
    }

    @Override
    public StructType inferSchema(CaseInsensitiveStringMap options) {
        ObjectNode request = WorkerConnection.MAPPER.createObjectNode();
        request.put("op", "schema");
        request.set("options", Requests.options(options));
        JsonNode answer = PythonWorkers.of(PythonWorkers.executable(true)).call(request);
        return (StructType) DataType.fromJson(answer.path("schema").asText());
    }

    @Override
    public boolean supportsExternalMetadata() {
        return true;      // .schema("value binary") reads only that column
    }

    @Override
    public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
        return new SegstoreTable(schema, partitioning, properties);
    }
}
