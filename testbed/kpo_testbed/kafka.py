"""A 3-node KRaft Kafka cluster (combined broker + controller) on loopback.

Each node has a controller listener and three client listeners on 127.0.0.1: PLAINTEXT, whose anonymous principal is
a super user (tests and the default kpo connection), SASL_PLAINTEXT with SCRAM-SHA-512, where the StandardAuthorizer
applies ACLs (credentials from Secrets, authorization refusals), and PODS, PLAINTEXT again but advertised at the test
bed node's address, for pods on the pod network (the node forwards that address to loopback, see node.sh). Two log
directories per node (so DescribeLogDirs and log-dir moves have something to show), a rack of its own, and
``auto.leader.rebalance.enable=false`` so that leader-election tests are deterministic. Heaps are bounded: an
unbounded JVM takes a quarter of the machine.
"""

from __future__ import annotations

import logging
import re
import secrets
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialAlteration,
    UserScramCredentialUpsertion,
)

from kpo_testbed import procs
from kpo_testbed.node import NODE_IP

NODE_IDS = (1, 2, 3)
_QUIET = logging.getLogger("kpo_testbed.librdkafka")
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False
CLUSTER_ID_RE = re.compile(r"^[A-Za-z0-9_-]{22}$")

LOG4J2 = """\
status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = OUT
logger.statechange.name = state.change.logger
logger.statechange.level = WARN
logger.request.name = kafka.request.logger
logger.request.level = WARN
"""


# SCRAM users created when the storage is formatted: an admin (super user) and a user with no ACLs of its own.
SCRAM_MECHANISM = "SCRAM-SHA-512"
ADMIN_USER = "admin"
LIMITED_USER = "kpo-limited"


@dataclass(frozen=True)
class KafkaNode:
    node_id: int
    client_port: int
    controller_port: int
    rack: str
    sasl_port: int = 0
    pods_port: int = 0

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.client_port}"

    @property
    def pods_bootstrap(self) -> str:
        return f"{NODE_IP}:{self.pods_port}"

    @property
    def sasl_bootstrap(self) -> str:
        return f"127.0.0.1:{self.sasl_port}"


@dataclass
class KafkaCluster:
    root: Path
    libs: Path
    nodes: list[KafkaNode]
    extra_properties: dict[str, str] = field(default_factory=dict)
    heap: str = "-Xms256m -Xmx512m"
    # SCRAM passwords by user name, made up for each test bed.
    passwords: dict[str, str] = field(default_factory=dict)

    @classmethod
    def on_free_ports(cls, root: Path, libs: Path) -> KafkaCluster:
        ports = procs.free_ports(4 * len(NODE_IDS))
        nodes = [
            KafkaNode(node_id=n, client_port=ports[4 * i], controller_port=ports[4 * i + 1], rack=f"rack-{'abc'[i]}",
                      sasl_port=ports[4 * i + 2], pods_port=ports[4 * i + 3])
            for i, n in enumerate(NODE_IDS)
        ]
        passwords = {ADMIN_USER: secrets.token_hex(12), LIMITED_USER: secrets.token_hex(12)}
        return cls(root=root, libs=libs, nodes=nodes, passwords=passwords)

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(n.bootstrap for n in self.nodes)

    @property
    def sasl_bootstrap_servers(self) -> str:
        return ",".join(n.sasl_bootstrap for n in self.nodes)

    @property
    def pods_bootstrap_servers(self) -> str:
        """Where pods on the test bed node's pod network reach Kafka."""
        return ",".join(n.pods_bootstrap for n in self.nodes)

    def node(self, node_id: int) -> KafkaNode:
        for n in self.nodes:
            if n.node_id == node_id:
                return n
        raise KeyError(f"no Kafka node {node_id}; nodes are {[n.node_id for n in self.nodes]}")

    def node_dir(self, node_id: int) -> Path:
        return self.root / f"node-{node_id}"

    def log_dirs(self, node_id: int) -> list[Path]:
        return [self.node_dir(node_id) / "data-a", self.node_dir(node_id) / "data-b"]

    def properties(self, node: KafkaNode) -> dict[str, str]:
        voters = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in self.nodes)
        listening = [("PLAINTEXT", node.client_port), ("SASL_PLAINTEXT", node.sasl_port)]
        advertised = [("PLAINTEXT", node.bootstrap), ("SASL_PLAINTEXT", node.sasl_bootstrap)]
        if node.pods_port:
            # PODS listens on loopback too: Kafka needs no address of the node's; only pods' metadata names it.
            listening.append(("PODS", node.pods_port))
            advertised.append(("PODS", node.pods_bootstrap))
        if node.controller_port:
            listening.append(("CONTROLLER", node.controller_port))
        props = {
            # A node without a controller port is a broker joining the quorum of the others (add_broker).
            "process.roles": "broker,controller" if node.controller_port else "broker",
            "node.id": str(node.node_id),
            "controller.quorum.voters": voters,
            "listeners": ",".join(f"{name}://127.0.0.1:{port}" for name, port in listening),
            "advertised.listeners": ",".join(f"{name}://{address}" for name, address in advertised),
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,PODS:PLAINTEXT,"
                                              "CONTROLLER:PLAINTEXT",
            "sasl.enabled.mechanisms": SCRAM_MECHANISM,
            f"listener.name.sasl_plaintext.{SCRAM_MECHANISM.lower()}.sasl.jaas.config":
                "org.apache.kafka.common.security.scram.ScramLoginModule required;",
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            # PLAINTEXT (tests, inter-broker) and CONTROLLER connections are anonymous: make them super users, so
            # ACLs only ever apply on the SASL listener.
            "super.users": f"User:ANONYMOUS;User:{ADMIN_USER}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": ",".join(str(d) for d in self.log_dirs(node.node_id)),
            "broker.rack": node.rack,
            "auto.leader.rebalance.enable": "false",
            "auto.create.topics.enable": "false",
            "offsets.topic.replication.factor": "3",
            "offsets.topic.num.partitions": "6",
            "transaction.state.log.replication.factor": "3",
            "transaction.state.log.min.isr": "2",
            "transaction.state.log.num.partitions": "6",
            "share.coordinator.state.topic.replication.factor": "3",
            "share.coordinator.state.topic.min.isr": "2",
            "group.initial.rebalance.delay.ms": "0",
            "num.network.threads": "2",
            "num.io.threads": "2",
            "background.threads": "2",
            "num.replica.fetchers": "1",
            "num.recovery.threads.per.data.dir": "1",
            "log.cleaner.threads": "1",
            "log.cleaner.dedupe.buffer.size": str(8 * 1024 * 1024),
            "log.segment.bytes": str(16 * 1024 * 1024),
            # Fast failure detection, so that killing a node in a test shows up in seconds, not minutes.
            "broker.session.timeout.ms": "6000",
            "broker.heartbeat.interval.ms": "1000",
            "replica.lag.time.max.ms": "10000",
            # The KRaft quorum's defaults (2 s fetch and request timeouts, 1 s election) are tuned for dedicated
            # machines: on two busy cores a voter's fetch took 3 s, the quorum re-elected again and again, and fencing
            # a killed broker took 74 s to commit. These survive such stalls; a dead leader is replaced in ~8 s.
            "controller.quorum.fetch.timeout.ms": "6000",
            "controller.quorum.request.timeout.ms": "5000",
            "controller.quorum.election.timeout.ms": "2000",
            # A node restarted right after a SIGKILL is refused (DUPLICATE_BROKER_REGISTRATION) until its old session
            # expires, and on busy cores a controller election may come on top: the default minute ran out in a test
            # run and the broker shut itself down for good. Five minutes is what the tests wait for a restarted node.
            "initial.broker.registration.timeout.ms": "300000",
        }
        props.update(self.extra_properties)
        return props

    def write_config(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "log4j2.properties").write_text(LOG4J2)
        for node in self.nodes:
            ndir = self.node_dir(node.node_id)
            ndir.mkdir(parents=True, exist_ok=True)
            lines = [f"{k}={v}" for k, v in self.properties(node).items()]
            (ndir / "server.properties").write_text("\n".join(lines) + "\n")

    def java(self, main_class: str, *args: str, heap: str = "-Xms64m -Xmx256m") -> list[str]:
        return [
            "java",
            *heap.split(),
            "-XX:+UseSerialGC" if "Xmx256m" in heap else "-XX:+UseG1GC",
            f"-Dlog4j2.configurationFile={self.root / 'log4j2.properties'}",
            "-cp",
            f"{self.libs}/*",
            main_class,
            *args,
        ]

    def run_tool(self, main_class: str, *args: str, timeout: float = 120) -> str:
        result = subprocess.run(self.java(main_class, *args), capture_output=True, text=True, timeout=timeout,
                                check=False)
        if result.returncode != 0:
            raise RuntimeError(f"{main_class} {' '.join(args)} failed ({result.returncode}):\n{result.stderr[-4000:]}")
        return result.stdout

    def format_storage(self) -> str:
        cluster_id = self.run_tool("kafka.tools.StorageTool", "random-uuid").strip().splitlines()[-1]
        if not CLUSTER_ID_RE.match(cluster_id):
            raise RuntimeError(f"StorageTool random-uuid printed {cluster_id!r}, not a cluster id")
        scram = [arg for user, password in sorted(self.passwords.items())
                 for arg in ("--add-scram", f"{SCRAM_MECHANISM}=[name={user},password={password}]")]
        for node in self.nodes:
            props = self.node_dir(node.node_id) / "server.properties"
            self.run_tool("kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(props),
                          "--ignore-formatted", *scram)
        return cluster_id

    def store_scram_credentials(self) -> None:
        """Write the SCRAM users into the replicated metadata log (over the super user's PLAINTEXT listener).

        ``format --add-scram`` puts them only in each node's bootstrap image: a node restarted from a metadata
        snapshot came back without them and refused the limited user's logins ("invalid credentials"), and the
        controller listed no SCRAM user at all. Stored through the Admin API they are records every node replays.
        """
        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers}, logger=_QUIET)
        info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192)
        upserts: list[UserScramCredentialAlteration] = [
            UserScramCredentialUpsertion(user, info, password.encode())
            for user, password in sorted(self.passwords.items())]
        for future in admin.alter_user_scram_credentials(upserts).values():
            future.result(timeout=30)

    def start_node(self, node_id: int) -> procs.ProcessRecord:
        ndir = self.node_dir(node_id)
        argv = self.java("kafka.Kafka", str(ndir / "server.properties"), heap=self.heap)
        return procs.start(f"kafka-{node_id}", argv, ndir / "server.log")

    def cluster_id(self) -> str:
        meta = (self.log_dirs(self.nodes[0].node_id)[0] / "meta.properties").read_text()
        match = re.search(r"^cluster\.id=(\S+)$", meta, re.MULTILINE)
        if not match:
            raise RuntimeError(f"no cluster.id in node {self.nodes[0].node_id}'s meta.properties")
        return match.group(1)

    def extra_broker(self, node_id: int, rack: str) -> KafkaNode:
        """A broker-only node (no controller port) on free ports, not part of :attr:`nodes`: a scale-out."""
        client_port, sasl_port = procs.free_ports(2)
        return KafkaNode(node_id=node_id, client_port=client_port, controller_port=0, rack=rack, sasl_port=sasl_port)

    def add_broker(self, node: KafkaNode) -> procs.ProcessRecord:
        """Format fresh storage for ``node`` in this cluster and start it: it registers with the controllers as a new
        broker holding nothing."""
        ndir = self.node_dir(node.node_id)
        shutil.rmtree(ndir, ignore_errors=True)
        ndir.mkdir(parents=True)
        props = ndir / "server.properties"
        props.write_text("".join(f"{k}={v}\n" for k, v in self.properties(node).items()))
        self.run_tool("kafka.tools.StorageTool", "format", "-t", self.cluster_id(), "-c", str(props),
                      "--ignore-formatted")
        argv = self.java("kafka.Kafka", str(props), heap="-Xms128m -Xmx256m")
        return procs.start(f"kafka-{node.node_id}", argv, ndir / "server.log")

    def unregister_broker(self, node_id: int) -> None:
        """Remove a stopped broker's registration (kafka-cluster.sh unregister), so the cluster forgets it."""
        self.run_tool("org.apache.kafka.tools.ClusterTool", "unregister", "--bootstrap-server",
                      self.bootstrap_servers, "--id", str(node_id))

    def live_brokers(self, timeout: float = 5.0, bootstrap_servers: str | None = None) -> set[int]:
        admin = AdminClient({"bootstrap.servers": bootstrap_servers or self.bootstrap_servers,
                             "socket.timeout.ms": 3000}, logger=_QUIET)
        metadata = admin.list_topics(timeout=timeout)
        return set(metadata.brokers)

    def wait_healthy(self, node_ids: tuple[int, ...] = NODE_IDS, timeout: float = 120) -> None:
        """Each node answers on its own listener and the cluster lists it. Asking the cluster alone is not enough
        after a restart: the killed incarnation stays registered until its session expires, so a node that has not
        registered again (and may yet give up) would pass."""
        nodes = [n for n in self.nodes if n.node_id in node_ids]

        procs.wait_until(lambda: all(n.node_id in self.live_brokers(bootstrap_servers=n.bootstrap) for n in nodes),
                         timeout, f"Kafka brokers {sorted(node_ids)} to register")

    def active_controller(self, node_ids: tuple[int, ...] | None = None) -> int:
        """The node id of the active KRaft controller: LeaderId in kafka-metadata-quorum.sh describe --status.

        ``node_ids`` are the controllers to ask (those running): the tool gives up on a dead bootstrap address.
        """
        asked = [n for n in self.nodes if node_ids is None or n.node_id in node_ids]
        bootstrap = ",".join(f"127.0.0.1:{n.controller_port}" for n in asked)
        out = self.run_tool("org.apache.kafka.tools.MetadataQuorumCommand", "--bootstrap-controller", bootstrap,
                            "describe", "--status")
        match = re.search(r"^LeaderId:\s*(\d+)", out, re.MULTILINE)
        if not match:
            raise RuntimeError(f"no LeaderId in kafka-metadata-quorum output:\n{out}")
        return int(match.group(1))

    def to_json(self) -> dict[str, object]:
        return {
            "root": str(self.root),
            "libs": str(self.libs),
            "nodes": [n.__dict__ for n in self.nodes],
            "extra_properties": self.extra_properties,
            "heap": self.heap,
            "passwords": self.passwords,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> KafkaCluster:
        nodes = data["nodes"]
        props = data.get("extra_properties", {})
        passwords = data.get("passwords", {})
        assert isinstance(nodes, list) and isinstance(props, dict) and isinstance(passwords, dict)
        return cls(root=Path(str(data["root"])), libs=Path(str(data["libs"])),
                   nodes=[KafkaNode(**n) for n in nodes], extra_properties=dict(props), heap=str(data["heap"]),
                   passwords=dict(passwords))

    def remove_data(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
