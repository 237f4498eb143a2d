"""The Helm chart on the real test bed: install it with the real ``helm``, and run the operator the way the chart's
Deployment would — its command line, its environment, its rendered configuration, and the chart's ServiceAccount.

There is no kubelet, so the Deployment's pod never starts. :class:`ChartOperator` therefore reads the Deployment
and the ConfigMap that ``helm install`` created from the API server and starts the container's command (``python``
replaced by this interpreter) as a local process, logged in with a TokenRequest token of the chart's ServiceAccount.
Whatever the chart forgot to grant shows up as a 403.

Such a test must be the only operator acting on its resources, or it could not tell who did the work. The shared
test bed's API server is watched by every running e2e session's operator (admin, all namespaces — and several
sessions may share one test bed), so these tests give the chart an API server of their own:
:func:`private_control_plane` starts etcd and kube-apiserver from the test bed's binaries on free ports (a few
seconds), next to the shared Kafka. Nothing but the test's own operator knows that API server exists.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, config

from e2e.conftest import SESSION
from e2e.operator_support import OperatorProcess
from kpo_testbed import Testbed, procs
from kpo_testbed.kube import KubeControlPlane
from kpo_testbed.paths import REPO_ROOT

CHART = REPO_ROOT / "helm" / "kpo"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def helm(testbed: Testbed, *args: str, check: bool = True, kubeconfig: Path | None = None
         ) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **testbed.env()}
    if kubeconfig is not None:
        env["KUBECONFIG"] = str(kubeconfig)
    result = subprocess.run([testbed.env()["KPO_HELM"], *args], env=env, capture_output=True, text=True,
                            check=False, timeout=120)
    if check:
        assert result.returncode == 0, f"helm {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}"
    return result


def kubectl(testbed: Testbed, *args: str, check: bool = True, kubeconfig: Path | None = None
            ) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **testbed.env()}
    if kubeconfig is not None:
        env["KUBECONFIG"] = str(kubeconfig)
    result = subprocess.run([testbed.env()["KPO_KUBECTL"], *args], env=env, capture_output=True, text=True,
                            check=False, timeout=300)
    if check:
        assert result.returncode == 0, f"kubectl {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}"
    return result


def template(testbed: Testbed, values: dict[str, Any], tmp: Path, namespace: str = "kpo-system",
             check: bool = True) -> subprocess.CompletedProcess[str]:
    path = tmp / f"values-{uuid.uuid4().hex[:6]}.yaml"
    path.write_text(yaml.safe_dump(values))
    return helm(testbed, "template", "kpo", str(CHART), "-n", namespace, "-f", str(path), check=check)


def documents(rendered: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(rendered) if d]


@dataclass
class Release:
    name: str
    namespace: str
    values_file: Path
    kubeconfig: Path | None = None

    @property
    def fullname(self) -> str:
        return self.name if "kpo" in self.name else f"{self.name}-kpo"


@contextlib.contextmanager
def installed(testbed: Testbed, namespace: str, values: dict[str, Any], tmp: Path,
              kubeconfig: Path | None = None) -> Iterator[Release]:
    """``helm install`` into ``namespace``; ``helm uninstall`` afterwards (its ClusterRoles are cluster-wide)."""
    name = f"kpo-{uuid.uuid4().hex[:6]}"
    values_file = tmp / f"{name}-values.yaml"
    values_file.write_text(yaml.safe_dump(values))
    helm(testbed, "install", name, str(CHART), "-n", namespace, "--create-namespace", "-f", str(values_file),
         kubeconfig=kubeconfig)
    try:
        yield Release(name, namespace, values_file, kubeconfig)
    finally:
        helm(testbed, "uninstall", name, "-n", namespace, "--wait", "--timeout", "60s", check=False,
             kubeconfig=kubeconfig)


#: Pod Security admission's restricted profile: any pod of the namespace that breaks one of its rules is refused.
RESTRICTED = {"pod-security.kubernetes.io/enforce": "restricted",
              "pod-security.kubernetes.io/enforce-version": "latest"}


@contextlib.contextmanager
def installed_on_node(testbed: Testbed, operator_image: str, api_client: client.ApiClient, tmp: Path,
                      values: dict[str, Any]) -> Iterator[tuple[Release, str]]:
    """kpo's chart with the operator image built from HEAD, in a new namespace of the restricted profile that the
    release watches, against the test bed's Kafka as pods reach it; ``values`` go over those. The namespace is deleted
    afterwards."""
    namespace = f"e2en-{SESSION}-{uuid.uuid4().hex[:6]}"
    core = client.CoreV1Api(api_client)
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace, labels=RESTRICTED)))
    image, _, tag = operator_image.rpartition(":")
    chart_values = {
        "image": {"repository": image, "tag": tag, "pullPolicy": "Never"},
        "watchNamespaces": [namespace],
        "kafka": {"clusters": {"default": {"bootstrapServers": testbed.state.kafka.pods_bootstrap_servers}}},
        "operator": {"pollIntervalSeconds": 1},
        **values,
    }
    try:
        with installed(testbed, namespace, chart_values, tmp) as release:
            yield release, namespace
    finally:
        core.delete_namespace(namespace)


@dataclass
class ControlPlane:
    """A private etcd + kube-apiserver: RBAC, TokenRequest, admission — everything but other people's operators."""

    kube: KubeControlPlane
    api: client.ApiClient

    @property
    def kubeconfig(self) -> Path:
        return self.kube.kubeconfig


@contextlib.contextmanager
def private_control_plane(testbed: Testbed, root: Path) -> Iterator[ControlPlane]:
    binaries = testbed.binaries
    kube = KubeControlPlane.on_free_ports(root, binaries.etcd, binaries.kube_apiserver,
                                          binaries.kube_controller_manager)
    kube.write_config()
    started: list[procs.ProcessRecord] = []
    try:
        started.append(kube.start_etcd())
        procs.wait_until(kube.etcd_healthy, 60, "etcd to be healthy")
        started.append(kube.start_apiserver())
        procs.wait_until(kube.apiserver_ready, 120, "kube-apiserver /readyz")
        yield ControlPlane(kube, config.new_client_from_config(config_file=str(kube.kubeconfig)))
    finally:
        procs.stop_all(started[::-1])  # only the processes started here, by pid


def service_account_kubeconfig(testbed: Testbed, release: Release, path: Path) -> Path:
    """A kubeconfig holding a TokenRequest token of the chart's ServiceAccount (not the admin's token)."""
    token = kubectl(testbed, "create", "token", release.fullname, "-n", release.namespace,
                    "--duration", "1h", kubeconfig=release.kubeconfig).stdout.strip()
    user = f"system:serviceaccount:{release.namespace}:{release.fullname}"
    admin = release.kubeconfig or testbed.state.kube.kubeconfig
    path.write_text(kubeconfig_with_token(admin, token, user, release.namespace))
    return path


def kubeconfig_with_token(admin_kubeconfig: Path, token: str, user: str, namespace: str) -> str:
    """The admin's kubeconfig (server, CA) with another user's bearer token."""
    document = yaml.safe_load(admin_kubeconfig.read_text())
    document["users"] = [{"name": user, "user": {"token": token}}]
    for context in document["contexts"]:
        context["context"].update({"user": user, "namespace": namespace})
    return json.dumps(document, indent=2) + "\n"


def api_client_for(kubeconfig: Path) -> client.ApiClient:
    return config.new_client_from_config(config_file=str(kubeconfig))


def local_port(value: str) -> int:
    return int(value.rsplit(":", 1)[-1].split("/", 1)[0])


class ChartOperator:
    """The chart's Deployment, run as a local process: same command, arguments, environment and config file."""

    def __init__(self, admin: client.ApiClient, release: Release, kubeconfig: Path, workdir: Path) -> None:
        apps = client.AppsV1Api(admin)
        deployment = apps.read_namespaced_deployment(release.fullname, release.namespace)
        container = deployment.spec.template.spec.containers[0]
        config_map = client.CoreV1Api(admin).read_namespaced_config_map(release.fullname, release.namespace)
        mount = next(m.mount_path for m in container.volume_mounts if m.name == "config")
        config_dir = workdir / "etc-kpo"
        config_dir.mkdir(parents=True, exist_ok=True)
        for key, text in (config_map.data or {}).items():
            (config_dir / key).write_text(text)

        self.command: list[str] = list(container.command) + list(container.args or [])
        self.probe_port: int = container.liveness_probe.http_get.port
        ports = {p.name: p.container_port for p in container.ports}
        self.probe_port = ports[self.probe_port] if isinstance(self.probe_port, str) else self.probe_port
        self.probe_path: str = container.liveness_probe.http_get.path
        self.metrics_port: int = ports["metrics"]
        env = {k: v for k, v in os.environ.items() if not k.startswith("KPO_")}
        for var in container.env or []:
            if var.value is not None:
                env[var.name] = var.value.replace(mount, str(config_dir))
            elif var.value_from.field_ref.field_path == "metadata.namespace":
                env[var.name] = release.namespace  # what the downward API gives the pod
        env.update({"KUBECONFIG": str(kubeconfig), "PYTHONUNBUFFERED": "1"})
        self.env = env
        argv = [sys.executable, *self.command[1:]] if self.command[0] == "python" else self.command
        self.process = _ArgvOperator(argv, env, workdir / "operator.log")

    def start(self) -> None:
        self.process.start()

    def stop(self) -> None:
        self.process.stop()

    def log_text(self) -> str:
        return self.process.log_text()


class _ArgvOperator(OperatorProcess):
    """:class:`OperatorProcess` with a command line of our choosing (the Deployment's)."""

    def __init__(self, argv: list[str], env: dict[str, str], log_path: Path) -> None:
        super().__init__(env, log_path)
        self.argv = argv

    def start(self) -> None:
        assert self.proc is None or self.proc.poll() is not None, "the operator is already running"
        self.starts += 1
        with self.log_path.open("ab") as log:
            log.write(f"\n===== start #{self.starts}: {' '.join(self.argv)} =====\n".encode())
            log.flush()
            self.proc = subprocess.Popen(self.argv, env=self.env, cwd=REPO_ROOT, stdout=log,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        OperatorProcess.running.add(self)
        time.sleep(1.0)
        assert self.proc.poll() is None, f"the operator exited at once:\n{self.log_tail()}"


def scrape(port: int) -> str:
    import urllib.request  # noqa: PLC0415

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text: str = response.read().decode()
        return text


def http_status(port: int, path: str) -> int:
    import urllib.error  # noqa: PLC0415
    import urllib.request  # noqa: PLC0415

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            status: int = response.status
            return status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0
