"""Flux for real (issue 28): source-controller and kustomize-controller (the binaries ``testbed/provision.sh flux``
builds) against the test bed's kube-apiserver, cloning from a git server on loopback (``git http-backend``).

Each test gets a repository of its own, named after its namespace, and a GitRepository and a Kustomization in that
namespace; a commit to the repository is what a user's ``git push`` would be. The controllers run as they ship
(leader election off, one kubeconfig, metrics and health on free loopback ports) with one feature gate:
``CancelHealthCheckOnNewRevision``, so a commit that lands while a health check waits on a long move is applied at
once instead of after the Kustomization's timeout (Flux's default: the check runs to its end first).

The Kustomization health-checks kpo's kinds with the CEL expressions kpo ships (``deploy/flux/health-checks.yaml``):
kstatus alone takes a resource with no status for Current, and kustomize-controller looks before kpo has written one.
"""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from e2e.helm_support import kubectl
from e2e.kube_support import GROUP, VERSION, wait_until
from e2e.operator_support import terminate
from kpo_testbed import Testbed, procs
from kpo_testbed.flux import FluxBinaries, GitRepository
from kpo_testbed.paths import REPO_ROOT, TESTBED_DIR
from kpo_testbed.procs import free_ports

SOURCE = ("source.toolkit.fluxcd.io", "v1", "gitrepositories")
KUSTOMIZE = ("kustomize.toolkit.fluxcd.io", "v1", "kustomizations")
#: Flux's health checks poll every 5 s (kustomize-controller's WaitForSet interval): a state must hold longer than that
#: to be sure Flux has looked at it.
FLUX_POLL = 5.0
HEALTH_CHECKS = REPO_ROOT / "deploy" / "flux" / "health-checks.yaml"


def health_check_exprs() -> list[dict[str, str]]:
    """The ``spec.healthCheckExprs`` kpo ships for a Flux Kustomization."""
    exprs: list[dict[str, str]] = yaml.safe_load(HEALTH_CHECKS.read_text())["spec"]["healthCheckExprs"]
    return exprs


@dataclass
class _Process:
    name: str
    argv: list[str]
    log_path: Path
    health: str | None = None
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def start(self, env: dict[str, str]) -> None:
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(self.argv, env=env, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)

    def ready(self) -> bool:
        assert self.proc is not None and self.proc.poll() is None, f"{self.name} exited:\n{self.log_tail()}"
        if self.health is None:
            return True
        try:
            with urllib.request.urlopen(self.health, timeout=2) as answer:
                return bool(answer.status == 200)
        except (urllib.error.URLError, ConnectionError):
            return False

    def log_tail(self, lines: int = 40) -> str:
        return procs.tail(self.log_path, lines)


class FluxControllers:
    """The git server, source-controller and kustomize-controller, started and stopped together."""

    def __init__(self, testbed: Testbed, folder: Path) -> None:
        self.binaries = FluxBinaries.from_cache()
        assert not self.binaries.missing(), f"not provisioned: {self.binaries.missing()} (make provision-flux)"
        self.testbed = testbed
        self.folder = folder
        self.git_root = folder / "git"
        self.git_root.mkdir(parents=True, exist_ok=True)
        (folder / "storage").mkdir(exist_ok=True)  # source-controller refuses a storage path that is not there
        self.git_port, storage, *ports = free_ports(6)  # held together, so six distinct ports
        self.git_url = f"http://127.0.0.1:{self.git_port}"
        kubeconfig = str(testbed.state.kube.kubeconfig)
        self.env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(folder), "KUBECONFIG": kubeconfig,
                    "PYTHONPATH": str(TESTBED_DIR)}
        common = ["--enable-leader-election=false", "--log-level=info", "--log-encoding=console",
                  "--events-addr=", "--watch-all-namespaces=true"]
        self.processes = [
            _Process("git-http", [sys.executable, "-m", "kpo_testbed.flux", str(self.git_root), str(self.git_port)],
                     folder / "git-http.log"),
            _Process("source-controller", [
                str(self.binaries.source_controller), *common, f"--storage-path={folder / 'storage'}",
                f"--storage-addr=127.0.0.1:{storage}", f"--storage-adv-addr=127.0.0.1:{storage}",
                f"--metrics-addr=127.0.0.1:{ports[0]}", f"--health-addr=127.0.0.1:{ports[1]}"],
                folder / "source-controller.log", health=f"http://127.0.0.1:{ports[1]}/readyz"),
            _Process("kustomize-controller", [
                str(self.binaries.kustomize_controller), *common, "--no-remote-bases=true",
                "--feature-gates=CancelHealthCheckOnNewRevision=true",
                f"--metrics-addr=127.0.0.1:{ports[2]}", f"--health-addr=127.0.0.1:{ports[3]}"],
                folder / "kustomize-controller.log", health=f"http://127.0.0.1:{ports[3]}/readyz"),
        ]

    def install_crds(self) -> None:
        args: list[str] = ["apply", "--server-side", "--force-conflicts"]
        for crd in self.binaries.crd_files():
            args += ["-f", str(crd)]
        kubectl(self.testbed, *args)
        names = [yaml.safe_load(p.read_text())["metadata"]["name"] for p in self.binaries.crd_files()]
        kubectl(self.testbed, "wait", "--for=condition=Established", "--timeout=60s",
                *[f"crd/{n}" for n in names])

    def start(self) -> None:
        for process in self.processes:
            process.start(self.env)
        for process in self.processes:
            wait_until(process.ready, 60, f"{process.name} ready")
        wait_until(lambda: _port_answers(self.git_port), 30, "the git server to listen")

    def stop(self) -> None:
        for process in reversed(self.processes):
            terminate(process.proc)

    def logs(self) -> str:
        return "\n".join(f"----- {p.name}\n{p.log_tail()}" for p in self.processes)


def _port_answers(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/absent.git/info/refs", timeout=2):
            return True
    except urllib.error.HTTPError:
        return True  # a 404 is an answer
    except (urllib.error.URLError, ConnectionError):
        return False


def kpo_manifest(kind: str, name: str, spec: dict[str, Any]) -> str:
    return yaml.safe_dump({"apiVersion": f"{GROUP}/{VERSION}", "kind": kind, "metadata": {"name": name},
                           "spec": spec}, sort_keys=False)


def kpr_manifest(name: str, spec: dict[str, Any]) -> str:
    return kpo_manifest("PartitionReassignment", name, spec)


class GitOps:
    """One namespace delivered by Flux: its repository, its GitRepository and its Kustomization (``wait: true``,
    ``prune: true``), named ``kpo``."""

    NAME = "kpo"

    def __init__(self, flux: FluxControllers, api: client.ApiClient, namespace: str) -> None:
        self.flux = flux
        self.custom = client.CustomObjectsApi(api)
        self.namespace = namespace
        self.repo = GitRepository(flux.git_root, namespace)
        # Always one object in the tree, so no commit leaves Flux an empty directory to build.
        self.commit({"marker.yaml": yaml.safe_dump({"apiVersion": "v1", "kind": "ConfigMap",
                                                    "metadata": {"name": "flux-marker"}})}, "marker")

    def commit(self, files: dict[str, str | None], message: str) -> str:
        """Commit; the revision as Flux names it (``main@sha1:<sha>``)."""
        return f"{self.repo.branch}@sha1:{self.repo.commit(files, message)}"

    def deliver(self, timeout: str = "3m", kpo_health_checks: bool = True) -> None:
        """Create the GitRepository (polled every 2 s) and the Kustomization (health checks up to ``timeout``, with
        kpo's CEL expressions unless ``kpo_health_checks`` is false: then kstatus alone)."""
        group, version, plural = SOURCE
        self.custom.create_namespaced_custom_object(group, version, self.namespace, plural, {
            "apiVersion": f"{group}/{version}", "kind": "GitRepository", "metadata": {"name": self.NAME},
            "spec": {"interval": "2s", "timeout": "20s", "url": f"{self.flux.git_url}/{self.namespace}.git",
                     "ref": {"branch": self.repo.branch}}})
        group, version, plural = KUSTOMIZE
        self.custom.create_namespaced_custom_object(group, version, self.namespace, plural, {
            "apiVersion": f"{group}/{version}", "kind": "Kustomization", "metadata": {"name": self.NAME},
            "spec": {"interval": "10m", "retryInterval": "5s", "timeout": timeout, "path": "./", "prune": True,
                     "wait": True, "targetNamespace": self.namespace,
                     "sourceRef": {"kind": "GitRepository", "name": self.NAME},
                     **({"healthCheckExprs": health_check_exprs()} if kpo_health_checks else {})}})

    def kustomization(self) -> dict[str, Any]:
        group, version, plural = KUSTOMIZE
        found: dict[str, Any] = self.custom.get_namespaced_custom_object(group, version, self.namespace, plural,
                                                                         self.NAME)
        return found

    def condition(self, type_: str) -> dict[str, Any]:
        """A condition of the Kustomization; ``{}`` while it has none of that type."""
        for c in self.kustomization().get("status", {}).get("conditions") or []:
            if c["type"] == type_:
                return dict(c)
        return {}

    def wait_attempted(self, revision: str, timeout: float = 90) -> None:
        """Until kustomize-controller has applied ``revision`` (it may still be health-checking it)."""
        wait_until(lambda: self.kustomization().get("status", {}).get("lastAttemptedRevision") == revision,
                   timeout, f"Flux to apply {revision}\n{self.flux.logs()}")

    def wait_ready(self, status: str, revision: str, timeout: float = 180) -> dict[str, Any]:
        """Until Ready has ``status`` for ``revision`` (for ``True``: applied, ``lastAppliedRevision`` too), read in one
        GET of the Kustomization; the Ready condition."""
        def reached() -> dict[str, Any] | None:
            ks = self.kustomization().get("status", {})
            ready = next((dict(c) for c in ks.get("conditions") or [] if c["type"] == "Ready"), {})
            if ready.get("status") != status or ks.get("lastAttemptedRevision") != revision:
                return None
            return ready if status != "True" or ks.get("lastAppliedRevision") == revision else None

        try:
            found: dict[str, Any] = wait_until(reached, timeout, f"Kustomization Ready={status} for {revision}")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; its status: {self.kustomization().get('status')}\n{self.flux.logs()}") \
                from None
        return found

    def remove(self, timeout: float = 120) -> None:
        """Delete the Kustomization (pruning what it applied) and the GitRepository, and wait until both are gone:
        their finalizers need the controllers, which stop with the module."""
        for group, version, plural in (KUSTOMIZE, SOURCE):
            try:
                self.custom.delete_namespaced_custom_object(group, version, self.namespace, plural, self.NAME)
            except ApiException as exc:
                if exc.status != 404:
                    raise

            def gone(group: str = group, version: str = version, plural: str = plural) -> bool:
                try:
                    self.custom.get_namespaced_custom_object(group, version, self.namespace, plural, self.NAME)
                except ApiException as exc:
                    if exc.status == 404:
                        return True
                    raise
                return False

            wait_until(gone, timeout, f"{plural}/{self.NAME} to be deleted")


def held(check: Any, seconds: float, what: str, interval: float = 0.5) -> None:
    """``check()`` stays truthy for ``seconds``; fails at the first sample where it does not."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert check(), f"{what} stopped holding"
        time.sleep(interval)
