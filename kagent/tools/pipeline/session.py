"""The SparkSession every pipeline job runs in."""

from __future__ import annotations

import ipaddress
import os
import sys
from collections.abc import Mapping
from urllib.parse import urlsplit

from pyspark.sql import SparkSession

from kagent.tools.pipeline.kafka_source import register

__all__ = ["DEFAULT_MASTER", "on_loopback", "spark_session"]

DEFAULT_MASTER = "local[2]"


def spark_session(
    master: str = DEFAULT_MASTER, app_name: str = "kagent-pipeline", config: Mapping[str, str] | None = None
) -> SparkSession:
    """A session on ``master`` with the ``kagent-kafka`` source registered.

    Python workers run this interpreter unless ``PYSPARK_PYTHON`` says
    otherwise (on a cluster, set it to the executors' Python, which needs
    kagent installed). A master on this machine (``local``, or a standalone
    ``spark://`` master on a loopback address) binds the driver to 127.0.0.1.
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
    if on_loopback(master):
        # Everything runs in this process, or on workers that reach their master on loopback, so are on
        # this machine: keep the driver on loopback rather than the address Spark finds for the host name
        # (a network interface, which a firewall may close to the executors' connections back).
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = builder.config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
    for key, value in (config or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    register(spark)
    return spark


def on_loopback(master: str) -> bool:
    """True if every executor of ``master`` runs on this machine, reaching the driver on loopback: a
    ``local`` master, or a standalone ``spark://host:port[,host:port...]`` whose hosts are all
    ``localhost`` or loopback addresses (workers there register with a master only this machine reaches).
    """
    if master.startswith("local"):
        return True
    if not master.startswith("spark://"):
        return False
    hosts = [urlsplit(f"spark://{address.strip()}").hostname for address in master.removeprefix("spark://").split(",")]
    return all(host is not None and _loopback_host(host) for host in hosts)


def _loopback_host(host: str) -> bool:
    """``localhost``, or a loopback IP address (``127.0.0.0/8``, ``::1``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
