package segstore.spark;

import org.apache.spark.sql.connector.catalog.SupportsWrite;
import org.apache.spark.sql.connector.write.BatchWrite;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.SupportsTruncate;
import org.apache.spark.sql.connector.write.Write;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.connector.write.streaming.StreamingWrite;

/**
 * {@code df.write.format("segstore")}: a batch write's tasks stage their rows here, in the JVM
 * ({@link SegstoreBatchWrite}); streaming writes go to segstore's Python data source, as do batch
 * writes with {@code .option("writer", "python")} (see {@link SegstoreTable#newWriteBuilder}).
 *
 * <p>Overwrite mode reaches {@link #truncate()}; the driver's Python refuses it (stores are
 * append-only), as the Python data source does.
 */
final class SegstoreWriteBuilder implements WriteBuilder, SupportsTruncate {
    private final SegstoreTable table;
    private final LogicalWriteInfo info;
    private boolean truncate;

    SegstoreWriteBuilder(SegstoreTable table, LogicalWriteInfo info) {
        this.table = table;
        this.info = info;
    }

    @Override
    public WriteBuilder truncate() {
        truncate = true;
        return this;
    }

    @Override
    public Write build() {
        return new Write() {
            @Override
            public String description() {
                return SegstoreSource.NAME;
            }

            @Override
            public BatchWrite toBatch() {
                return SegstoreBatchWrite.begin(info, truncate);
            }

            @Override
            public StreamingWrite toStreaming() {
                WriteBuilder python = ((SupportsWrite) table.python()).newWriteBuilder(info);
                if (truncate) {
                    python = ((SupportsTruncate) python).truncate();
                }
                return python.build().toStreaming();
            }
        };
    }
}
