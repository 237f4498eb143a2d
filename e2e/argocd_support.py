"""Argo CD's own evaluation of kpo's health check (helm/kpo/files/argocd-health.lua).

``testbed/provision.sh argocd`` builds ``argocd-health`` (testbed/go/argocd-health) on argo-cd's util/lua: the
gopher-lua VM with Argo CD's safe libraries, timeout and result validation that the application controller runs a
``resource.customizations.health.<group>_<Kind>`` script in. It reads one object per line on stdin and answers one
JSON line each, so one process, started on first use, serves the whole test session.
"""

from __future__ import annotations

import atexit
import json
import subprocess
from pathlib import Path
from typing import Any, ClassVar

from kpo_testbed.paths import REPO_ROOT, cache_root, read_versions

HEALTH_SCRIPT = REPO_ROOT / "helm" / "kpo" / "files" / "argocd-health.lua"


def argocd_health_binary() -> Path:
    """Where ``testbed/provision.sh argocd`` puts the binary, for the pinned ARGOCD_VERSION."""
    return cache_root() / f"argocd-{read_versions()['ARGOCD_VERSION']}" / "bin" / "argocd-health"


class ArgoCDHealth:
    """One ``argocd-health --script FILE`` process, asked one object at a time."""

    _shared: ClassVar[ArgoCDHealth | None] = None

    def __init__(self, script: Path = HEALTH_SCRIPT) -> None:
        binary = argocd_health_binary()
        assert binary.is_file(), f"not provisioned: {binary} (make provision-argocd)"
        self.proc = subprocess.Popen([str(binary), "--script", str(script)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    @classmethod
    def shared(cls) -> ArgoCDHealth:
        """The session's process on the shipped script, started on first use (again if it died)."""
        if cls._shared is None or cls._shared.proc.poll() is not None:
            cls._shared = cls()
            atexit.register(cls._shared.close)
        return cls._shared

    def evaluate(self, obj: dict[str, Any]) -> tuple[str, str]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(obj, separators=(",", ":")) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise AssertionError(f"argocd-health exited {self.proc.wait()}: {self.stderr()}")
        answer: dict[str, str] = json.loads(line)
        if "error" in answer:
            raise AssertionError(f"Argo CD's Lua VM failed on the health check: {answer['error']}")
        return answer.get("status", ""), answer.get("message", "")

    def stderr(self) -> str:
        return self.proc.stderr.read() if self.proc.stderr is not None else ""

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def argocd_health(obj: dict[str, Any]) -> tuple[str, str]:
    """(status, message) Argo CD gives ``obj`` with kpo's health check installed for its kind."""
    return ArgoCDHealth.shared().evaluate(obj)
