package segstore.spark;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.Channels;
import java.util.ArrayList;
import java.util.List;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.arrow.flatbuf.Message;
import org.apache.arrow.flatbuf.MessageHeader;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.VectorLoader;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.ReadChannel;
import org.apache.arrow.vector.ipc.message.ArrowFieldNode;
import org.apache.arrow.vector.ipc.message.ArrowRecordBatch;
import org.apache.arrow.vector.ipc.message.MessageSerializer;
import org.apache.arrow.vector.types.pojo.Schema;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * Reads one partition as Spark {@link ColumnarBatch}es over Arrow buffers: a worker runs
 * {@code store.scan_arrow} over the partition's slices for exactly the pruned columns; a batch of
 * flat columns comes as the places of its buffers in the child's arena, where its decoders made
 * them, any other is written into its ring (both shared memory, {@link SharedRing}), and the JVM
 * uses the buffers as they lie; with neither, batches come inline over the socket. A batch is
 * valid until the next call of {@link #next()}, which releases it to the worker.
 *
 * <p>The connection goes back to the pool only after the worker's closing frame; a reader closed
 * early (a LIMIT, a killed task) closes it instead, and the worker's child exits.
 */
final class ArrowBatchReader implements PartitionReader<ColumnarBatch> {
    /** The one root of every Arrow buffer of this JVM's readers (rings included: vectors take slices). */
    static final BufferAllocator ROOT = new RootAllocator(Long.MAX_VALUE);
    private static final int CONTINUATION = 0xFFFFFFFF;

    private final PythonWorkers workers;
    private final WorkerConnection connection;
    private final BufferAllocator allocator;
    private SharedRing ring;
    private SharedRing arena;
    private VectorSchemaRoot root;
    private VectorLoader loader;
    private ColumnVector[] columns;
    private ColumnarBatch batch;
    private boolean holdsSharedBatch;
    private boolean finished;
    /** The worker child's process id (its 'M' header), to say why it ended if it ends mid-read. */
    private long childPid;

    ArrowBatchReader(PythonWorkers workers, String partition, String schema) {
        this.workers = workers;
        this.allocator = ROOT.newChildAllocator("segstore-partition", 0, Long.MAX_VALUE);
        WorkerConnection opened = null;
        try {
            opened = workers.borrow();
            ObjectNode request = WorkerConnection.MAPPER.createObjectNode();
            request.put("op", "read");
            request.set("partition", WorkerConnection.MAPPER.readTree(partition));
            request.put("schema", schema);
            byte kind;
            try {
                opened.send(request);
                kind = opened.readKind();
            } catch (IOException e) {
                if (!opened.reused) {
                    throw e;
                }
                opened = workers.replace(opened);   // a child gone while idle: nothing was read yet
                opened.send(request);
                kind = opened.readKind();
            }
            if (kind != WorkerConnection.RING_READ) {
                opened.readBody(kind);      // throws the worker's error
                throw new IOException("segstore worker: expected record batches, found an answer");
            }
            JsonNode header = WorkerConnection.MAPPER.readTree(opened.readSized());
            childPid = header.path("pid").asLong(0);
            ring = opened.ring(header.path("ring").asText(null), header.path("size").asLong());
            arena = opened.arena(header.path("arena").asText(null), header.path("arenaSize").asLong());
            Schema arrowSchema = MessageSerializer.deserializeSchema(
                    new ReadChannel(Channels.newChannel(new ByteArrayInputStream(opened.readSized()))));
            root = VectorSchemaRoot.create(arrowSchema, allocator);
            loader = new VectorLoader(root);
            columns = ArrowVectors.wrap(root.getFieldVectors());
            batch = new ColumnarBatch(columns);
        } catch (SegstoreException e) {
            this.connection = opened;
            finish(true);
            throw e;
        } catch (IOException | RuntimeException e) {
            this.connection = opened;
            finish(false);
            String reason = e instanceof IOException && opened != null ? workers.exitOf(opened.pid()) : null;
            if (reason != null) {
                throw new SegstoreException("segstore's worker child (pid " + opened.pid() + ") ended before "
                        + "it began reading a partition: " + reason, e);
            }
            throw new SegstoreException("segstore worker failed to read a partition: " + e, e);
        }
        this.connection = opened;
    }

    @Override
    public boolean next() throws IOException {
        if (finished) {
            return false;
        }
        try {
            return nextBatch();
        } catch (IOException e) {
            String reason = workers.exitOf(childPid);
            if (reason == null) {
                throw e;
            }
            throw new SegstoreException("segstore's worker child (pid " + childPid + ") ended in the middle of "
                    + "reading a partition: " + reason, e);
        }
    }

    private boolean nextBatch() throws IOException {
        if (holdsSharedBatch) {
            connection.release();          // Spark is done with the batch get() returned
            holdsSharedBatch = false;
        }
        byte kind = connection.readKind();
        if (kind == WorkerConnection.RING_BATCH) {
            long position = connection.readNumber(8);
            long length = connection.readNumber(8);
            if (ring == null) {
                throw new IOException("segstore worker: expected inline batches, found one in a ring it never announced");
            }
            load(ring.slice(position, length));
            holdsSharedBatch = true;
            return true;
        }
        if (kind == WorkerConnection.ARENA_BATCH) {
            if (arena == null) {
                throw new IOException("segstore worker: expected no batch in an arena it never announced");
            }
            loadInPlace(ByteBuffer.wrap(connection.readSized()));
            holdsSharedBatch = true;
            return true;
        }
        if (kind == WorkerConnection.INLINE_BATCH) {
            long length = connection.readNumber(4);
            try (ArrowBuf inline = allocator.buffer(length)) {
                connection.readInto(inline.nioBuffer(0, (int) length));
                load(inline);
            }
            return true;
        }
        finished = true;
        connection.readBody(kind);    // the closing frame: ok, or the worker's error
        return false;
    }

    /** Load the record batch message in {@code message} (continuation, metadata, body) into the root. */
    private void load(ArrowBuf message) throws IOException {
        long at = 0;
        int metadataLength = message.getInt(0);
        at += 4;
        if (metadataLength == CONTINUATION) {
            metadataLength = message.getInt(4);
            at += 4;
        }
        if (metadataLength <= 0 || at + metadataLength > message.capacity()) {
            throw new IOException("segstore worker: expected an Arrow message, found metadata of " + metadataLength
                    + " bytes in a message of " + message.capacity());
        }
        Message metadata = Message.getRootAsMessage(message.nioBuffer(at, metadataLength).order(ByteOrder.LITTLE_ENDIAN));
        if (metadata.headerType() != MessageHeader.RecordBatch) {
            throw new IOException("segstore worker: expected a record batch message, found header type "
                    + metadata.headerType());
        }
        long bodyStart = at + metadataLength;
        if (bodyStart + metadata.bodyLength() > message.capacity()) {
            throw new IOException("segstore worker: expected a record batch body of " + metadata.bodyLength()
                    + " bytes, found " + (message.capacity() - bodyStart));
        }
        ArrowBuf body = message.slice(bodyStart, metadata.bodyLength());
        body.getReferenceManager().retain();     // deserializeRecordBatch releases one reference of the body
        use(MessageSerializer.deserializeRecordBatch(metadata, body));
    }

    /**
     * Load a batch whose buffers lie in the arena: {@code frame} holds its row count, its field nodes
     * (length, null count) and its buffers' places (position, length), in Arrow IPC's order; each
     * place is checked to lie inside the arena.
     */
    private void loadInPlace(ByteBuffer frame) throws IOException {
        long rows = frame.getLong();
        int nodeCount = frame.getInt();
        int bufferCount = frame.getInt();
        if (rows < 0 || rows > Integer.MAX_VALUE || nodeCount < 0 || bufferCount < 0
                || frame.remaining() != 16L * (nodeCount + (long) bufferCount)) {
            throw new IOException("segstore worker: expected an arena batch of " + nodeCount + " nodes and "
                    + bufferCount + " buffers, found " + frame.remaining() + " bytes of them");
        }
        List<ArrowFieldNode> nodes = new ArrayList<>(nodeCount);
        for (int i = 0; i < nodeCount; i++) {
            nodes.add(new ArrowFieldNode(frame.getLong(), frame.getLong()));
        }
        List<ArrowBuf> buffers = new ArrayList<>(bufferCount);
        for (int i = 0; i < bufferCount; i++) {
            buffers.add(arena.slice(frame.getLong(), frame.getLong()));
        }
        use(new ArrowRecordBatch((int) rows, nodes, buffers));
    }

    /** Load {@code records} into the root (closing them: the vectors hold their buffers) and the batch. */
    private void use(ArrowRecordBatch records) {
        try (records) {
            loader.load(records);
        }
        ArrowVectors.refresh(columns);
        batch.setNumRows(root.getRowCount());
    }

    @Override
    public ColumnarBatch get() {
        return batch;
    }

    @Override
    public void close() {
        boolean clean = finished;
        finished = true;
        finish(clean);
    }

    private void finish(boolean clean) {
        try {
            if (root != null) {
                root.close();
                root = null;
            }
        } finally {
            allocator.close();
            if (connection != null) {
                if (clean) {
                    workers.giveBack(connection);
                } else {
                    PythonWorkers.closeQuietly(connection);
                }
            }
        }
    }
}
