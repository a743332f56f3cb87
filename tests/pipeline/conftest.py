"""The pipeline tests' SparkSession: one per test session, local[2], 2 shuffle partitions, no UI."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from kagent.tools.pipeline.session import spark_session


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """A local Spark session with the ``kagent-kafka`` source registered, stopped at the end."""
    session = spark_session(
        "local[2]",
        "kagent-pipeline-tests",
        {
            "spark.sql.shuffle.partitions": "2",
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.default.parallelism": "2",
        },
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
