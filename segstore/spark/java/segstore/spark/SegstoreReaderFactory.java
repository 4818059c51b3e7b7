package segstore.spark;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/** Columnar readers of segstore partitions, on the executors (serialized with the tasks). */
final class SegstoreReaderFactory implements PartitionReaderFactory {
    private static final long serialVersionUID = 1L;

    /** The columns to read, as Spark's schema JSON. */
    private final String schema;

    SegstoreReaderFactory(String schema) {
        this.schema = schema;
    }

    @Override
    public boolean supportColumnarReads(InputPartition partition) {
        return true;
    }

    @Override
    public PartitionReader<InternalRow> createReader(InputPartition partition) {
        throw new UnsupportedOperationException("segstore partitions are read as columnar batches");
    }

    @Override
    public PartitionReader<ColumnarBatch> createColumnarReader(InputPartition partition) {
        return new ArrowBatchReader(PythonWorkers.of(PythonWorkers.executable(false)),
                ((SegstorePartition) partition).spec, schema);
    }
}
