package segstore.spark;

import org.apache.spark.sql.connector.read.InputPartition;

/** One task's share of a read, as the Python planner described it (store, format, config, slices). */
final class SegstorePartition implements InputPartition {
    private static final long serialVersionUID = 1L;

    /** The planner's JSON: opaque here, read back by the worker that reads the partition. */
    final String spec;

    SegstorePartition(String spec) {
        this.spec = spec;
    }
}
