"""A real Prometheus (the binary `testbed/provision.sh prometheus` builds) that scrapes the operator under test.

Static scrape config, 1 s scrape and rule evaluation so a test sees series and alerts within seconds, its own data
directory and loopback port; queried over its HTTP API (/api/v1/query, /api/v1/rules, /api/v1/alerts).
"""

from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from e2e.helm_support import free_port
from e2e.kube_support import wait_until
from e2e.operator_support import terminate
from kpo_testbed import procs
from kpo_testbed.prometheus import PrometheusBinaries

JOB = "kpo"


class PrometheusServer:
    def __init__(self, folder: Path, targets: list[str], rule_files: list[Path]) -> None:
        binaries = PrometheusBinaries.from_cache()
        assert not binaries.missing(), f"not provisioned: {binaries.missing()} (make provision-prometheus)"
        self.binary = binaries.prometheus
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.config = folder / "prometheus.yml"
        self.config.write_text(yaml.safe_dump({
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(p) for p in rule_files],
            "scrape_configs": [{"job_name": JOB, "static_configs": [{"targets": targets}]}],
        }))
        self.log_path = folder / "prometheus.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [str(self.binary), f"--config.file={self.config}", f"--storage.tsdb.path={self.folder / 'data'}",
                 f"--web.listen-address=127.0.0.1:{self.port}"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        wait_until(self._ready, 60, f"prometheus ready on {self.url}\n{self.log_tail()}")

    def _ready(self) -> bool:
        assert self.proc is not None and self.proc.poll() is None, f"prometheus exited:\n{self.log_tail()}"
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as answer:
                return bool(answer.status == 200)
        except (urllib.error.URLError, ConnectionError):
            return False

    def api(self, path: str, **params: str) -> Any:
        """``data`` of an /api/v1 answer; an error status fails the test with Prometheus' own message."""
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        with urllib.request.urlopen(f"{self.url}/api/v1/{path}{query}", timeout=10) as answer:
            body = json.load(answer)
        assert body.get("status") == "success", body
        return body["data"]

    def query(self, promql: str) -> list[dict[str, Any]]:
        """An instant vector: ``[{"metric": {...}, "value": [time, "text"]}, ...]``."""
        data = self.api("query", query=promql)
        assert data["resultType"] == "vector", data
        result: list[dict[str, Any]] = data["result"]
        return result

    def stop(self) -> None:
        terminate(self.proc)

    def log_tail(self, lines: int = 30) -> str:
        return procs.tail(self.log_path, lines)
