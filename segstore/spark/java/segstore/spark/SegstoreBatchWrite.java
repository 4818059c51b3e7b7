package segstore.spark;

import java.io.IOException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.spark.SparkContext;
import org.apache.spark.sql.connector.write.BatchWrite;
import org.apache.spark.sql.connector.write.DataWriterFactory;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.PhysicalWriteInfo;
import org.apache.spark.sql.connector.write.WriterCommitMessage;
import org.apache.spark.sql.internal.SQLConf;
import org.apache.spark.sql.types.StructType;

/**
 * A batch write: its tasks stage their rows as Arrow IPC files ({@link StagingWriter}); the
 * driver's Python appends them to the store in partition order once every task succeeded.
 *
 * <p>The driver-side steps are requests to a warm Python worker ({@code segstore.spark.bridge}):
 * {@code write_begin} checks the options and the frame's columns and makes the job's staging
 * directory (never inside a directory a broker loads), {@code write_commit} appends the staged
 * files (the same commit as the Python data source's) and removes them, {@code write_abort}
 * only removes them. The store is never touched by a job that fails. So the rows go from Spark's
 * rows into Arrow once, in the task's JVM, with no Python worker on the executors and no socket
 * in between.
 *
 * <p>As each task commits ({@link #onDataWriterCommit}, on the driver, while the other tasks run), a
 * thread of this job has a worker child encode that task's file as the store's format appends it
 * ({@code write_prepare}, kept in that child's memory); the job's {@code write_commit} then goes to the
 * same child, which only sets those batches' offsets and writes them (and appends the rows of any file
 * it has no encoding of, as before). So the encoding runs beside the tasks instead of after the last
 * one, and the store is still touched only by the commit. An abort drops the child (and what it kept)
 * with the staging.
 */
final class SegstoreBatchWrite implements BatchWrite {
    private final ObjectNode options;
    private final String root;
    private final String jobDir;
    private final StructType schema;
    private final String timeZone;
    private final Prepares prepares = new Prepares();

    private SegstoreBatchWrite(ObjectNode options, String root, String jobDir, StructType schema,
                               String timeZone) {
        this.options = options;
        this.root = root;
        this.jobDir = jobDir;
        this.schema = schema;
        this.timeZone = timeZone;
    }

    /** A new job (its staging made); a {@link SegstoreException} for what Python refuses. */
    static SegstoreBatchWrite begin(LogicalWriteInfo info, boolean overwrite) {
        ObjectNode request = WorkerConnection.MAPPER.createObjectNode();
        request.put("op", "write_begin");
        ObjectNode options = Requests.options(info.options());
        request.set("options", options);
        request.put("schema", info.schema().json());
        request.put("overwrite", overwrite);
        request.put("local", SparkContext.getOrCreate().isLocal());
        JsonNode answer = driver().call(request);
        return new SegstoreBatchWrite(options, answer.path("root").asText(), answer.path("jobDir").asText(),
                info.schema(), SQLConf.get().sessionLocalTimeZone());
    }

    @Override
    public DataWriterFactory createBatchWriterFactory(PhysicalWriteInfo info) {
        return new StagingWriter.Factory(jobDir, schema, timeZone);
    }

    @Override
    public void onDataWriterCommit(WriterCommitMessage message) {
        // Spark's scheduler thread: the request is only queued
        if (message instanceof StagingWriter.Staged) {
            StagingWriter.Staged part = (StagingWriter.Staged) message;
            if (part.rows > 0) {
                ObjectNode request = job("write_prepare");
                request.putArray("staged").add(part.partitionId).add(part.path).add(part.rows);
                prepares.submit(request);
            }
        }
    }

    @Override
    public void commit(WriterCommitMessage[] messages) {
        ObjectNode request = job("write_commit");
        ArrayNode staged = request.putArray("staged");
        for (WriterCommitMessage message : messages) {
            if (message instanceof StagingWriter.Staged) {
                StagingWriter.Staged part = (StagingWriter.Staged) message;
                staged.addArray().add(part.partitionId).add(part.path).add(part.rows);
            }
        }
        WorkerConnection held = prepares.finish();
        if (held == null) {
            driver().call(request);     // nothing encoded ahead (or its child is gone): the rows
            return;
        }
        try {
            driver().callHeld(held, request);
        } catch (IOException e) {
            throw new SegstoreException("segstore's Python worker failed: " + e.getMessage(), e);
        } finally {
            PythonWorkers.closeQuietly(held);   // its child ends, and the memory it kept with it
        }
    }

    @Override
    public void abort(WriterCommitMessage[] messages) {
        prepares.discard();
        driver().call(job("write_abort"));
    }

    /**
     * The job's {@code write_prepare} requests, sent one at a time on one thread over one held connection
     * (its child keeps the encodings for the commit). A refused request (the worker's error reply) only
     * leaves that file to the commit's rows; a connection that fails is closed, and the commit then goes
     * to another child, which appends every file's rows.
     */
    private static final class Prepares {
        private ExecutorService thread;
        private WorkerConnection connection;
        private volatile boolean broken;

        synchronized void submit(ObjectNode request) {
            if (thread == null) {
                thread = Executors.newSingleThreadExecutor(runnable -> {
                    Thread t = new Thread(runnable, "segstore-write-prepare");
                    t.setDaemon(true);
                    return t;
                });
            }
            if (!thread.isShutdown()) {
                thread.execute(() -> prepare(request));
            }
        }

        private void prepare(JsonNode request) {
            if (broken) {
                return;
            }
            try {
                if (connection == null) {
                    connection = driver().borrowForWrite();
                }
                driver().callHeld(connection, request);
            } catch (SegstoreException e) {
                // refused: this file's rows are appended by the commit, as without the encoding
            } catch (IOException e) {
                broken = true;
                if (connection != null) {
                    PythonWorkers.closeQuietly(connection);
                }
            }
        }

        /** Waits for the prepares; the connection that holds their encodings, or null (none, or broken). */
        synchronized WorkerConnection finish() {
            if (thread == null) {
                return null;
            }
            thread.shutdown();
            try {
                while (!thread.awaitTermination(1, TimeUnit.SECONDS)) {
                    // each prepare reads one staged file: it ends
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                discard();
                return null;
            }
            WorkerConnection held = broken ? null : connection;
            connection = null;
            return held;
        }

        /** Stops the prepares and closes their connection: its child ends with what it kept. */
        void discard() {
            ExecutorService stopping;
            synchronized (this) {
                stopping = thread;
                if (stopping == null) {
                    return;
                }
                stopping.shutdownNow();     // a prepare blocked on its answer fails (the channel closes)
            }
            try {
                stopping.awaitTermination(10, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            synchronized (this) {
                if (connection != null) {
                    PythonWorkers.closeQuietly(connection);
                    connection = null;
                }
            }
        }
    }

    private ObjectNode job(String op) {
        ObjectNode request = WorkerConnection.MAPPER.createObjectNode();
        request.put("op", op);
        request.set("options", options);
        request.put("root", root);
        request.put("jobDir", jobDir);
        return request;
    }

    private static PythonWorkers driver() {
        return PythonWorkers.of(PythonWorkers.executable(true));
    }
}
