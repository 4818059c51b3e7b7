package segstore.spark;

import java.io.Closeable;
import java.io.EOFException;
import java.io.IOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

/**
 * One connection to a segstore Python worker (a child of the fork server, see
 * {@code segstore/spark/worker.py}, which owns the frame layout).
 *
 * <pre>
 * hello:    'H' u64 pid: the child's first frame (read before the first reply)
 * request:  u32 length (big-endian) | JSON object, UTF-8
 * reply:    u8 kind | ...
 *   'J'  u32 length | JSON answer
 *   'E'  u32 length | JSON {"type": error class, "message": text}
 *   'M'  u32 length | JSON {"ring", "size", "arena", "arenaSize"} | u32 length | Arrow IPC schema
 *        message, then batches:
 *   'B'  u64 position | u64 length: a record batch message in the ring;  'I' u32 length | one inline;
 *   'A'  u32 length | i64 rows | i32 nodes | i32 buffers | (i64 length, i64 nulls) per node |
 *        (i64 position, i64 length) per buffer: a record batch whose buffers lie in the arena
 *   and a closing 'J' or 'E'; the JVM sends 'R' for each 'B' or 'A' batch it is done with, in order.
 * </pre>
 *
 * The connection keeps the ring and the arena its worker child announced mapped ({@link SharedRing})
 * until it closes. Not thread-safe: one task (or one driver call) uses a connection at a time.
 */
final class WorkerConnection implements Closeable {
    static final byte JSON = 'J';
    static final byte ERROR = 'E';
    static final byte RING_READ = 'M';
    static final byte RING_BATCH = 'B';
    static final byte ARENA_BATCH = 'A';
    static final byte INLINE_BATCH = 'I';
    private static final byte RELEASE = 'R';
    private static final byte HELLO = 'H';

    static final ObjectMapper MAPPER = new ObjectMapper();

    private final SocketChannel channel;
    private final ByteBuffer scratch = ByteBuffer.allocate(16);
    private SharedRing ring;
    private SharedRing arena;
    /**
     * Whether this connection served an exchange before (PythonWorkers.borrow took it from the idle
     * pool): a first failure on it may be its child's death while idle, after the check that passed it.
     */
    boolean reused;
    /** The worker child's process id, from its hello (0 until the first reply is read). */
    private long pid;
    private boolean greeted;

    WorkerConnection(Path socket) throws IOException {
        channel = SocketChannel.open(StandardProtocolFamily.UNIX);
        try {
            channel.connect(UnixDomainSocketAddress.of(socket));
        } catch (IOException e) {
            channel.close();
            throw e;
        }
    }

    /** Send one request. */
    void send(JsonNode request) throws IOException {
        byte[] body = MAPPER.writeValueAsBytes(request);
        ByteBuffer frame = ByteBuffer.allocate(4 + body.length);
        frame.putInt(body.length).put(body).flip();
        while (frame.hasRemaining()) {
            channel.write(frame);
        }
    }

    /** The kind byte of the next reply (the child's hello read first, on a new connection). */
    byte readKind() throws IOException {
        if (!greeted) {
            greeted = true;
            long kind = readNumber(1);
            if (kind != HELLO) {
                throw new IOException("segstore worker: expected its hello, found kind " + kind);
            }
            pid = readNumber(8);
        }
        return (byte) readNumber(1);
    }

    /** The worker child's process id (its hello's), or 0 where none came. */
    long pid() {
        return pid;
    }

    /** A big-endian unsigned number of 1, 4 or 8 bytes. */
    long readNumber(int bytes) throws IOException {
        scratch.clear().limit(bytes);
        readFully(scratch);
        return bytes == 1 ? scratch.get(0) & 0xff : bytes == 4 ? scratch.getInt(0) & 0xffffffffL : scratch.getLong(0);
    }

    /** The body of a frame whose u32 length comes next. */
    byte[] readSized() throws IOException {
        long size = readNumber(4);
        if (size > Integer.MAX_VALUE - 8) {
            throw new IOException("segstore worker: expected a frame length, found " + size);
        }
        ByteBuffer body = ByteBuffer.allocate((int) size);
        readFully(body);
        return body.array();
    }

    /** Fill {@code target} from the connection (an inline batch). */
    void readInto(ByteBuffer target) throws IOException {
        readFully(target);
    }

    /** Tell the worker child the JVM is done with its oldest ring batch. */
    void release() throws IOException {
        ByteBuffer one = ByteBuffer.wrap(new byte[] {RELEASE});
        while (one.hasRemaining()) {
            channel.write(one);
        }
    }

    /** The ring at {@code path} mapped (kept while the child announces the same one), or null. */
    SharedRing ring(String path, long size) throws IOException {
        if (path == null) {
            return null;
        }
        ring = remap(ring, path, size);
        return ring;
    }

    /** The arena at {@code path} mapped (kept while the child announces the same one), or null. */
    SharedRing arena(String path, long size) throws IOException {
        if (path == null) {
            return null;
        }
        arena = remap(arena, path, size);
        return arena;
    }

    /** {@code current} where it maps {@code path} at {@code size}, else a new mapping (closing it). */
    private static SharedRing remap(SharedRing current, String path, long size) throws IOException {
        if (current != null && current.path.equals(path) && current.size == size) {
            return current;
        }
        if (current != null) {
            current.close();
        }
        return new SharedRing(path, size);
    }

    /** The JSON body of a 'J' or 'E' frame whose kind byte was read; an 'E' frame is thrown. */
    JsonNode readBody(byte kind) throws IOException {
        JsonNode node = MAPPER.readTree(new String(readSized(), StandardCharsets.UTF_8));
        if (kind == ERROR) {
            throw SegstoreException.fromWorker(node);
        }
        if (kind != JSON) {
            throw new IOException("segstore worker: expected a reply frame, found kind " + kind);
        }
        return node;
    }

    /** One whole request/reply exchange answered by JSON. */
    JsonNode call(JsonNode request) throws IOException {
        send(request);
        return readBody(readKind());
    }

    private void readFully(ByteBuffer buffer) throws IOException {
        while (buffer.hasRemaining()) {
            if (channel.read(buffer) < 0) {
                throw new EOFException("segstore worker closed the connection");
            }
        }
        buffer.flip();
    }

    boolean isOpen() {
        return channel.isOpen();
    }

    /**
     * Whether an idle connection's child still holds its end: between requests a child sends nothing, so
     * there is nothing to read unless it exited (an end of stream) or broke the protocol. One
     * non-blocking read; the connection is blocking again after it.
     */
    boolean idleAndAlive() {
        try {
            channel.configureBlocking(false);
            try {
                return channel.read(ByteBuffer.allocate(1)) == 0;
            } finally {
                channel.configureBlocking(true);
            }
        } catch (IOException e) {
            return false;
        }
    }

    @Override
    public void close() throws IOException {
        try {
            channel.close();
        } finally {
            if (ring != null) {
                ring.close();
                ring = null;
            }
            if (arena != null) {
                arena.close();
                arena = null;
            }
        }
    }
}
