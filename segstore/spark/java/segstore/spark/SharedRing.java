package segstore.spark;

import java.io.Closeable;
import java.io.IOException;
import java.lang.reflect.Field;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.ForeignAllocation;
import org.apache.arrow.memory.util.MemoryUtil;

/**
 * A worker child's batch ring or arena, mapped read-only: the child writes each record batch into
 * the ring once, or makes its columns' buffers in the arena, and the batches' Arrow buffers are
 * slices of this mapping (no copy on the JVM side).
 *
 * <p>Unmapped on {@link #close()} only when no vector holds a slice any more; otherwise the
 * mapping is left to the garbage collector, so a late reader can never touch unmapped memory.
 * Not thread-safe (one connection's).
 */
final class SharedRing implements Closeable {
    final String path;
    final long size;
    private MappedByteBuffer mapping;
    private final ArrowBuf buffer;

    SharedRing(String path, long size) throws IOException {
        if (size <= 0 || size > Integer.MAX_VALUE) {
            throw new IOException(path + ": expected a ring of 1 byte to 2 GiB, found " + size + " bytes");
        }
        this.path = path;
        this.size = size;
        try (FileChannel file = FileChannel.open(Path.of(path), StandardOpenOption.READ)) {
            if (file.size() < size) {
                throw new IOException(path + ": expected a ring of " + size + " bytes, found " + file.size());
            }
            mapping = file.map(FileChannel.MapMode.READ_ONLY, 0, size);
        }
        long address = MemoryUtil.getByteBufferAddress(mapping);
        buffer = ArrowBatchReader.ROOT.wrapForeignAllocation(new ForeignAllocation(size, address) {
            @Override
            protected void release0() {
                // the mapping is released by close() (or the garbage collector), not by Arrow
            }
        });
    }

    /** The bytes {@code [position, position + length)} of the ring, checked against its size. */
    ArrowBuf slice(long position, long length) throws IOException {
        if (position < 0 || length < 0 || position + length > size) {
            throw new IOException(path + ":" + position + ": expected a batch of " + length
                    + " bytes inside the ring of " + size + " bytes");
        }
        return buffer.slice(position, length);
    }

    @Override
    public void close() {
        buffer.close();
        if (mapping != null && buffer.getReferenceManager().getRefCount() == 0) {
            unmap(mapping);
        }
        mapping = null;
    }

    private static void unmap(MappedByteBuffer mapping) {
        try {
            Class<?> unsafeClass = Class.forName("sun.misc.Unsafe");
            Field field = unsafeClass.getDeclaredField("theUnsafe");
            field.setAccessible(true);
            unsafeClass.getMethod("invokeCleaner", java.nio.ByteBuffer.class).invoke(field.get(null), mapping);
        } catch (ReflectiveOperationException | RuntimeException e) {
            // no cleaner to call: the garbage collector unmaps it
        }
    }
}
