"""DemoteBrokers: a plan that moves leadership, never data.

Kafka's preferred leader is the first replica of a partition's list, and a preferred leader election hands
leadership to it. Demoting a broker puts it at the end of every replica list it is in, so that the election that
follows (the goal implies ``electLeadersAfter``) leaves it leading nothing: what Cruise Control's ``demote_broker``
does, and what a platform team wants before a broker's maintenance or while it misbehaves. The replica sets do not
change, so Kafka completes each reassignment at once and copies nothing; reverting the resource (``stop: Revert``)
restores the original order.

``excludeLeaders`` of the other goals uses the same reordering, but only for the lists those brokers head
(:func:`lead_elsewhere`); the leader rounds then hand them nothing.

The rest of each list keeps its order, with one exception: when the demoted broker was the preferred leader and the
replica that now comes first is out of sync, the first in-sync replica that is not demoted is brought forward, so
the election can succeed at once. A partition whose replicas are all demoted keeps its order: nobody else can lead.
"""

from __future__ import annotations

from collections.abc import Iterable

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from kpo.planning.spark.exprs import members
from kpo.planning.spark.schemas import STATE_COLUMNS


def demoted_order(brokers: Iterable[int]) -> Column:
    """The ``replicas`` of a row with ``brokers`` moved to the end (see the module text)."""
    demoted = members(brokers)
    replicas = F.col("replicas")
    stable = F.concat(F.filter(replicas, lambda b: ~demoted.has(b)), F.filter(replicas, demoted.has))
    in_sync_successor = F.try_element_at(
        F.filter(stable, lambda b: ~demoted.has(b) & F.array_contains("isr", b)), F.lit(1))
    promote = (demoted.has(F.try_element_at(replicas, F.lit(1)))
               & ~F.array_contains("isr", F.try_element_at(stable, F.lit(1)))
               & in_sync_successor.isNotNull())
    promoted = F.concat(F.array(in_sync_successor), F.filter(stable, lambda b: b != in_sync_successor))
    return F.when(promote, promoted).otherwise(stable)


def lead_elsewhere(state: DataFrame, brokers: Iterable[int]) -> DataFrame:
    """``state`` where no selected partition is headed by one of ``brokers`` that another replica could lead
    (``excludeLeaders``): the same reordering as a demotion, applied only to the lists those brokers head, so a
    partition they merely follow is left alone."""
    excluded = tuple(brokers)
    heads = members(excluded).has(F.try_element_at("replicas", F.lit(1)))
    return state.withColumn("replicas", F.when(F.col("selected") & heads, demoted_order(excluded))
                            .otherwise(F.col("replicas"))).select(*STATE_COLUMNS)


def demote(state: DataFrame, brokers: Iterable[int]) -> DataFrame:
    """``state`` with ``brokers`` at the end of the replica lists of the selected partitions."""
    order = demoted_order(tuple(brokers))
    return state.withColumn("replicas", F.when(F.col("selected"), order).otherwise(F.col("replicas"))) \
        .select(*STATE_COLUMNS)
