"""Arrow arrays from numpy arrays and back, over their buffers.

pyarrow's own bridges (``pa.array`` of a numpy array or a list, ``pa.scalar``,
``Array.to_numpy``) import pandas the first time they run when it is installed
(to check for categoricals and set up its NaT), 0.2 s on a read that never needs
pandas.  These wrap the same memory through ``Array.from_buffers`` and
``Array.buffers`` instead: no copy for numeric types, a bit-pack for booleans.
:func:`unique` is ``np.unique`` without the module a first call of it imports.
Pure and thread-safe.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
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


def int64s(array: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """An integer (or timestamp) array's values as a new int64 array, whatever its width and sign;
    nulls read as whatever their slots hold.  ``O(n)``."""
    return natural(array).astype(np.int64)


def numpy_type(kind: pa.DataType) -> np.dtype:
    """numpy's dtype of the same kind and width as the fixed-width Arrow type ``kind`` (int64 for
    timestamps, dates and durations: their counts)."""
    import pyarrow as pa

    if pa.types.is_boolean(kind):
        return np.dtype(np.bool_)
    if pa.types.is_integer(kind):
        return np.dtype(f"{'int' if pa.types.is_signed_integer(kind) else 'uint'}{kind.bit_width}")
    if pa.types.is_floating(kind):
        return np.dtype(f"float{kind.bit_width}")
    return np.dtype(np.int64)


def natural(array: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A fixed-width array's values in :func:`numpy_type` of its type (``int32`` for int32, ``bool``
    for booleans, ``int64`` for timestamps): what ``Array.to_numpy`` gives, through the buffers.  A
    view for numbers, a copy for booleans and chunked arrays."""
    return to_numpy(array, numpy_type(array.type))


def empty_list(list_type: pa.DataType) -> pa.Scalar:
    """The empty list (or map) scalar of ``list_type`` (``pa.scalar([], ...)`` imports pandas)."""
    import pyarrow as pa

    offsets = pa.py_buffer(np.zeros(2, np.int32))
    child = pa.nulls(0, list_type.value_type if not pa.types.is_map(list_type)
                     else pa.struct([list_type.key_field, list_type.item_field]))
    return pa.Array.from_buffers(list_type, 1, [None, offsets], children=[child])[0]


def number(value: int | float, kind: pa.DataType) -> pa.Scalar:
    """``value`` as an Arrow scalar of the numeric type ``kind`` (``pa.scalar`` of a Python number
    goes through the pandas bridge)."""
    return from_numpy(np.array([value], numpy_type(kind)), kind)[0]


def string_scalar(value: str) -> pa.Scalar:
    """``value`` as an Arrow string scalar, as :func:`binary_scalar`. ``O(len(value))``."""
    import pyarrow as pa

    return binary_scalar(value.encode("utf-8")).cast(pa.string())


def texts(values: Sequence[str | bytes], type_: pa.DataType | None = None) -> pa.Array:
    """A non-null Arrow string (``str`` values) or binary (``bytes``) array of ``values``, built from
    one joined buffer and its offsets (``pa.array`` of a list goes through the pandas bridge).
    ``type_`` overrides the type (string or binary).  ``O(total length)``."""
    import pyarrow as pa

    encoded = [v.encode("utf-8") if isinstance(v, str) else v for v in values]
    offsets = np.zeros(len(encoded) + 1, np.int32)
    np.cumsum([len(v) for v in encoded], out=offsets[1:])
    kind = type_ if type_ is not None else (
        pa.string() if not values or isinstance(values[0], str) else pa.binary())
    data = pa.py_buffer(b"".join(encoded))
    return pa.Array.from_buffers(kind, len(encoded), [None, pa.py_buffer(offsets), data])


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


def unique(values: np.ndarray) -> np.ndarray:
    """The distinct values of the 1-d integer array ``values``, sorted: ``np.unique(values)``, without
    the masked-array check numpy 2's makes, which imports ``numpy.ma`` (14 ms of CPU, more than a
    500k-record Kafka ``verify`` on two threads took for its split).  ``O(n log n)``."""
    ordered = np.sort(values)
    keep = np.ones(len(ordered), np.bool_)
    keep[1:] = ordered[1:] != ordered[:-1]
    return ordered[keep]
