package segstore.spark;

import java.util.List;

import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.vector.BigIntVector;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.IntVector;
import org.apache.arrow.vector.TimeStampMicroTZVector;
import org.apache.arrow.vector.VarBinaryVector;
import org.apache.arrow.vector.VarCharVector;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.vectorized.ArrowColumnVector;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarArray;
import org.apache.spark.sql.vectorized.ColumnarMap;
import org.apache.spark.unsafe.Platform;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * Spark column vectors over the Arrow buffers of a batch.
 *
 * <p>The flat columns (int, long, timestamp, binary, string) are read straight from the buffers'
 * addresses: Spark's {@link ArrowColumnVector} reads them through Arrow's checked accessors
 * (bounds and reference-count checks on every value, several per binary value), which made
 * the row loop about three times slower than Spark's own on-heap vectors. Safety comes from
 * checking each batch once when it is loaded ({@link #refresh}): every offset inside its data
 * buffer, in order, every buffer as long as its rows need. Nested columns (headers, keys,
 * properties) are {@link ArrowColumnVector}s.
 *
 * <p>Not thread-safe; a vector is valid for the batch last loaded (Spark's contract for batches).
 */
final class ArrowVectors {
    private ArrowVectors() {
    }

    /** One Spark vector per Arrow vector, in order. */
    static ColumnVector[] wrap(List<FieldVector> vectors) {
        ColumnVector[] columns = new ColumnVector[vectors.size()];
        for (int i = 0; i < columns.length; i++) {
            FieldVector vector = vectors.get(i);
            if (vector instanceof IntVector) {
                columns[i] = new Fixed(vector, DataTypes.IntegerType, 4);
            } else if (vector instanceof BigIntVector) {
                columns[i] = new Fixed(vector, DataTypes.LongType, 8);
            } else if (vector instanceof TimeStampMicroTZVector) {
                columns[i] = new Fixed(vector, DataTypes.TimestampType, 8);
            } else if (vector instanceof VarBinaryVector) {
                columns[i] = new Variable(vector, DataTypes.BinaryType);
            } else if (vector instanceof VarCharVector) {
                columns[i] = new Variable(vector, DataTypes.StringType);
            } else {
                columns[i] = new ArrowColumnVector(vector);
            }
        }
        return columns;
    }

    /** Check the flat vectors against the batch just loaded and note their buffers' addresses. */
    static void refresh(ColumnVector[] columns) {
        for (ColumnVector column : columns) {
            if (column instanceof Flat flat) {
                flat.refresh();
            }
        }
    }

    /** What the flat vectors share: the validity bitmap and the column's row count. */
    private abstract static class Flat extends ColumnVector {
        final FieldVector vector;
        long validity;
        int rows;
        int nulls;

        Flat(FieldVector vector, DataType type) {
            super(type);
            this.vector = vector;
        }

        void refresh() {
            rows = vector.getValueCount();
            nulls = vector.getNullCount();
            ArrowBuf bitmap = vector.getValidityBuffer();
            if (nulls > 0) {
                require(bitmap.capacity() >= (rows + 7L) / 8, "validity bitmap");
            }
            validity = bitmap.memoryAddress();
        }

        final void require(boolean condition, String what) {
            if (!condition) {
                throw new IllegalStateException("segstore worker sent a malformed Arrow batch: the " + what
                        + " of column " + vector.getField().getName() + " does not fit its " + rows + " rows");
            }
        }

        @Override
        public final boolean hasNull() {
            return nulls > 0;
        }

        @Override
        public final int numNulls() {
            return nulls;
        }

        @Override
        public final boolean isNullAt(int rowId) {
            return nulls > 0 && (Platform.getByte(null, validity + (rowId >> 3)) & (1 << (rowId & 7))) == 0;
        }

        @Override
        public void close() {
            // the batch's root owns the buffers
        }

        @Override
        public boolean getBoolean(int rowId) {
            throw unsupported();
        }

        @Override
        public byte getByte(int rowId) {
            throw unsupported();
        }

        @Override
        public short getShort(int rowId) {
            throw unsupported();
        }

        @Override
        public int getInt(int rowId) {
            throw unsupported();
        }

        @Override
        public long getLong(int rowId) {
            throw unsupported();
        }

        @Override
        public float getFloat(int rowId) {
            throw unsupported();
        }

        @Override
        public double getDouble(int rowId) {
            throw unsupported();
        }

        @Override
        public ColumnarArray getArray(int rowId) {
            throw unsupported();
        }

        @Override
        public ColumnarMap getMap(int rowId) {
            throw unsupported();
        }

        @Override
        public Decimal getDecimal(int rowId, int precision, int scale) {
            throw unsupported();
        }

        @Override
        public UTF8String getUTF8String(int rowId) {
            throw unsupported();
        }

        @Override
        public byte[] getBinary(int rowId) {
            throw unsupported();
        }

        @Override
        public ColumnVector getChild(int ordinal) {
            throw unsupported();
        }

        private UnsupportedOperationException unsupported() {
            return new UnsupportedOperationException("column " + vector.getField().getName() + " is "
                    + dataType().simpleString());
        }
    }

    /** int (4 bytes), long and timestamp (8 bytes, microseconds) columns. */
    private static final class Fixed extends Flat {
        private final int width;
        private long data;

        Fixed(FieldVector vector, DataType type, int width) {
            super(vector, type);
            this.width = width;
        }

        @Override
        void refresh() {
            super.refresh();
            ArrowBuf values = vector.getDataBuffer();
            require(values.capacity() >= (long) rows * width, "data buffer");
            data = values.memoryAddress();
        }

        @Override
        public int getInt(int rowId) {
            return Platform.getInt(null, data + 4L * rowId);
        }

        @Override
        public long getLong(int rowId) {
            return Platform.getLong(null, data + 8L * rowId);
        }
    }

    /** binary and string columns: 32-bit offsets into a data buffer. */
    private static final class Variable extends Flat {
        private long offsets;
        private long data;

        Variable(FieldVector vector, DataType type) {
            super(vector, type);
        }

        @Override
        void refresh() {
            super.refresh();
            ArrowBuf offsetBuffer = vector.getOffsetBuffer();
            ArrowBuf values = vector.getDataBuffer();
            offsets = offsetBuffer.memoryAddress();
            data = values.memoryAddress();
            if (rows == 0) {
                return;
            }
            require(offsetBuffer.capacity() >= 4L * (rows + 1), "offset buffer");
            int previous = Platform.getInt(null, offsets);
            boolean ordered = previous >= 0;
            for (int i = 1; i <= rows; i++) {
                int next = Platform.getInt(null, offsets + 4L * i);
                ordered &= next >= previous;
                previous = next;
            }
            require(ordered && previous <= values.capacity(), "offsets");
        }

        @Override
        public byte[] getBinary(int rowId) {
            if (isNullAt(rowId)) {
                return null;
            }
            int start = Platform.getInt(null, offsets + 4L * rowId);
            int length = Platform.getInt(null, offsets + 4L * rowId + 4) - start;
            byte[] bytes = new byte[length];
            Platform.copyMemory(null, data + start, bytes, Platform.BYTE_ARRAY_OFFSET, length);
            return bytes;
        }

        @Override
        public UTF8String getUTF8String(int rowId) {
            if (isNullAt(rowId)) {
                return null;
            }
            int start = Platform.getInt(null, offsets + 4L * rowId);
            int length = Platform.getInt(null, offsets + 4L * rowId + 4) - start;
            return UTF8String.fromAddress(null, data + start, length);
        }
    }
}
