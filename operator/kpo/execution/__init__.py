"""Execution per Kafka cluster: the one place that reads a cluster for every resource and sends it moves.

A Kafka cluster is shared by every resource that names it, so its limits, its throttles and what it is moving are the
cluster's, not a resource's. :mod:`.observation` reads the cluster once for every tick that needs a fresh look;
:mod:`.executor` admits moves against the limits (counting the ones it sent that Kafka does not list yet) and is the
only sender of reassignments, cancellations and throttle changes; :mod:`.ledger` holds which throttles kpo set, for
whom. Nothing here knows Kopf or Kubernetes: ports are handed in.
"""
