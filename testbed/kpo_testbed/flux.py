"""Flux beside the test bed: where ``provision.sh flux`` puts source-controller, kustomize-controller and their CRDs,
and a git server for them on loopback.

The git server is git's own smart-HTTP CGI, ``git http-backend``, behind :class:`http.server.ThreadingHTTPServer`:
source-controller clones from it as from any git host (``http://`` URLs are what a GitRepository accepts; ``git://``
is not). Run it as ``python -m kpo_testbed.flux ROOT PORT``: every bare repository under ROOT is served read-only at
``http://127.0.0.1:PORT/<name>.git``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from kpo_testbed.paths import cache_root, read_versions


@dataclass(frozen=True)
class FluxBinaries:
    source_controller: Path
    kustomize_controller: Path
    #: The CRDs of both controllers (their modules' config/crd/bases), copied beside the binaries.
    crds: Path

    @classmethod
    def from_cache(cls) -> FluxBinaries:
        v = read_versions()
        root = cache_root() / (f"flux-source-{v['FLUX_SOURCE_CONTROLLER_VERSION']}"
                               f"-kustomize-{v['FLUX_KUSTOMIZE_CONTROLLER_VERSION']}")
        return cls(source_controller=root / "bin" / "source-controller",
                   kustomize_controller=root / "bin" / "kustomize-controller", crds=root / "crds")

    def missing(self) -> list[Path]:
        gone = [p for p in (self.source_controller, self.kustomize_controller) if not p.is_file()]
        if not any(self.crds.glob("*.yaml")):
            gone.append(self.crds)
        return gone

    def crd_files(self) -> list[Path]:
        return sorted(self.crds.glob("*.yaml"))


def http_backend() -> Path:
    """git's smart-HTTP CGI program, in git's exec path."""
    exec_path = subprocess.run(["git", "--exec-path"], capture_output=True, text=True, check=True).stdout.strip()
    backend = Path(exec_path) / "git-http-backend"
    if not backend.is_file():
        raise RuntimeError(f"{backend} is missing: install git (Debian: apt-get install git)")
    return backend


class _GitHandler(BaseHTTPRequestHandler):
    """One CGI call of ``git http-backend`` per request: its environment from the request (RFC 3875), the body on its
    stdin, its ``Status:`` and headers turned into the HTTP answer."""

    root: Path
    backend: Path
    protocol_version = "HTTP/1.0"  # the answer ends when the connection closes: no chunking of CGI output

    def do_GET(self) -> None:
        self._cgi()

    def do_POST(self) -> None:
        self._cgi()

    def _cgi(self) -> None:
        path, _, query = self.path.partition("?")
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "GIT_PROJECT_ROOT": str(self.root), "GIT_HTTP_EXPORT_ALL": "1",
            "GATEWAY_INTERFACE": "CGI/1.1", "SERVER_PROTOCOL": "HTTP/1.1", "SERVER_SOFTWARE": "kpo-testbed",
            "REQUEST_METHOD": self.command, "PATH_INFO": path, "QUERY_STRING": query,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""), "CONTENT_LENGTH": str(len(body)),
            "REMOTE_ADDR": self.client_address[0], "REMOTE_USER": "",
        }
        for header in ("Content-Encoding", "Git-Protocol", "Accept"):
            if header in self.headers:
                env["HTTP_" + header.upper().replace("-", "_")] = self.headers[header]
        done = subprocess.run([str(self.backend)], input=body, env=env, capture_output=True, check=False)
        head, _, payload = done.stdout.partition(b"\r\n\r\n")
        if not _:
            head, _, payload = done.stdout.partition(b"\n\n")
        status, headers = 200, []
        for line in head.decode("latin-1").splitlines():
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.split()[0])
            elif name:
                headers.append((name, value.strip()))
        if done.returncode != 0 and not head:
            status, payload = 500, done.stderr
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: object) -> None:
        sys.stderr.write(f"{self.address_string()} {format % args}\n")


def serve(root: Path, port: int) -> None:
    handler = type("GitHandler", (_GitHandler,), {"root": root.resolve(), "backend": http_backend()})
    with ThreadingHTTPServer(("127.0.0.1", port), handler) as server:
        server.serve_forever()


class GitRepository:
    """A bare repository under the server's root, committed to from a work tree beside it (``--git-dir`` and
    ``--work-tree``: no clone, no push)."""

    def __init__(self, root: Path, name: str, branch: str = "main") -> None:
        self.bare = root / f"{name}.git"
        self.work = root / f"{name}.work"
        self.branch = branch
        self.bare.mkdir(parents=True)
        self.work.mkdir(parents=True)
        self._git("init", "--quiet", "--bare", f"--initial-branch={branch}", str(self.bare), bare=False)

    def _git(self, *args: str, bare: bool = True) -> str:
        where = ["--git-dir", str(self.bare), "--work-tree", str(self.work)] if bare else []
        env = {**os.environ, "GIT_AUTHOR_NAME": "kpo e2e", "GIT_AUTHOR_EMAIL": "e2e@kpo.dev",
               "GIT_COMMITTER_NAME": "kpo e2e", "GIT_COMMITTER_EMAIL": "e2e@kpo.dev"}
        done = subprocess.run(["git", *where, *args], capture_output=True, text=True, env=env, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"git {' '.join(args)} failed: {done.stderr.strip()}")
        return done.stdout.strip()

    def commit(self, files: dict[str, str | None], message: str) -> str:
        """Write (text) or remove (None) files of the work tree, commit all of it on the branch; the commit's sha."""
        for name, text in files.items():
            path = self.work / name
            if text is None:
                if path.is_dir():
                    shutil.rmtree(path)
                else:
                    path.unlink(missing_ok=True)
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text)
        self._git("symbolic-ref", "HEAD", f"refs/heads/{self.branch}")
        self._git("add", "--all")
        self._git("commit", "--quiet", "--allow-empty", "-m", message)
        return self._git("rev-parse", "HEAD")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kpo_testbed.flux", description="serve ROOT/*.git over smart HTTP")
    parser.add_argument("root", type=Path)
    parser.add_argument("port", type=int)
    args = parser.parse_args(argv)
    serve(args.root, args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
