"""A real Kubernetes control plane without nodes: etcd, kube-apiserver and kube-controller-manager on loopback.

Started the way envtest starts one, plus the controller manager for garbage collection of owned objects, namespace
deletion and default ServiceAccounts. There is no kubelet, so no pod ever runs; an operator only needs the API.
Authentication is a static token file (the admin user is in ``system:masters``) and service-account tokens from the
TokenRequest API; authorization is RBAC, so least-privilege tests mean something.
"""

from __future__ import annotations

import json
import secrets
import shutil
import ssl
import subprocess
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kpo_testbed import procs
from kpo_testbed.node import NODE_IP

SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"
SERVICE_CIDR = "10.0.0.0/24"
# The first address of the range: the API server gives it to the "kubernetes" Service, whose address every pod is
# told in KUBERNETES_SERVICE_HOST.
KUBERNETES_SERVICE_IP = "10.0.0.1"


@dataclass
class KubeControlPlane:
    root: Path
    etcd_bin: Path
    apiserver_bin: Path
    controller_manager_bin: Path
    etcd_client_port: int
    etcd_peer_port: int
    apiserver_port: int
    controller_manager_port: int
    admin_token: str

    @classmethod
    def on_free_ports(cls, root: Path, etcd_bin: Path, apiserver_bin: Path, controller_manager_bin: Path
                      ) -> KubeControlPlane:
        ports = procs.free_ports(4)
        return cls(root=root, etcd_bin=etcd_bin, apiserver_bin=apiserver_bin,
                   controller_manager_bin=controller_manager_bin, etcd_client_port=ports[0], etcd_peer_port=ports[1],
                   apiserver_port=ports[2], controller_manager_port=ports[3], admin_token=secrets.token_hex(16))

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.apiserver_port}"

    @property
    def pki(self) -> Path:
        return self.root / "pki"

    @property
    def kubeconfig(self) -> Path:
        return self.root / "admin.kubeconfig"

    def _openssl(self, *args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=self.pki)

    def write_config(self) -> None:
        if shutil.which("openssl") is None:
            raise RuntimeError("openssl is not installed (Debian: apt-get install openssl)")
        self.pki.mkdir(parents=True, exist_ok=True)
        self._openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
                      "-days", "3650", "-subj", "/CN=kpo-testbed-ca")
        self._openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "apiserver.key", "-out", "apiserver.csr",
                      "-subj", "/CN=kube-apiserver")
        # Also the "kubernetes" Service's ClusterIP and the node's address: pods on the node reach the API server
        # there, forwarded to loopback (node.sh).
        (self.pki / "san.ext").write_text(
            f"subjectAltName=IP:127.0.0.1,IP:{KUBERNETES_SERVICE_IP},IP:{NODE_IP},DNS:localhost,DNS:kubernetes,"
            "DNS:kubernetes.default.svc\n")
        self._openssl("x509", "-req", "-in", "apiserver.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                      "-out", "apiserver.crt", "-days", "3650", "-extfile", "san.ext")
        # The API server's client certificate towards kubelets (kubectl logs, exec): the kubelet checks it against
        # the same CA and asks the API server whether system:masters may (it may).
        self._openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "kubelet-client.key",
                      "-out", "kubelet-client.csr", "-subj", "/O=system:masters/CN=kube-apiserver-kubelet-client")
        self._openssl("x509", "-req", "-in", "kubelet-client.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                      "-CAcreateserial", "-out", "kubelet-client.crt", "-days", "3650")
        self._openssl("genrsa", "-out", "sa.key", "2048")
        self._openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub")
        (self.pki / "tokens.csv").write_text(f'{self.admin_token},kpo-admin,kpo-admin,"system:masters"\n')
        self.kubeconfig.write_text(self.kubeconfig_text(self.admin_token, "kpo-admin"))

    def kubeconfig_text(self, token: str, user: str, namespace: str = "default") -> str:
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "kpo-testbed",
                          "cluster": {"server": self.server, "certificate-authority": str(self.pki / "ca.crt")}}],
            "users": [{"name": user, "user": {"token": token}}],
            "contexts": [{"name": user, "context": {"cluster": "kpo-testbed", "user": user, "namespace": namespace}}],
            "current-context": user,
        }
        return json.dumps(config, indent=2) + "\n"

    def start_etcd(self) -> procs.ProcessRecord:
        peer = f"http://127.0.0.1:{self.etcd_peer_port}"
        client = f"http://127.0.0.1:{self.etcd_client_port}"
        argv = [str(self.etcd_bin), "--name", "kpo", "--data-dir", str(self.root / "etcd"),
                "--listen-client-urls", client, "--advertise-client-urls", client,
                "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                "--initial-cluster", f"kpo={peer}", "--unsafe-no-fsync", "--log-level", "warn",
                "--quota-backend-bytes", str(2 * 1024**3)]
        return procs.start("etcd", argv, self.root / "etcd.log")

    def start_apiserver(self) -> procs.ProcessRecord:
        pki = self.pki
        argv = [str(self.apiserver_bin),
                f"--etcd-servers=http://127.0.0.1:{self.etcd_client_port}",
                "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={self.apiserver_port}",
                f"--tls-cert-file={pki / 'apiserver.crt'}", f"--tls-private-key-file={pki / 'apiserver.key'}",
                f"--client-ca-file={pki / 'ca.crt'}",
                f"--kubelet-client-certificate={pki / 'kubelet-client.crt'}",
                f"--kubelet-client-key={pki / 'kubelet-client.key'}",
                # The node's name does not resolve here; its InternalIP is the pod bridge's gateway on this host.
                "--kubelet-preferred-address-types=InternalIP",
                f"--token-auth-file={pki / 'tokens.csv'}",
                "--authorization-mode=RBAC",
                f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
                f"--service-account-key-file={pki / 'sa.pub'}",
                f"--service-account-signing-key-file={pki / 'sa.key'}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--allow-privileged=true",
                # The loopback address cannot back the "kubernetes" Service endpoints; nothing here needs them.
                "--endpoint-reconciler-type=none",
                "--enable-priority-and-fairness=false",
                "--profiling=false",
                f"--cert-dir={self.root / 'apiserver-certs'}"]
        return procs.start("kube-apiserver", argv, self.root / "kube-apiserver.log")

    def start_controller_manager(self) -> procs.ProcessRecord:
        kc = str(self.kubeconfig)
        argv = [str(self.controller_manager_bin), f"--kubeconfig={kc}",
                f"--authentication-kubeconfig={kc}", f"--authorization-kubeconfig={kc}",
                "--controllers=garbagecollector,namespace,serviceaccount",
                "--leader-elect=false", "--bind-address=127.0.0.1", f"--secure-port={self.controller_manager_port}",
                f"--cert-dir={self.root / 'kcm-certs'}", "--concurrent-gc-syncs=5", "--profiling=false"]
        return procs.start("kube-controller-manager", argv, self.root / "kube-controller-manager.log")

    def _get(self, url: str, context: ssl.SSLContext, token: str | None = None) -> tuple[int, str]:
        req = urllib.request.Request(url)
        if token:
            req.add_header("Authorization", f"Bearer {token}")
        with urllib.request.urlopen(req, context=context, timeout=3) as resp:
            return resp.status, resp.read().decode()

    def etcd_healthy(self) -> bool:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.etcd_client_port}/health", timeout=3) as resp:
            return bool(json.loads(resp.read()).get("health") == "true")

    def apiserver_ready(self) -> bool:
        ctx = ssl.create_default_context(cafile=str(self.pki / "ca.crt"))
        status, body = self._get(f"{self.server}/readyz", ctx, self.admin_token)
        return status == 200 and body.strip() == "ok"

    def controller_manager_healthy(self) -> bool:
        # The controller manager serves a self-signed certificate of its own; only liveness is checked here.
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        status, body = self._get(f"https://127.0.0.1:{self.controller_manager_port}/healthz", ctx)
        return status == 200 and body.strip() == "ok"

    def to_json(self) -> dict[str, object]:
        return {k: str(v) if isinstance(v, Path) else v for k, v in self.__dict__.items()}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> KubeControlPlane:
        paths = {"root", "etcd_bin", "apiserver_bin", "controller_manager_bin"}
        ints = {"etcd_client_port", "etcd_peer_port", "apiserver_port", "controller_manager_port"}
        kwargs: dict[str, object] = {}
        for key, value in data.items():
            kwargs[key] = Path(str(value)) if key in paths else int(str(value)) if key in ints else str(value)
        return cls(**kwargs)  # type: ignore[arg-type]
