"""Spark reads and writes of segstore stores (PySpark >= 4.1, Python Data Source API).

::

    from segstore.spark import local_session
    spark = local_session()                      # registers the "segstore" source
    df = spark.read.format("segstore").load("/data/kafka-logs")

On a cluster, build the session as usual and call :func:`register`; see docs/spark.md.
"""

from __future__ import annotations

import os
import sys
from typing import Any

try:
    import pyarrow  # noqa: F401
    import pyspark  # noqa: F401
except ImportError as err:
    from ..errors import MissingDependencyError

    raise MissingDependencyError(
        f"segstore.spark needs {err.name!r}: install it with `pip install 'segstore[spark]'`") from err

from .consumers import CONSUMERS_NAME, ConsumersDataSource
from .datasource import NAME, PYTHON_NAME, SegstoreDataSource
from .schema import KAFKA_SCHEMA, ROCKETMQ_SCHEMA, spark_schema

#: The SQL setting that lets Spark hand filters to a Python data source's ``pushFilters``.
PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


#: The JVM class of Spark's Python data source provider, and the method by which Spark
#: 4.3 (read in its spark-sql jar) stores a pushdown's plan on it (``PythonScanBuilder.pushFilters``).
_PROVIDER_CLASS = "org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2"
_SHARED_READ_INFO = "setReadInfo"


def pushdown_is_per_scan(spark: Any) -> bool:
    """Whether this Spark keeps what a Python filter pushdown planned with that one scan.

    Spark 4.3 (``PythonDataSourceV2.setReadInfo``) keeps the partitions and reader
    that ``pushFilters`` planned on the relation's provider, and every later scan of
    the relation that pushes nothing (an unfiltered count on the same DataFrame or
    SQL view), and every other scan of the same query, reads that plan: pruning by
    pushed filters would then give wrong answers.  Spark's fix keeps that plan on
    its scan and drops ``setReadInfo``.  False when the JVM cannot be asked (Spark Connect).
    """
    context = getattr(spark, "sparkContext", None)
    jvm = getattr(context, "_jvm", None) if context is not None else None
    if jvm is None:
        return False
    from py4j.protocol import Py4JError

    try:
        provider = jvm.java.lang.Class.forName(_PROVIDER_CLASS)
    except Py4JError:     # a Spark without Python data sources: nothing to push to
        return False
    return not any(m.getName() == _SHARED_READ_INFO for m in provider.getMethods())


def register(spark: Any) -> None:
    """Register the ``segstore`` data source (and ``segstore_consumers``, consumer groups as a table) with
    ``spark``.

    Reads are planned into at least as many input partitions as the session's
    default parallelism (``minPartitions`` overrides it per read).  Filters Spark
    pushes prune the plan only where :func:`pushdown_is_per_scan`; elsewhere Spark
    filters the rows read and options (``assign``, ``startingOffsets``...) bound the read.
    Writers of a ``local[...]`` session stage their rows in the system temporary directory.
    Spark's exceptions that carry the library's error are raised as that error
    (:func:`.raised.install`: the first line a user reads is its message, not Py4J's or Spark's).
    """
    context = getattr(spark, "sparkContext", None)   # absent on Spark Connect sessions
    if context is not None:
        from . import raised

        raised.install()
    parallelism = context.defaultParallelism if context is not None else 1
    local = context is not None and str(context.master).startswith("local")
    pushdown = pushdown_is_per_scan(spark)
    if pushdown:
        spark.conf.set(PUSHDOWN_CONF, "true")
    name = PYTHON_NAME if jvm_source_loaded(spark) else NAME
    if name == NAME:
        from . import jvm

        jvm.notice("the JVM reader's jar is not on this session's classpath")
    spark.dataSource.register(SegstoreDataSource.configured(parallelism=parallelism, filter_pushdown=pushdown,
                                                            local_master=local, name=name))
    spark.dataSource.register(ConsumersDataSource)


def jvm_source_loaded(spark: Any) -> bool:
    """Whether the session's JVM has the columnar ``segstore`` source (its jar on the classpath).

    Where it has, it answers ``format("segstore")`` and the Python data source registers
    as ``segstore-python`` beside it (Spark refuses a second source of one name).
    False when the JVM cannot be asked (Spark Connect).
    """
    from . import jvm

    context = getattr(spark, "sparkContext", None)
    java = getattr(context, "_jvm", None) if context is not None else None
    if java is None:
        return False
    return bool(java.org.apache.spark.util.Utils.classIsLoadable(jvm.SOURCE_CLASS))


def local_session(app_name: str = "segstore", cores: int = 2, **conf: str) -> Any:
    """A local SparkSession fit for a laptop or CI, with the source registered.

    Sets ``PYSPARK_PYTHON`` / ``PYSPARK_DRIVER_PYTHON`` to the running interpreter
    (workers then import the same installed segstore), binds the driver to the
    loopback address, turns the UI off, uses ``local[cores]`` and few shuffle
    partitions; ``conf`` adds or overrides Spark settings.  Returns the active
    session if one exists (``getOrCreate``).
    """
    from pyspark.sql import SparkSession

    from . import jvm  # here, not at the top: `python -m segstore.spark.jvm` runs it as __main__

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    settings = {
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.host": "127.0.0.1",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": str(max(1, cores)),
        "spark.sql.session.timeZone": "UTC",
        **conf,
    }
    jar = jvm.session_jar()
    if jar is not None:
        given = settings.get("spark.jars", "")
        settings["spark.jars"] = f"{given},{jar}" if given else str(jar)
    builder = SparkSession.builder.master(f"local[{cores}]").appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    register(spark)
    return spark


__all__ = [
    "CONSUMERS_NAME",
    "KAFKA_SCHEMA",
    "NAME",
    "PYTHON_NAME",
    "ROCKETMQ_SCHEMA",
    "ConsumersDataSource",
    "SegstoreDataSource",
    "jvm_source_loaded",
    "local_session",
    "pushdown_is_per_scan",
    "register",
    "spark_schema",
]
