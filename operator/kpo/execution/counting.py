"""Kafka requests counted by the request they send, for the ``kpo_kafka_requests_total`` metric.

The issue that made the cluster the unit of execution was measured in requests: every resource's tick read the whole
cluster for itself. The figure that shows it fixed is requests per look and per resource, so every call through the
:class:`~kpo.kafka.admin.KafkaAdmin` Protocol is counted under the Kafka request it makes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from kpo.kafka.admin import KafkaAdmin

#: The Protocol's methods and the Kafka request each one sends (per broker or per topic for some: counted once).
REQUESTS = {
    "brokers": "DescribeCluster",
    "topic_names": "Metadata",
    "describe_topics": "DescribeTopics",
    "list_reassignments": "ListPartitionReassignments",
    "alter_reassignments": "AlterPartitionReassignments",
    "log_dirs": "DescribeLogDirs",
    "alter_replica_log_dirs": "AlterReplicaLogDirs",
    "topic_configs": "DescribeConfigs",
    "broker_configs": "DescribeConfigs",
    "metadata_level": "ApiVersions",
    "alter_configs": "IncrementalAlterConfigs",
    "elect_leaders": "ElectLeaders",
    "create_partitions": "CreatePartitions",
    "sample_key_partitions": "Fetch",
}


class _Counted:
    def __init__(self, kafka: KafkaAdmin, count: Callable[[str], None]) -> None:
        self._kafka = kafka
        self._count = count

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._kafka, name)
        request = REQUESTS.get(name)
        if request is None or not callable(found):
            return found

        def call(*args: Any, **kwargs: Any) -> Any:
            self._count(request)
            return found(*args, **kwargs)
        return call


def counted(kafka: KafkaAdmin, count: Callable[[str], None]) -> KafkaAdmin:
    """``kafka`` with each request told to ``count`` before it is sent."""
    return cast(KafkaAdmin, _Counted(kafka, count))
