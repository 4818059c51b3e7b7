package segstore.spark;

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
 */
final class SegstoreBatchWrite implements BatchWrite {
    private final ObjectNode options;
    private final String root;
    private final String jobDir;
    private final StructType schema;
    private final String timeZone;

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
    public void commit(WriterCommitMessage[] messages) {
        ObjectNode request = job("write_commit");
        ArrayNode staged = request.putArray("staged");
        for (WriterCommitMessage message : messages) {
            if (message instanceof StagingWriter.Staged) {
                StagingWriter.Staged part = (StagingWriter.Staged) message;
                staged.addArray().add(part.partitionId).add(part.path).add(part.rows);
            }
        }
        driver().call(request);
    }

    @Override
    public void abort(WriterCommitMessage[] messages) {
        driver().call(job("write_abort"));
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
