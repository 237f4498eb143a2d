"""The kpo test bed: a real 3-node KRaft Kafka and a real kube-apiserver on loopback.

Everything kpo claims is verified against these servers, so this package is deliberately small and explicit: it
writes configuration, starts processes from the binaries that ``testbed/provision.sh`` built into the cache, waits
until they are healthy, records their pids in the state directory and stops exactly those pids again. It never
touches a process it did not start.
"""

from kpo_testbed.bed import Testbed, TestbedState, UnhealthyTestbedError

__all__ = ["Testbed", "TestbedState", "UnhealthyTestbedError"]
