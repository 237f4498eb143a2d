"""Where the pinned versions, the provisioned binaries and the cache live.

The versions are read from ``testbed/versions.env`` (shell syntax), the one file that pins them; the cache is the
same folder ``provision.sh`` fills, so Python and the shell agree on every path.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

TESTBED_DIR = Path(__file__).resolve().parent.parent
REPO_ROOT = TESTBED_DIR.parent


def read_versions(path: Path = TESTBED_DIR / "versions.env") -> dict[str, str]:
    versions: dict[str, str] = {}
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, _, value = line.partition("=")
        versions[key.strip()] = value.strip()
    return versions


def cache_root() -> Path:
    if "KPO_CACHE" in os.environ:
        return Path(os.environ["KPO_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kpo"


@dataclass(frozen=True)
class Binaries:
    kafka_libs: Path
    etcd: Path
    kube_apiserver: Path
    kube_controller_manager: Path
    kubectl: Path
    helm: Path

    @classmethod
    def from_cache(cls) -> Binaries:
        v = read_versions()
        root = cache_root()
        k8s = root / f"kubernetes-{v['KUBERNETES_VERSION']}" / "bin"
        return cls(
            kafka_libs=root / f"kafka-{v['KAFKA_VERSION']}" / "libs",
            etcd=root / f"etcd-{v['ETCD_VERSION']}" / "bin" / "etcd",
            kube_apiserver=k8s / "kube-apiserver",
            kube_controller_manager=k8s / "kube-controller-manager",
            kubectl=k8s / "kubectl",
            helm=root / f"helm-{v['HELM_VERSION']}" / "bin" / "helm",
        )

    def missing(self) -> list[Path]:
        paths = [self.etcd, self.kube_apiserver, self.kube_controller_manager, self.kubectl, self.helm]
        gone = [p for p in paths if not p.is_file()]
        if not (self.kafka_libs / "kafka_2.13-{}.jar".format(read_versions()["KAFKA_VERSION"])).is_file():
            gone.append(self.kafka_libs)
        return gone

    def path_dirs(self) -> list[Path]:
        return [self.kubectl.parent, self.helm.parent, self.etcd.parent]
