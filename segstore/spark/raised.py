"""The library's typed errors out of the exceptions Spark raises in Python.

Both readers raise :mod:`segstore.errors`' errors where the work is done: the JVM reader's Python
workers send them to the JVM (``segstore.spark.SegstoreException``, ``TYPE: MESSAGE``), and PySpark's
Python data source raises them in Spark's Python workers (a ``PythonException`` or an
``AnalysisException`` carrying the worker's traceback).  Py4J hands the driver's Python a
``Py4JJavaError`` whose first line is ``An error occurred while calling o123.count.``, the library's
message somewhere in a wall of Java (inside ``Job aborted due to stage failure: ...`` for a task's
error).  :func:`install` makes Py4J raise the library's error instead, of its class and with its
message (``path:pos: expected ..., found ...``), the Spark exception kept as its ``spark_exception``;
any other error passes unchanged.

Where a Spark exception carries the library's error:

- a throwable of the chain (the exception and its causes) of class ``segstore.spark.SegstoreException``:
  its ``type()`` names the class, its message is ``TYPE: MESSAGE``;
- a Python traceback in a throwable's message whose last exception line is ``segstore.errors.TYPE:
  MESSAGE`` (a traceback ends with the exception raised; one the library raised while handling another,
  or that ended in another, is that one's), or ``segstore.spark.raised.Carried: TYPE: MESSAGE``
  (:class:`Carried`).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from typing import Any

from .. import errors
from ..errors import SegstoreError

#: The JVM side's exception class (segstore/spark/java/segstore/spark/SegstoreException.java).
JVM_CLASS = "segstore.spark.SegstoreException"
#: How many throwables of a chain are looked at (a chain may loop back to itself).
_MAX_CAUSES = 16
_TRACEBACK = "Traceback (most recent call last):"
#: An exception line of a traceback: ``module.Class: message`` at the start of a line.
_EXCEPTION_LINE = re.compile(r"^([A-Za-z_][\w.]*): (.*)$")
_PYTHON_PREFIX = "segstore.errors."

#: The exception line of :class:`Carried`.
_CARRIED = "segstore.spark.raised.Carried"

_installed = False
_converting = threading.local()


class Carried(Exception):
    """A library error carried through code that would take its class for something else: PySpark's
    planning worker (Spark 4.3 ``plan_data_source_read``) takes a ``NotImplementedError`` from a reader's
    ``partitions()`` for a source that does not split its reads and reads one empty partition, and
    :class:`~segstore.errors.UnsupportedOperationError` is one.  Its traceback line,
    ``segstore.spark.raised.Carried: TYPE: MESSAGE``, is read back as the error (:func:`from_traceback`).
    """

    def __init__(self, error: SegstoreError) -> None:
        super().__init__(f"{type(error).__name__}: {error}")
        self.error = error

    def __reduce__(self):  # picklable, as the error it carries
        return (self.__class__, (self.error,))


def error_class(name: str | None) -> type[SegstoreError] | None:
    """The class of :mod:`segstore.errors` called ``name``, or None (another name, or none)."""
    if not name or not name.isidentifier():
        return None
    found = getattr(errors, name, None)
    if isinstance(found, type) and issubclass(found, SegstoreError):
        return found
    return None


def from_traceback(text: str) -> SegstoreError | None:
    """The library's error a Python traceback in ``text`` ends with, or None.

    The last traceback's exception line (the first line after its frames that does not start with a
    blank) decides: ``segstore.errors.TYPE: MESSAGE`` is that error (its message the rest of that line);
    any other exception, or no traceback, is None.  ``O(len(text))``.
    """
    start = text.rfind(_TRACEBACK)
    if start < 0:
        return None
    lines = text[start + len(_TRACEBACK):].splitlines()
    for line in lines:
        if not line or line[0].isspace():
            continue            # a frame, its source line, a caret line
        found = _EXCEPTION_LINE.match(line)
        if found is not None and found.group(1) == _CARRIED:
            name, _, message = found.group(2).partition(": ")
            return from_jvm(found.group(2), name) if message else None
        if found is None or not found.group(1).startswith(_PYTHON_PREFIX):
            return None
        cls = error_class(found.group(1)[len(_PYTHON_PREFIX):])
        return None if cls is None else cls(found.group(2))
    return None


def from_jvm(message: str | None, type_name: str | None) -> SegstoreError | None:
    """The library's error a ``SegstoreException`` of class ``type_name`` and ``message`` carries, or None
    (a failure to reach the workers, or a Python error that is not the library's)."""
    cls = error_class(type_name)
    if cls is None or message is None:
        return None
    prefix = f"{type_name}: "
    return cls(message[len(prefix):] if message.startswith(prefix) else message)


def from_java(throwable: Any) -> SegstoreError | None:
    """The library's error a Java throwable (a Py4J object) or one of its causes carries, or None.

    The chain is walked from the outermost throwable: the first ``SegstoreException``, or the first
    message holding a traceback that ends in the library's error, decides.  Py4J calls, a few per
    throwable; at most :data:`_MAX_CAUSES` of them.
    """
    seen = 0
    while throwable is not None and seen < _MAX_CAUSES:
        seen += 1
        if throwable.getClass().getName() == JVM_CLASS:
            return from_jvm(throwable.getMessage(), throwable.type())
        message = throwable.getMessage()
        if message is not None and _TRACEBACK in message:
            found = from_traceback(message)
            if found is not None:
                return found
        cause = throwable.getCause()
        if cause is not None and cause.equals(throwable):
            break
        throwable = cause
    return None


def _converted(err: Exception) -> SegstoreError | None:
    if getattr(_converting, "busy", False):
        return None             # a Py4J call made while converting failed: leave it be
    java = getattr(err, "java_exception", None)
    if java is None:
        return None
    _converting.busy = True
    try:
        found = from_java(java)
    except Exception:           # the gateway went away: the original error stands
        return None
    finally:
        _converting.busy = False
    if found is not None:
        found.spark_exception = err     # type: ignore[attr-defined]
    return found


def wrap(get_return_value: Callable[..., Any]) -> Callable[..., Any]:
    """``get_return_value`` (Py4J's answer decoder) raising the library's error a Java exception carries
    in place of its ``Py4JJavaError``."""
    from py4j.protocol import Py4JJavaError

    if getattr(get_return_value, "_segstore", False):
        return get_return_value

    def segstore_errors(*args: Any, **kwargs: Any) -> Any:
        try:
            return get_return_value(*args, **kwargs)
        except Py4JJavaError as err:
            found = _converted(err)
            if found is None:
                raise
            raise found from None

    segstore_errors._segstore = True      # type: ignore[attr-defined]
    return segstore_errors


def install() -> None:
    """Make Py4J calls raise the library's errors (idempotent; see the module's docs).

    PySpark decodes Py4J answers with ``py4j.protocol.get_return_value`` wrapped by its own converter
    (``install_exception_handler``, which every new ``SparkSession`` object runs again, wrapping
    ``py4j.protocol``'s function anew): the library's wrapper goes under PySpark's, in ``py4j.protocol``,
    so PySpark's later installs keep it, and the one in use now is wrapped the same way.
    """
    global _installed
    if _installed:
        return
    import py4j.java_gateway
    import py4j.protocol
    from pyspark.errors.exceptions.captured import install_exception_handler

    py4j.protocol.get_return_value = wrap(py4j.protocol.get_return_value)
    install_exception_handler()
    _installed = True
