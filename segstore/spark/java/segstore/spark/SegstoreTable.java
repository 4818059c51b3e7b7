package segstore.spark;

import java.util.EnumSet;
import java.util.Map;
import java.util.Set;

import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.SupportsWrite;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * A segstore store as a Spark table: batch and stream reads are columnar here, batch writes are
 * staged here ({@link SegstoreWriteBuilder}); streaming writes, and reads and writes with
 * {@code .option("reader", "python")} / {@code .option("writer", "python")}, go to segstore's
 * Python data source, registered by
 * {@code segstore.spark.register(spark)} under the same name (created only when one of them is
 * asked for, since creating it starts one of Spark's own Python workers).
 */
final class SegstoreTable implements SupportsRead, SupportsWrite {
    static final String READER_OPTION = "reader";
    static final String WRITER_OPTION = "writer";
    /** The name segstore.spark.register gives the Python data source beside this one. */
    static final String PYTHON_NAME = "segstore-python";

    private final StructType schema;
    private final Transform[] partitioning;
    private final Map<String, String> properties;
    private Table python;

    SegstoreTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
        this.schema = schema;
        this.partitioning = partitioning;
        this.properties = properties;
    }

    @Override
    public String name() {
        return SegstoreSource.NAME;
    }

    @Override
    public StructType schema() {
        return schema;
    }

    @Override
    public Set<TableCapability> capabilities() {
        // what the Python data source's table offers (Spark's PythonTable), batch reads here
        return EnumSet.of(TableCapability.BATCH_READ, TableCapability.BATCH_WRITE,
                TableCapability.MICRO_BATCH_READ, TableCapability.STREAMING_WRITE, TableCapability.TRUNCATE);
    }

    @Override
    public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
        String reader = options.getOrDefault(READER_OPTION, "jvm");
        if (reader.equalsIgnoreCase("python")) {
            return ((SupportsRead) python()).newScanBuilder(withoutReader(options));
        }
        if (!reader.equalsIgnoreCase("jvm")) {
            throw new SegstoreException("ConfigError", "option reader must be jvm or python, found " + reader);
        }
        return new SegstoreScanBuilder(schema, withoutReader(options));
    }

    @Override
    public WriteBuilder newWriteBuilder(LogicalWriteInfo info) {
        String writer = info.options().getOrDefault(WRITER_OPTION, "jvm");
        if (writer.equalsIgnoreCase("python")) {
            return ((SupportsWrite) python()).newWriteBuilder(info);
        }
        if (!writer.equalsIgnoreCase("jvm")) {
            throw new SegstoreException("ConfigError", "option writer must be jvm or python, found " + writer);
        }
        return new SegstoreWriteBuilder(this, info);
    }

    /** The Python data source's table of the same schema (streaming writes go there). */
    synchronized Table python() {
        if (python == null) {
            boolean registered = org.apache.spark.sql.classic.SparkSession.active().sessionState()
                    .dataSourceManager().dataSourceExists(PYTHON_NAME);
            if (!registered) {
                throw new SegstoreException("ConfigError", "segstore's Python data source is not registered in "
                        + "this session, and streaming writes and the options reader=python and writer=python "
                        + "need it: call "
                        + "segstore.spark.register(spark) first (local_session() does)");
            }
            PythonDataSourceV2 provider = new PythonDataSourceV2();
            provider.setShortName(PYTHON_NAME);
            python = provider.getTable(schema, partitioning, properties);
        }
        return python;
    }

    private static CaseInsensitiveStringMap withoutReader(CaseInsensitiveStringMap options) {
        if (!options.containsKey(READER_OPTION)) {
            return options;
        }
        java.util.HashMap<String, String> copy = new java.util.HashMap<>(options.asCaseSensitiveMap());
        copy.keySet().removeIf(name -> name.equalsIgnoreCase(READER_OPTION));
        return new CaseInsensitiveStringMap(copy);
    }
}
