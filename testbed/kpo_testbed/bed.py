"""The whole test bed: Kafka and the Kubernetes control plane, started together, described by one state file.

``Testbed.up(state_dir)`` leaves behind ``state.json`` (ports, paths, pids) and ``env`` (a shell file exporting
``KUBECONFIG``, ``KPO_BOOTSTRAP_SERVERS``, the Kafka jars and a ``PATH`` with the pinned kubectl, helm and etcd
first). Any later process — ``make testbed-down``, a pytest session, the demo — re-opens the same test bed from that
directory with ``Testbed.open``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path

from kpo_testbed import node as testbed_node
from kpo_testbed import procs
from kpo_testbed.kafka import KafkaCluster, KafkaNode
from kpo_testbed.kube import KubeControlPlane
from kpo_testbed.paths import Binaries

STATE_FILE = "state.json"
REAPER = "reaper"
ENV_FILE = "env"


class UnhealthyTestbedError(RuntimeError):
    """A test bed exists in the state directory but is not healthy; nothing of it was touched."""


@dataclass
class TestbedState:
    kafka: KafkaCluster
    kube: KubeControlPlane
    processes: dict[str, procs.ProcessRecord] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        return {"kafka": self.kafka.to_json(), "kube": self.kube.to_json(),
                "processes": {k: v.to_json() for k, v in self.processes.items()}}

    @classmethod
    def from_json(cls, data: dict[str, object]) -> TestbedState:
        kafka, kube, processes = data["kafka"], data["kube"], data["processes"]
        assert isinstance(kafka, dict) and isinstance(kube, dict) and isinstance(processes, dict)
        return cls(kafka=KafkaCluster.from_json(kafka), kube=KubeControlPlane.from_json(kube),
                   processes={k: procs.ProcessRecord.from_json(v) for k, v in processes.items()})


class Testbed:
    __test__ = False  # not a pytest test class

    def __init__(self, state_dir: Path, state: TestbedState, binaries: Binaries) -> None:
        self.state_dir = state_dir
        self.state = state
        self.binaries = binaries

    # ----------------------------------------------------------------------------------------------- lifecycle

    @classmethod
    def open(cls, state_dir: Path) -> Testbed | None:
        path = state_dir / STATE_FILE
        if not path.is_file():
            return None
        return cls(state_dir, TestbedState.from_json(json.loads(path.read_text())), Binaries.from_cache())

    @classmethod
    def up(cls, state_dir: Path, owner: int | None = None) -> Testbed:
        """Start the test bed in ``state_dir``, or return the one already running there when it is healthy.

        With ``owner`` (a pid), a reaper process stops the bed once the owner is gone without stopping it: a pytest
        session killed by a signal runs no teardown, and the bed's processes, each in a session of its own, outlive
        it. One killed mid-run left its 3 Kafka JVMs, etcd and kube-apiserver beside the next runs."""
        existing = cls.open(state_dir)
        if existing is not None:
            problems = existing.problems()
            if not problems:
                return existing
            # Its topics and Kubernetes objects may be someone's work: only `down` (make testbed-down) removes them.
            raise UnhealthyTestbedError(
                f"the test bed in {state_dir} is not healthy: {'; '.join(problems)}. Nothing was removed: "
                "`make testbed-status` shows its processes; `make testbed-down` stops it and removes its data, then "
                "`make testbed-up` starts a new one")
        binaries = Binaries.from_cache()
        missing = binaries.missing()
        if missing:
            raise RuntimeError("the test bed is not provisioned; run testbed/provision.sh (make provision). Missing: "
                               + ", ".join(str(p) for p in missing))
        data = state_dir / "data"
        shutil.rmtree(data, ignore_errors=True)
        kafka = KafkaCluster.on_free_ports(data / "kafka", binaries.kafka_libs)
        kube = KubeControlPlane.on_free_ports(data / "kube", binaries.etcd, binaries.kube_apiserver,
                                              binaries.kube_controller_manager)
        bed = cls(state_dir, TestbedState(kafka=kafka, kube=kube), binaries)
        try:
            if owner is not None:
                bed._record(bed._start_reaper(owner))
                bed._save()
            bed._start_all()
        except BaseException as exc:
            # down() removes the data directory and the logs in it: what went wrong must be read before.
            exc.add_note(bed.start_report())
            bed.down()
            raise
        return bed

    def _start_reaper(self, owner: int) -> procs.ProcessRecord:
        record = procs.record_of(owner, "owner")
        here = str(Path(__file__).resolve().parents[1])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p)}
        argv = [sys.executable, "-m", "kpo_testbed", "--dir", str(self.state_dir), "reap-after", str(record.pid),
                str(record.start_ticks)]
        return procs.start(REAPER, argv, self.state_dir / "reaper.log", env=env)

    def start_report(self) -> str:
        """Each process started so far, whether it still runs, and the end of its log."""
        parts = []
        for name, record in self.state.processes.items():
            state = "running" if procs.is_running(record) else "exited"
            parts.append(f"--- {name} (pid {record.pid}, {state}), {self._log_of(name)}:\n"
                         f"{procs.tail(self._log_of(name))}")
        return "\n".join(parts)

    def _log_of(self, name: str) -> Path:
        if name == REAPER:
            return self.state_dir / "reaper.log"
        if name.startswith("kafka-"):
            return self.state.kafka.node_dir(int(name.removeprefix("kafka-"))) / "server.log"
        return self.state.kube.root / f"{name}.log"

    def _start_all(self) -> None:
        kafka, kube = self.state.kafka, self.state.kube
        kafka.write_config()
        kube.write_config()
        self._record(kube.start_etcd())
        self._save()
        kafka.format_storage()
        for node in kafka.nodes:
            self._record(kafka.start_node(node.node_id))
        self._save()
        procs.wait_until(kube.etcd_healthy, 60, "etcd to be healthy")
        self._record(kube.start_apiserver())
        self._save()
        kafka.wait_healthy()
        kafka.store_scram_credentials()
        procs.wait_until(kube.apiserver_ready, 120, "kube-apiserver /readyz")
        self._record(kube.start_controller_manager())
        self._save()
        # 120 s as for the API server: on a loaded machine (two workers' beds starting beside the unit tests) a CI run
        # saw both controller managers miss 60 s.
        procs.wait_until(kube.controller_manager_healthy, 120, "kube-controller-manager /healthz")
        self.write_env()

    def down(self) -> None:
        """Stop every process this test bed started (by pid), then remove its data, state and env files."""
        testbed_node.down(self.state_dir)  # its pods and kubelet need the API server to leave cleanly
        running = self.state.processes
        kube_first = [running[n] for n in ("kube-controller-manager", "kube-apiserver") if n in running]
        kafka_nodes = [r for n, r in running.items() if n.startswith("kafka-")]
        procs.stop_all(kube_first + kafka_nodes)
        if "etcd" in running:
            procs.stop(running["etcd"])
        reaper = running.get(REAPER)
        self.state.processes.clear()
        shutil.rmtree(self.state_dir / "data", ignore_errors=True)
        for name in (STATE_FILE, ENV_FILE):
            (self.state_dir / name).unlink(missing_ok=True)
        # Last: should the owner die halfway through this, its reaper finishes the job.
        if reaper is not None and reaper.pid != os.getpid():
            procs.stop(reaper)

    def healthy(self) -> bool:
        return not self.problems()

    def problems(self) -> list[str]:
        """What keeps the test bed from being healthy; none when it is. Brokers started by :meth:`add_broker` count
        as part of it while they run: a scale-out is not a broken bed."""
        core = {"etcd", "kube-apiserver", "kube-controller-manager"} | {
            f"kafka-{n.node_id}" for n in self.state.kafka.nodes}
        missing = sorted(core - set(self.state.processes))
        dead = sorted(name for name, record in self.state.processes.items() if not procs.is_running(record))
        problems = [f"{', '.join(missing)} not started"] if missing else []
        problems += [f"{', '.join(dead)} not running"] if dead else []
        if problems:
            return problems
        brokers = {int(name.removeprefix("kafka-")) for name in self.state.processes if name.startswith("kafka-")}
        try:
            if not self.state.kube.apiserver_ready():
                problems.append("kube-apiserver is not ready")
            unregistered = sorted(brokers - self.state.kafka.live_brokers())
        except Exception as exc:
            return [*problems, f"Kafka does not answer ({type(exc).__name__})"]
        if unregistered:
            problems.append(f"Kafka broker(s) {unregistered} not registered")
        return problems

    # ---------------------------------------------------------------------------------------------- Kafka nodes

    def kill_node(self, node_id: int, graceful: bool = False) -> None:
        """Stop one Kafka node: SIGKILL by default (a crash), SIGTERM with ``graceful`` (a controlled shutdown)."""
        record = self.state.processes.pop(f"kafka-{node_id}", None)
        if record is None:
            raise RuntimeError(f"Kafka node {node_id} is not running")
        procs.stop(record, sig=signal.SIGTERM if graceful else signal.SIGKILL, timeout=60)
        self._save()

    def start_node(self, node_id: int, wait: bool = True) -> None:
        name = f"kafka-{node_id}"
        if name in self.state.processes and procs.is_running(self.state.processes[name]):
            return
        self._record(self.state.kafka.start_node(node_id))
        self._save()
        if wait:
            self.state.kafka.wait_healthy((node_id,))

    def add_broker(self, node_id: int, rack: str, timeout: float = 180) -> KafkaNode:
        """Start a broker-only node that joins this cluster (a scale-out) and wait until it is registered."""
        kafka = self.state.kafka
        node = kafka.extra_broker(node_id, rack)
        self._record(kafka.add_broker(node))
        self._save()
        procs.wait_until(lambda: node_id in kafka.live_brokers(bootstrap_servers=node.bootstrap), timeout,
                         f"new broker {node_id} to register")
        return node

    def remove_broker(self, node_id: int, timeout: float = 60) -> None:
        """Stop a node started by :meth:`add_broker` (a controlled shutdown), unregister it and remove its data."""
        record = self.state.processes.pop(f"kafka-{node_id}", None)
        if record is not None:
            procs.stop(record, timeout=60)
        self._save()
        kafka = self.state.kafka
        procs.wait_until(lambda: node_id not in kafka.live_brokers(), timeout, f"broker {node_id} to leave")
        kafka.unregister_broker(node_id)
        shutil.rmtree(kafka.node_dir(node_id), ignore_errors=True)

    def active_controller(self) -> int:
        running = tuple(n.node_id for n in self.state.kafka.nodes
                        if (r := self.state.processes.get(f"kafka-{n.node_id}")) is not None and procs.is_running(r))
        return self.state.kafka.active_controller(running)

    # ----------------------------------------------------------------------------------------------- kube-apiserver

    def stop_apiserver(self, graceful: bool = True) -> None:
        """Stop kube-apiserver (SIGTERM, or SIGKILL without ``graceful``); etcd and every object stay."""
        record = self.state.processes.pop("kube-apiserver", None)
        if record is None:
            raise RuntimeError("kube-apiserver is not running")
        procs.stop(record, sig=signal.SIGTERM if graceful else signal.SIGKILL, timeout=60)
        self._save()

    def start_apiserver(self, wait: bool = True) -> None:
        """Start kube-apiserver again on the same port, certificates and tokens, so every client config holds."""
        name = "kube-apiserver"
        if name in self.state.processes and procs.is_running(self.state.processes[name]):
            return
        kube = self.state.kube
        procs.wait_until(lambda: not procs.port_open(kube.apiserver_port), 30,
                         f"port {kube.apiserver_port} to be free")
        self._record(kube.start_apiserver())
        self._save()
        if wait:
            procs.wait_until(kube.apiserver_ready, 120, "kube-apiserver /readyz")

    # --------------------------------------------------------------------------------------------------- output

    def env(self) -> dict[str, str]:
        kafka, kube = self.state.kafka, self.state.kube
        path_prefix = ":".join(str(p) for p in self.binaries.path_dirs())
        return {
            "KPO_TESTBED_DIR": str(self.state_dir),
            "KUBECONFIG": str(kube.kubeconfig),
            "KPO_KUBE_SERVER": kube.server,
            "KPO_BOOTSTRAP_SERVERS": kafka.bootstrap_servers,
            "KPO_KAFKA_CONTROLLERS": ",".join(f"127.0.0.1:{n.controller_port}" for n in kafka.nodes),
            "KPO_SASL_BOOTSTRAP_SERVERS": kafka.sasl_bootstrap_servers,
            "KPO_KAFKA_LIBS": str(kafka.libs),
            "KPO_KUBECTL": str(self.binaries.kubectl),
            "KPO_HELM": str(self.binaries.helm),
            "PATH": f"{path_prefix}:{os.environ.get('PATH', '')}",
        }

    def write_env(self) -> None:
        lines = ["# Written by the kpo test bed; source it: . .testbed/env"]
        for key, value in self.env().items():
            if key == "PATH":
                prefix = ":".join(str(p) for p in self.binaries.path_dirs())
                lines.append(f'export PATH="{prefix}:$PATH"')
            else:
                lines.append(f"export {key}='{value}'")
        (self.state_dir / ENV_FILE).write_text("\n".join(lines) + "\n")

    def _record(self, record: procs.ProcessRecord) -> None:
        self.state.processes[record.name] = record

    def _save(self) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        (self.state_dir / STATE_FILE).write_text(json.dumps(self.state.to_json(), indent=2) + "\n")
