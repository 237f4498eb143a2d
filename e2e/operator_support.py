"""The operator under test, run as a real process (``python -m kpo``) against the real test bed.

A real process, so tests can SIGKILL it mid-flight and start it again, exactly as a crashed pod would be restarted.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import ClassVar

from kubernetes.client import ApiClient, CoreV1Api, V1Namespace, V1ObjectMeta

from kpo_testbed.paths import REPO_ROOT


class OperatorProcess:
    #: Every operator started in this session and not stopped: a failing test's report shows their logs' tails.
    running: ClassVar[set[OperatorProcess]] = set()
    #: Operators stopped since the current test began (a test's ``finally`` stops its own before the report is made):
    #: their logs go into the report too. The conftest empties it as each test starts.
    stopped_in_test: ClassVar[set[OperatorProcess]] = set()

    def __init__(self, env: dict[str, str], log_path: Path, namespaces: list[str] | None = None,
                 umask: int = -1, metrics_port: int = 0) -> None:
        self.env = env
        self.metrics_port = metrics_port  # 0: no metrics endpoint
        # -1: inherit. 0 when pods of another user must write into what this (root) process creates, as the Spark
        # driver of a SparkApplication writes its plan into the work directory on a hostPath volume.
        self.umask = umask
        self.namespaces = namespaces or []
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> None:
        assert self.proc is None or self.proc.poll() is not None, "the operator is already running"
        self.starts += 1
        log = self.log_path.open("ab")
        log.write(f"\n===== start #{self.starts} =====\n".encode())
        log.flush()
        watch = [arg for ns in self.namespaces for arg in ("--namespace", ns)]
        metrics = ["--metrics-port", str(self.metrics_port)]
        self.proc = subprocess.Popen([sys.executable, "-m", "kpo", "--liveness", "", *metrics, *watch],
                                     env=self.env, cwd=REPO_ROOT, umask=self.umask,
                                     stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()
        OperatorProcess.running.add(self)
        time.sleep(1.0)
        assert self.proc.poll() is None, f"the operator exited at once:\n{self.log_tail()}"

    def kill(self) -> None:
        """SIGKILL: no cleanup, no finalizers, nothing flushed — a crash."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        terminate(self.proc)
        if self in OperatorProcess.running:
            OperatorProcess.running.discard(self)
            OperatorProcess.stopped_in_test.add(self)

    def peak_rss_bytes(self) -> int:
        """The operator process's peak resident set size so far (VmHWM), from /proc."""
        assert self.proc is not None and self.proc.poll() is None, "the operator is not running"
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
        raise AssertionError("no VmHWM in /proc/<pid>/status")

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def log_since_last_start(self) -> str:
        return self.log_text().rsplit(f"===== start #{self.starts} =====", 1)[-1]

    def log_tail(self, lines: int = 60) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])


def terminate(proc: subprocess.Popen[bytes] | None) -> None:
    """SIGTERM a child still running and wait for it; SIGKILL after 20 s."""
    if proc is not None and proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def operator_env(kubeconfig: Path, bootstrap_servers: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KPO_")}
    env.update({"KUBECONFIG": str(kubeconfig), "KPO_BOOTSTRAP_SERVERS": bootstrap_servers,
                "KPO_POLL_INTERVAL": "1", "PYTHONUNBUFFERED": "1"})
    env.update(extra or {})
    return env


@contextmanager
def watched_namespace(api_client: ApiClient, prefix: str) -> Iterator[str]:
    """A fresh namespace named ``<prefix>-<random>``, for a module whose own operator watches ``<prefix>-*`` only;
    deleted afterwards."""
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    core = CoreV1Api(api_client)
    core.create_namespace(V1Namespace(metadata=V1ObjectMeta(name=name)))
    try:
        yield name
    finally:
        core.delete_namespace(name)
