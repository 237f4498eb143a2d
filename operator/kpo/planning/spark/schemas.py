"""The DataFrame schemas of the planning job: what the input must look like and what each stage hands on.

Each transform ends with a ``select`` of one of the column lists below, so a stage's output schema is stated, not
inferred, and a stray column never leaks into the next stage (Palantir's PySpark style guide).
"""

from __future__ import annotations

from pyspark.sql.types import ArrayType, IntegerType, LongType, StringType, StructField, StructType

# ``partitions`` as the storage contract defines it (Parquet or JSON lines). Wider integer types are cast on read.
PARTITIONS = StructType([
    StructField("topic", StringType(), nullable=False),
    StructField("partition", IntegerType(), nullable=False),
    StructField("replicas", ArrayType(IntegerType()), nullable=False),
    StructField("leader", IntegerType(), nullable=True),
    StructField("isr", ArrayType(IntegerType()), nullable=True),
    StructField("size_bytes", LongType(), nullable=True),
    StructField("log_dirs", ArrayType(StringType()), nullable=True),
])

# The planner's state: one row per partition. ``original`` is the snapshot's replica list, ``replicas`` the target
# so far (a null element is a replica still to be placed), ``selected`` whether the request may change it.
STATE_COLUMNS = ("topic", "partition", "size", "selected", "isr", "original", "replicas")

# One row per replica of a selected partition, as a round sees it.
REPLICA_COLUMNS = ("topic", "partition", "size", "slot", "broker", "replicas", "forced", "movable")

# A bench or operator supplied target assignment (evaluate mode): topic, partition, replicas.
ASSIGNMENT = StructType([
    StructField("topic", StringType(), nullable=False),
    StructField("partition", IntegerType(), nullable=False),
    StructField("replicas", ArrayType(IntegerType()), nullable=False),
])

# Disk goals: one row per replica copy between two log dirs of its broker.
DIR_MOVE_COLUMNS = ("topic", "partition", "slot", "broker", "size", "from_dir", "to_dir")
