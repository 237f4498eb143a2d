"""Settings for the whole unit suite.

Hypothesis' per-example deadline (200 ms) measures the machine, not the code: `make test` runs this suite niced beside
the e2e suite on two cores, where a placement example took 336 ms once and 189 ms when Hypothesis replayed it, and the
run failed as "unreliable". Speed is measured by the benchmarks under bench/, never by a timed assertion in a test.

The planner's tests share one local Spark session (``spark``): starting one takes seconds of the JVM's time.
"""

from collections.abc import Iterator

import pytest
from hypothesis import settings
from pyspark.sql import SparkSession

settings.register_profile("kpo", deadline=None)
settings.load_profile("kpo")


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = (SparkSession.builder.master("local[2]").appName("kpo-planner-tests")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
