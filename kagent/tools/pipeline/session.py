"""The SparkSession every pipeline job runs in."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from pyspark.sql import SparkSession

from kagent.tools.pipeline.kafka_source import register

__all__ = ["DEFAULT_MASTER", "spark_session"]

DEFAULT_MASTER = "local[2]"


def spark_session(
    master: str = DEFAULT_MASTER, app_name: str = "kagent-pipeline", config: Mapping[str, str] | None = None
) -> SparkSession:
    """A session on ``master`` with the ``kagent-kafka`` source registered.

    Python workers run this interpreter unless ``PYSPARK_PYTHON`` says
    otherwise (on a cluster, set it to the executors' Python, which needs
    kagent installed). A ``local`` master binds the driver to 127.0.0.1.
    ``config`` entries are set on the builder; Arrow is on, as the jobs move
    data between the JVM and Python in Arrow batches.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.session.timeZone", "UTC")
    )
    if master.startswith("local"):
        # Everything runs in this process: keep the driver on loopback rather than the
        # address Spark finds for the host name (a network interface).
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = builder.config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
    for key, value in (config or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    register(spark)
    return spark
