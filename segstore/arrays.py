"""Arrow arrays from numpy arrays and back, over their buffers.

pyarrow's own bridges (``pa.array`` of a numpy array or a list, ``pa.scalar``,
``Array.to_numpy``) import pandas the first time they run when it is installed
(to check for categoricals and set up its NaT), 0.2 s on a read that never needs
pandas.  These wrap the same memory through ``Array.from_buffers`` and
``Array.buffers`` instead: no copy for numeric types, a bit-pack for booleans.
Pure and thread-safe.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:   # pyarrow is imported where an array is made: `segstore info` needs none
    import pyarrow as pa


@functools.cache
def _types() -> dict[np.dtype, pa.DataType]:
    """The Arrow type of each numpy dtype :func:`from_numpy` takes."""
    import pyarrow as pa

    return {np.dtype(np.int8): pa.int8(), np.dtype(np.int16): pa.int16(), np.dtype(np.int32): pa.int32(),
            np.dtype(np.int64): pa.int64(), np.dtype(np.uint8): pa.uint8(), np.dtype(np.uint16): pa.uint16(),
            np.dtype(np.uint32): pa.uint32(), np.dtype(np.uint64): pa.uint64(),
            np.dtype(np.float32): pa.float32(), np.dtype(np.float64): pa.float64(),
            np.dtype(np.bool_): pa.bool_()}


def from_numpy(values: np.ndarray, type_: pa.DataType | None = None) -> pa.Array:
    """A non-null Arrow array of the one-dimensional ``values``: the numeric types share their
    memory (``type_``, when given, of the same width: a timestamp over int64), ``bool`` is packed
    into a bitmap.  ``O(1)`` for numbers, ``O(n)`` for booleans."""
    import pyarrow as pa

    values = np.ascontiguousarray(values)
    kind = type_ if type_ is not None else _types()[values.dtype]
    if values.dtype == np.bool_:
        data = pa.py_buffer(np.packbits(values, bitorder="little"))
    else:
        data = pa.py_buffer(values)
    return pa.Array.from_buffers(kind, len(values), [None, data])


def empty_batch(schema: pa.Schema) -> pa.RecordBatch:
    """A record batch of no rows of ``schema`` (``RecordBatch.from_pylist([])`` imports pandas)."""
    import pyarrow as pa

    return pa.RecordBatch.from_arrays([pa.nulls(0, field.type) for field in schema], schema=schema)


def binary_scalar(value: bytes) -> pa.Scalar:
    """``value`` as an Arrow binary scalar (for a compute function's other operand). ``O(len(value))``."""
    import pyarrow as pa

    offsets = pa.py_buffer(np.array([0, len(value)], np.int32))
    return pa.Array.from_buffers(pa.binary(), 1, [None, offsets, pa.py_buffer(value)])[0]


def to_numpy(array: pa.Array | pa.ChunkedArray, dtype: np.dtype | type) -> np.ndarray:
    """The values of a fixed-width Arrow ``array`` (numbers or booleans) as ``dtype``
    (the array's own width; a timestamp as int64); nulls read as whatever their slots
    hold.  A view for numbers, a copy for booleans and chunked arrays."""
    import pyarrow as pa

    if isinstance(array, pa.ChunkedArray):
        parts = [to_numpy(chunk, dtype) for chunk in array.chunks]
        return np.concatenate(parts) if parts else np.zeros(0, dtype)
    n = len(array)
    data = array.buffers()[1]
    if pa.types.is_boolean(array.type):
        if data is None or n == 0:
            return np.zeros(n, np.bool_)
        bits = np.unpackbits(np.frombuffer(data, np.uint8), count=array.offset + n, bitorder="little")
        return bits[array.offset:].astype(np.bool_)
    if data is None or n == 0:
        return np.zeros(n, dtype)
    return np.frombuffer(data, dtype, count=n, offset=array.offset * np.dtype(dtype).itemsize)
