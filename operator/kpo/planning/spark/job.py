"""Entry point of the planning job: ``python -m kpo.planning.spark.job --input DIR --output DIR``, or the same file
given to ``spark-submit`` (which is how both backends run it: the local runner in local mode, a SparkApplication on a
cluster).

Whatever happens, the job leaves ``metrics.json`` in the output directory: ``status: ok`` with ``plan.json`` next to
it and exit code 0, or ``status: failed`` with the reason and exit code 1. Exit code 2 means it could not even write
that (the reason is then on stderr), so a supervisor that sees a non-zero exit without metrics knows which.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time

from pyspark.sql import SparkSession

from kpo.domain.plan_contract import METRICS_FILE, PLAN_FILE, PlanMetrics
from kpo.planning.spark import storage
from kpo.planning.spark.cluster import PlanError
from kpo.planning.spark.plan import make_plan, read_snapshot

# Defaults for local mode on a small machine; spark-submit --conf (or a SparkApplication's sparkConf) wins.
DEFAULTS = {
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.autoBroadcastJoinThreshold": str(64 * 1024 * 1024),
    # The rounds' stages evaluate many array lambdas; fused into one whole-stage method they pass HotSpot's 8000-byte
    # limit, above which the JIT leaves a method to the bytecode interpreter. Spark's documentation advises this
    # value on HotSpot: such a stage then runs operator by operator, compiled. The placement step of a skewed 1M
    # input took 4.9 s instead of 14.4 s (48 s at a load of 12); the plan is the same.
    "spark.sql.codegen.hugeMethodLimit": "8000",
}


def session(app_name: str = "kpo-planner") -> SparkSession:
    builder = SparkSession.builder.appName(app_name)
    if "PYSPARK_GATEWAY_PORT" not in os.environ:  # not started by spark-submit: run in local mode
        builder = builder.master("local[*]").config("spark.ui.enabled", "false")
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    given = spark.sparkContext.getConf()
    for key, value in DEFAULTS.items():
        if not given.contains(key):
            spark.conf.set(key, value)
    return spark


def run(spark: SparkSession, input_uri: str, output_uri: str) -> PlanMetrics:
    result = make_plan(read_snapshot(spark, input_uri))
    storage.write_lines(spark, result.plan_lines(), storage.join(output_uri, PLAN_FILE))
    logging.getLogger("kpo.planning.spark").info("plan written: %d partitions change",
                                                 result.metrics.partitions_changed)
    return result.metrics


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kpo.planning.spark.job", description=__doc__.split("\n")[0])
    parser.add_argument("--input", required=True, help="directory (or URI) holding request.json, brokers.json, "
                                                       "partitions")
    parser.add_argument("--output", required=True, help="directory (or URI) for plan.json and metrics.json")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s", stream=sys.stderr)
    # The failure message must be the job's last words: supervisors surface the tail of its output.
    logging.getLogger("py4j").setLevel(logging.WARNING)
    started = time.monotonic()
    spark: SparkSession | None = None
    try:
        spark = session()
        spark_ready = time.monotonic()
        outcome = run(spark, args.input, args.output)
        outcome = outcome.model_copy(update={"planning_seconds": round(time.monotonic() - spark_ready, 3),
                                             "spark_start_seconds": round(spark_ready - started, 3)})
        storage.write_document(spark, storage.join(args.output, METRICS_FILE), outcome.to_json())
        return 0
    except Exception as err:
        message = str(err) if isinstance(err, PlanError) else f"{type(err).__name__}: {err}"
        print(f"planning failed: {message}", file=sys.stderr)
        failed = PlanMetrics.failed(message, planning_seconds=round(time.monotonic() - started, 3))
        try:
            if spark is not None:
                storage.write_document(spark, storage.join(args.output, METRICS_FILE), failed.to_json())
            else:
                _write_local(args.output, failed)
        except Exception as unwritable:
            print(f"could not write {METRICS_FILE}: {unwritable}", file=sys.stderr)
            return 2
        return 1
    finally:
        if spark is not None:
            spark.stop()


def _write_local(output: str, failed: PlanMetrics) -> None:
    """Without a Spark session there is no Hadoop file system; a local output directory still gets the failure."""
    if "://" in output and not output.startswith("file://"):
        raise OSError(f"no Spark session to write to {output}")
    path = output.removeprefix("file://")
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, METRICS_FILE), "w") as out:
        out.write(failed.to_json())


if __name__ == "__main__":
    sys.exit(main())
