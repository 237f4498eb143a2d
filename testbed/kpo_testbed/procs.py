"""Start and stop test-bed processes by pid, safely.

A process is identified by its pid *and* its start time from ``/proc``, so a recycled pid is never signalled: the
test bed only ever stops what it started itself.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ProcessRecord:
    name: str
    pid: int
    start_ticks: int

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "pid": self.pid, "start_ticks": self.start_ticks}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> ProcessRecord:
        return cls(name=str(data["name"]), pid=int(str(data["pid"])), start_ticks=int(str(data["start_ticks"])))


def _stat_fields(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may contain spaces; everything after its closing parenthesis is well-formed.
    return raw[raw.rindex(")") + 2 :].split()


def _start_ticks(pid: int) -> int | None:
    fields = _stat_fields(pid)
    return None if fields is None else int(fields[19])


def record_of(pid: int, name: str) -> ProcessRecord:
    """The record of a running process this module did not start (the caller itself, say)."""
    ticks = _start_ticks(pid)
    if ticks is None:
        raise ProcessLookupError(pid)
    return ProcessRecord(name=name, pid=pid, start_ticks=ticks)


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def is_running(record: ProcessRecord) -> bool:
    _reap(record.pid)
    fields = _stat_fields(record.pid)
    if fields is None or fields[0] in ("Z", "X"):
        return False
    return int(fields[19]) == record.start_ticks


def start(name: str, argv: Sequence[str], log_path: Path, env: Mapping[str, str] | None = None,
          cwd: Path | None = None) -> ProcessRecord:
    """Start ``argv`` in its own session (so it outlives the caller), logging to ``log_path``."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            start_new_session=True,
        )
    ticks = _start_ticks(proc.pid)
    if ticks is None:
        raise RuntimeError(f"{name} exited at once; see {log_path}")
    return ProcessRecord(name=name, pid=proc.pid, start_ticks=ticks)


def stop(record: ProcessRecord, timeout: float = 20.0, sig: signal.Signals = signal.SIGTERM) -> None:
    """Signal the process and wait for it to go; SIGKILL after ``timeout``."""
    if not is_running(record):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(record.pid, sig)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not is_running(record):
            return
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.kill(record.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while is_running(record) and time.monotonic() < deadline:
        time.sleep(0.1)


def stop_all(records: Sequence[ProcessRecord], timeout: float = 30.0) -> None:
    """SIGTERM all at once, then wait: Kafka nodes stopped one by one wait for a quorum that is already gone."""
    for record in records:
        if is_running(record):
            with contextlib.suppress(ProcessLookupError):
                os.kill(record.pid, signal.SIGTERM)
    for record in records:
        stop(record, timeout=timeout)


def tail(path: Path, lines: int = 20) -> str:
    """The last ``lines`` lines of a log, or a line saying there is none; reads at most the last 64 KiB."""
    try:
        with path.open("rb") as log:
            log.seek(0, os.SEEK_END)
            log.seek(max(0, log.tell() - 65536))
            text = log.read().decode(errors="replace")
    except OSError as exc:
        return f"(no log: {exc})"
    return "\n".join(text.splitlines()[-lines:])


def free_ports(count: int) -> list[int]:
    """Ports the kernel hands out now; held open together so that the ``count`` ports are distinct."""
    socks: list[socket.socket] = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def wait_until(check: object, timeout: float, what: str, interval: float = 0.5) -> None:
    """Poll ``check()`` until it is truthy; raise TimeoutError naming ``what`` otherwise."""
    assert callable(check)
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except Exception as exc:
            last = exc
        time.sleep(interval)
    detail = f" (last error: {last})" if last else ""
    raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}{detail}")
