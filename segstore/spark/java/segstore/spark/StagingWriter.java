package segstore.spark;

import java.io.IOException;
import java.io.Serializable;
import java.io.UncheckedIOException;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;

import org.apache.arrow.vector.ipc.ArrowStreamWriter;
import org.apache.spark.TaskContext;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.write.DataWriter;
import org.apache.spark.sql.connector.write.DataWriterFactory;
import org.apache.spark.sql.connector.write.WriterCommitMessage;
import org.apache.spark.sql.execution.arrow.ArrowWriter$;
import org.apache.spark.sql.types.StructType;

/**
 * One write task: its rows, turned into Arrow as Spark's own {@code ArrowWriter} turns them (the
 * conversion Spark makes for its Python workers; {@link ArrowRowWriter}), streamed into {@code part-PPPPP-A.arrow} in the job's
 * staging directory, a record batch at a time. The file appears under that name only once the
 * task commits (written as {@code .tmp}, then renamed); a task whose job was aborted (its directory
 * removed) fails at its first row instead of bringing the directory back. A task with no rows
 * stages nothing. Not thread-safe (one task).
 */
final class StagingWriter implements DataWriter<InternalRow> {
    /** Rows per record batch, and the batch size past which a batch is written sooner. */
    static final int BATCH_ROWS = 1 << 16;
    static final long BATCH_BYTES = 32L << 20;

    /** What a task staged, for the driver's commit: its partition, the file ("" for none), the rows. */
    static final class Staged implements WriterCommitMessage {
        private static final long serialVersionUID = 1L;
        final int partitionId;
        final String path;
        final long rows;

        Staged(int partitionId, String path, long rows) {
            this.partitionId = partitionId;
            this.path = path;
            this.rows = rows;
        }
    }

    /** Sent to the executors: where the job stages, the rows' schema and the session's time zone. */
    static final class Factory implements DataWriterFactory, Serializable {
        private static final long serialVersionUID = 1L;
        private final String jobDir;
        private final StructType schema;
        private final String timeZone;

        Factory(String jobDir, StructType schema, String timeZone) {
            this.jobDir = jobDir;
            this.schema = schema;
            this.timeZone = timeZone;
        }

        @Override
        public DataWriter<InternalRow> createWriter(int partitionId, long taskId) {
            TaskContext context = TaskContext.get();
            int attempt = context == null ? 0 : context.attemptNumber();
            return new StagingWriter(this, partitionId, attempt);
        }
    }

    private final Factory factory;
    private final int partitionId;
    private final Path target;
    private final Path temporary;
    private ArrowRowWriter writer;
    private ArrowStreamWriter stream;
    private FileChannel channel;
    private long rows;
    private int batchRows;

    private StagingWriter(Factory factory, int partitionId, int attempt) {
        this.factory = factory;
        this.partitionId = partitionId;
        // the name the Python data source's tasks give theirs (datasource.staged_name)
        this.target = Path.of(factory.jobDir, String.format("part-%05d-%d.arrow", partitionId, attempt));
        this.temporary = Path.of(target + ".tmp");
    }

    @Override
    public void write(InternalRow row) throws IOException {
        if (writer == null) {
            open();
        }
        writer.write(row);
        rows++;
        batchRows++;
        if (batchRows >= BATCH_ROWS || ((batchRows & 1023) == 0 && writer.sizeInBytes() >= BATCH_BYTES)) {
            writeBatch();
        }
    }

    private void open() throws IOException {
        // CREATE_NEW in the job's directory, never made here: it fails once the job was aborted
        channel = FileChannel.open(temporary, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE);
        // Spark's vectors for the schema (its ArrowUtils.toArrowSchema), filled by ArrowRowWriter
        writer = new ArrowRowWriter(ArrowWriter$.MODULE$.create(factory.schema, factory.timeZone, true, false).root(),
                factory.schema);
        stream = new ArrowStreamWriter(writer.root(), null, channel);
        stream.start();
    }

    private void writeBatch() throws IOException {
        writer.finish();
        stream.writeBatch();
        writer.reset();
        batchRows = 0;
    }

    @Override
    public WriterCommitMessage commit() throws IOException {
        if (writer == null) {
            return new Staged(partitionId, "", 0);
        }
        if (batchRows > 0) {
            writeBatch();
        }
        stream.end();
        release();
        // no fsync: the commit reads the file in this job, and a crash before it ends the job with
        // nothing appended (the store's own writes are durable)
        Files.move(temporary, target, StandardCopyOption.ATOMIC_MOVE);
        return new Staged(partitionId, target.toString(), rows);
    }

    @Override
    public void abort() throws IOException {
        release();
        Files.deleteIfExists(temporary);
    }

    @Override
    public void close() throws IOException {
        release();
    }

    private void release() throws IOException {
        try {
            if (stream != null) {
                stream.close();     // closes the channel too
            } else if (channel != null) {
                channel.close();
            }
        } catch (UncheckedIOException e) {
            throw e.getCause();
        } finally {
            stream = null;
            channel = null;
            if (writer != null) {
                writer.root().close();
                writer = null;
            }
        }
    }
}
