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

from .datasource import NAME, SegstoreDataSource
from .schema import KAFKA_SCHEMA, ROCKETMQ_SCHEMA, spark_schema

#: The SQL setting that lets Spark hand filters to a Python data source's ``pushFilters``.
PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


def register(spark: Any) -> None:
    """Register the ``segstore`` data source with ``spark`` and enable filter pushdown to it.

    Reads are planned into at least as many input partitions as the session's
    default parallelism (``minPartitions`` overrides it per read).
    """
    spark.conf.set(PUSHDOWN_CONF, "true")
    context = getattr(spark, "sparkContext", None)   # absent on Spark Connect sessions
    parallelism = context.defaultParallelism if context is not None else 1
    spark.dataSource.register(SegstoreDataSource.with_parallelism(parallelism))


def local_session(app_name: str = "segstore", cores: int = 2, **conf: str) -> Any:
    """A local SparkSession fit for a laptop or CI, with the source registered.

    Sets ``PYSPARK_PYTHON`` / ``PYSPARK_DRIVER_PYTHON`` to the running interpreter
    (workers then import the same installed segstore), binds the driver to the
    loopback address, turns the UI off, uses ``local[cores]`` and few shuffle
    partitions; ``conf`` adds or overrides Spark settings.  Returns the active
    session if one exists (``getOrCreate``).
    """
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    settings = {
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.host": "127.0.0.1",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": str(max(1, cores)),
        "spark.sql.session.timeZone": "UTC",
        PUSHDOWN_CONF: "true",
        **conf,
    }
    builder = SparkSession.builder.master(f"local[{cores}]").appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    register(spark)
    return spark


__all__ = ["KAFKA_SCHEMA", "NAME", "ROCKETMQ_SCHEMA", "SegstoreDataSource", "local_session", "register",
           "spark_schema"]
