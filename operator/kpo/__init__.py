"""kpo, the Kafka Partition Operator.

A Kopf operator that turns Kafka partition administration — reassignments (KIP-455), preferred leader elections
(KIP-183/460) and partition growth (CreatePartitions) — into declarative Kubernetes resources.
"""

__version__ = "0.1.0"
