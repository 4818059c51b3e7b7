package segstore.spark;

import java.util.List;

import org.apache.arrow.vector.BaseFixedWidthVector;
import org.apache.arrow.vector.BaseVariableWidthVector;
import org.apache.arrow.vector.BigIntVector;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.IntVector;
import org.apache.arrow.vector.TimeStampMicroTZVector;
import org.apache.arrow.vector.VarBinaryVector;
import org.apache.arrow.vector.VarCharVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.execution.arrow.ArrowFieldWriter;
import org.apache.spark.sql.execution.arrow.ArrowWriter$;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.types.TimestampType;
import org.apache.spark.unsafe.Platform;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * Spark rows into the Arrow vectors of a root: what Spark's {@code ArrowWriter} makes of them,
 * with the flat columns (int, long, timestamp, binary, string) written straight into the vectors'
 * buffers. Spark's writer copies each binary value out of the row into a new array
 * ({@code getBinary}) and then into the vector through Arrow's checked {@code setSafe} (a capacity
 * check and a reference-count check a value): a third of a write task's time on 1,000,000 rows of
 * 100-byte values, about as much as Spark's own scan of the Parquet. Here a value's bytes are copied
 * once, from the row's memory to the vector's, and a buffer is checked (and grown) once a value.
 * Nested columns (headers) keep Spark's field writers. The vectors' capacities are kept from batch
 * to batch. Not thread-safe (one task).
 */
final class ArrowRowWriter {
    private final VectorSchemaRoot root;
    private final Column[] columns;
    private int count;

    ArrowRowWriter(VectorSchemaRoot root, StructType schema) {
        this.root = root;
        List<FieldVector> vectors = root.getFieldVectors();
        columns = new Column[vectors.size()];
        for (int i = 0; i < columns.length; i++) {
            columns[i] = column(vectors.get(i), schema.fields()[i].dataType());
        }
    }

    private static Column column(FieldVector vector, DataType type) {
        if (type instanceof BinaryType && vector instanceof VarBinaryVector) {
            return new Bytes((BaseVariableWidthVector) vector, false);
        }
        if (type instanceof StringType && vector instanceof VarCharVector) {
            return new Bytes((BaseVariableWidthVector) vector, true);
        }
        if (type instanceof IntegerType && vector instanceof IntVector) {
            return new Fixed((BaseFixedWidthVector) vector, 4);
        }
        if ((type instanceof LongType && vector instanceof BigIntVector)
                || (type instanceof TimestampType && vector instanceof TimeStampMicroTZVector)) {
            return new Fixed((BaseFixedWidthVector) vector, 8);
        }
        return new Spark(ArrowWriter$.MODULE$.createFieldWriter(vector));
    }

    VectorSchemaRoot root() {
        return root;
    }

    void write(InternalRow row) {
        int index = count;
        for (int i = 0; i < columns.length; i++) {
            columns[i].write(row, i, index);
        }
        count = index + 1;
    }

    /** The rows written since the last {@link #reset}. */
    int count() {
        return count;
    }

    /** About the bytes the rows written take in the vectors. */
    long sizeInBytes() {
        long size = 0;
        for (Column column : columns) {
            size += column.sizeInBytes(count);
        }
        return size;
    }

    /** Sets every vector's row count: the root holds the rows written, as a record batch. */
    void finish() {
        for (Column column : columns) {
            column.finish(count);
        }
        root.setRowCount(count);
    }

    /** Empties the vectors for the next batch (keeping their buffers). */
    void reset() {
        for (Column column : columns) {
            column.reset(count);
        }
        count = 0;
    }

    private abstract static class Column {
        abstract void write(InternalRow row, int ordinal, int index);

        abstract long sizeInBytes(int rows);

        abstract void finish(int rows);

        abstract void reset(int rows);
    }

    /** A column Spark's own field writer writes (nested types). */
    private static final class Spark extends Column {
        private final ArrowFieldWriter writer;

        Spark(ArrowFieldWriter writer) {
            this.writer = writer;
        }

        @Override
        void write(InternalRow row, int ordinal, int index) {
            writer.write(row, ordinal);
        }

        @Override
        long sizeInBytes(int rows) {
            return writer.getSizeInBytes();
        }

        @Override
        void finish(int rows) {
            writer.finish();
        }

        @Override
        void reset(int rows) {
            writer.reset();
        }
    }

    /** Sets bit {@code index} of the validity buffer at {@code address}. */
    private static void setValid(long address, int index) {
        long at = address + (index >>> 3);
        Platform.putByte(null, at, (byte) (Platform.getByte(null, at) | (1 << (index & 7))));
    }

    /** Clears the validity bits of the first {@code rows} rows (the others are clear already). */
    private static void clearValidity(FieldVector vector, int rows) {
        vector.getValidityBuffer().setZero(0, (rows + 7) >>> 3);
    }

    /** An int, long or timestamp column: 4 or 8 bytes a row, nulls as 0 with their bit clear. */
    private static final class Fixed extends Column {
        private final BaseFixedWidthVector vector;
        private final int width;
        private int capacity;
        private long validity;
        private long data;

        Fixed(BaseFixedWidthVector vector, int width) {
            this.vector = vector;
            this.width = width;
            refresh();
        }

        private void refresh() {
            capacity = vector.getValueCapacity();
            validity = vector.getValidityBufferAddress();
            data = vector.getDataBufferAddress();
        }

        @Override
        void write(InternalRow row, int ordinal, int index) {
            while (index >= capacity) {
                vector.reAlloc();       // doubles both buffers, copies them, zeroes the rest
                refresh();
            }
            if (row.isNullAt(ordinal)) {
                // the slot's bytes as Spark's writer leaves them: 0 (buffers are zeroed, then reset)
                if (width == 4) {
                    Platform.putInt(null, data + 4L * index, 0);
                } else {
                    Platform.putLong(null, data + 8L * index, 0L);
                }
                return;
            }
            if (width == 4) {
                Platform.putInt(null, data + 4L * index, row.getInt(ordinal));
            } else {
                Platform.putLong(null, data + 8L * index, row.getLong(ordinal));
            }
            setValid(validity, index);
        }

        @Override
        long sizeInBytes(int rows) {
            return (long) rows * width + ((rows + 7) >>> 3);
        }

        @Override
        void finish(int rows) {
            vector.setValueCount(rows);
        }

        @Override
        void reset(int rows) {
            clearValidity(vector, rows);
            vector.setValueCount(0);
        }
    }

    /** A binary or string column (32-bit offsets): each value's bytes copied once, from the row. */
    private static final class Bytes extends Column {
        private final BaseVariableWidthVector vector;
        private final boolean string;
        private int capacity;
        private long validity;
        private long offsets;
        private long data;
        private long dataCapacity;
        private int end;

        Bytes(BaseVariableWidthVector vector, boolean string) {
            this.vector = vector;
            this.string = string;
            refresh();
        }

        private void refresh() {
            capacity = vector.getValueCapacity();
            validity = vector.getValidityBufferAddress();
            offsets = vector.getOffsetBufferAddress();
            data = vector.getDataBufferAddress();
            dataCapacity = vector.getDataBuffer().capacity();
        }

        @Override
        void write(InternalRow row, int ordinal, int index) {
            while (index >= capacity) {
                vector.reallocValidityAndOffsetBuffers();     // copies both, zeroes the rest
                refresh();
            }
            if (!row.isNullAt(ordinal)) {
                Object base;
                long from;
                int size;
                if (row instanceof UnsafeRow) {     // the value in place: UnsafeRow.getBinary without its copy
                    UnsafeRow unsafe = (UnsafeRow) row;
                    long offsetAndSize = unsafe.getLong(ordinal);
                    base = unsafe.getBaseObject();
                    from = unsafe.getBaseOffset() + (offsetAndSize >> 32);
                    size = (int) offsetAndSize;
                } else if (string) {
                    UTF8String text = row.getUTF8String(ordinal);
                    base = text.getBaseObject();
                    from = text.getBaseOffset();
                    size = text.numBytes();
                } else {
                    byte[] bytes = row.getBinary(ordinal);
                    base = bytes;
                    from = Platform.BYTE_ARRAY_OFFSET;
                    size = bytes.length;
                }
                long next = (long) end + size;
                if (next > dataCapacity) {
                    if (next > Integer.MAX_VALUE) {
                        // as Arrow's setSafe refuses a batch past its 32-bit offsets
                        throw new org.apache.arrow.vector.util.OversizedAllocationException(
                                "a record batch's " + (string ? "string" : "binary") + " column over 2 GiB");
                    }
                    vector.reallocDataBuffer(next);     // at least next bytes, the old ones copied
                    refresh();
                }
                Platform.copyMemory(base, from, null, data + end, size);
                end = (int) next;
                setValid(validity, index);
            }
            Platform.putInt(null, offsets + 4L * (index + 1), end);
        }

        @Override
        long sizeInBytes(int rows) {
            return end + 4L * (rows + 1) + ((rows + 7) >>> 3);
        }

        @Override
        void finish(int rows) {
            // every offset is written: with lastSet at the last row, setValueCount fills no holes
            vector.setLastSet(rows - 1);
            vector.setValueCount(rows);
        }

        @Override
        void reset(int rows) {
            clearValidity(vector, rows);
            vector.setLastSet(-1);
            vector.setValueCount(0);
            end = 0;
        }
    }
}
