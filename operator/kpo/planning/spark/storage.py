"""Reading and writing the storage contract on any file system Spark reaches (local paths, s3a://, gs://, hdfs://).

Large data goes through Spark's readers and writers. The few small documents (request, brokers, metrics) and the
final rename of ``plan.json`` go through Hadoop's ``FileSystem`` -- the same client Spark itself uses for the URI --
so the job needs no second storage library and runs unchanged in local mode and inside a SparkApplication.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from kpo.planning.spark.cluster import PlanError
from kpo.planning.spark.schemas import ASSIGNMENT, PARTITIONS


def join(base: str, name: str) -> str:
    return base.rstrip("/") + "/" + name


def _fs(spark: SparkSession, uri: str) -> tuple[Any, Any]:
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    path = jvm.org.apache.hadoop.fs.Path(uri)
    return path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()), path


def exists(spark: SparkSession, uri: str) -> bool:
    fs, path = _fs(spark, uri)
    return bool(fs.exists(path))


def read_document(spark: SparkSession, uri: str) -> str:
    if not exists(spark, uri):
        raise PlanError(f"the planning input has no {uri}")
    row = spark.read.text(uri, wholetext=True).first()
    return "" if row is None else str(row[0])


def write_document(spark: SparkSession, uri: str, text: str) -> None:
    fs, path = _fs(spark, uri)
    stream = fs.create(path, True)
    try:
        stream.write(bytearray(text.encode()))
    finally:
        stream.close()


def _is_parquet(spark: SparkSession, uri: str) -> bool:
    fs, path = _fs(spark, uri)
    if not fs.exists(path):
        raise PlanError(f"the planning input has no {uri}")
    statuses = fs.listStatus(path) if fs.getFileStatus(path).isDirectory() else [fs.getFileStatus(path)]
    return any(str(s.getPath().getName()).endswith(".parquet") for s in statuses)


def read_partitions(spark: SparkSession, uri: str) -> DataFrame:
    """The snapshot's partitions, Parquet or JSON lines, cast to the contract's schema."""
    if _is_parquet(spark, uri):
        raw = spark.read.parquet(uri)
        missing = sorted({"topic", "partition", "replicas"} - set(raw.columns))
        if missing:
            raise PlanError(f"{uri} lacks the columns {missing}")
        for name in ("leader", "isr", "size_bytes", "log_dirs"):
            if name not in raw.columns:
                raw = raw.withColumn(name, F.lit(None))
    else:
        raw = spark.read.schema(PARTITIONS).option("mode", "FAILFAST").json(uri)
    return raw.select(*[F.col(f.name).cast(f.dataType).alias(f.name) for f in PARTITIONS.fields])


def read_assignment(spark: SparkSession, uri: str) -> DataFrame:
    reader = spark.read.parquet(uri) if _is_parquet(spark, uri) else spark.read.schema(ASSIGNMENT).json(uri)
    return reader.select(*[F.col(f.name).cast(f.dataType).alias(f.name) for f in ASSIGNMENT.fields])


def write_lines(spark: SparkSession, lines: DataFrame, uri: str) -> None:
    """Write the ``line`` column, ordered by ``order``, as one text file at ``uri`` (Spark writes folders)."""
    staging = uri + ".parts"
    (lines.repartition(1).sortWithinPartitions("order").select("line")
     .write.mode("overwrite").option("compression", "none").text(staging))
    fs, target = _fs(spark, uri)
    _, folder = _fs(spark, staging)
    parts = [s.getPath() for s in fs.listStatus(folder) if str(s.getPath().getName()).startswith("part-")]
    if len(parts) != 1:
        raise PlanError(f"expected one part file in {staging}, found {len(parts)}")
    if fs.exists(target):
        fs.delete(target, False)
    if not fs.rename(parts[0], target):
        raise PlanError(f"could not move {parts[0]} to {uri}")
    fs.delete(folder, True)


def plan_json_lines(entries: DataFrame, log_dirs: Column) -> DataFrame:
    """``plan.json`` as ordered text lines (``order``, ``line``): kafka-reassign-partitions' JSON of ``entries``
    (topic, partition, replicas; ``log_dirs`` per entry), sorted by topic and partition, built by Spark so that no
    partition passes through Python."""
    documents = entries.select("topic", "partition", F.to_json(F.struct(
        "topic", "partition", "replicas", log_dirs.alias("log_dirs"))).alias("json"))
    numbered = documents.select(F.row_number().over(Window.orderBy("topic", "partition")).alias("n"), "json")
    body = numbered.select(F.col("n").cast("long").alias("order"),
                           F.when(F.col("n") == 1, F.col("json")).otherwise(F.concat(F.lit(","), F.col("json")))
                           .alias("line"))
    edges = entries.sparkSession.createDataFrame([(0, '{"version":1,"partitions":['), (2**62, "]}")],
                                                 "order long, line string")
    return edges.unionByName(body)
