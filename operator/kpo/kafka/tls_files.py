"""Where kafka-python's TLS material lives while the operator runs, and what a killed operator left behind.

kafka-python reads the CA, the client certificate and its private key from files (the standard library's ``ssl``
cannot load a key from memory), so each cluster's client writes them, 0600, into a private temporary directory that
its ``close()`` removes. A process that is killed (out of memory, SIGKILL, a failed liveness probe) removes nothing,
and the chart's ``/tmp`` is an emptyDir, which outlives the container: every crash left a client key behind for as long
as the pod lived, the keys of a rotated Secret too. So a directory's name says which process made it — its pid and
the pid's start time, since a restarted container's operator is pid 1 again — and the first client a process makes
removes the directories of processes that no longer run. A process tells only pids of its own PID namespace apart:
operators that share one temporary directory across namespaces (not the chart's: each pod has its own emptyDir) need
a ``TMPDIR`` each.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

PREFIX = "kpo-kafka-"
_OWNED = re.compile(rf"^{re.escape(PREFIX)}(\d+)\.(\d+)-")
_swept = False
_sweep_lock = threading.Lock()


def start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (``/proc/<pid>/stat``, field 22); ``None`` when it does
    not run (or there is no ``/proc``)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces or ')': the fields after the last ')' count.
    return stat.rsplit(")", 1)[1].split()[19]


def stale(names: Iterable[str], running: Callable[[int, str], bool]) -> list[str]:
    """The directory names made by a process that no longer runs; names of any other shape are not ours to judge."""
    found = []
    for name in names:
        owner = _OWNED.match(name)
        if owner is not None and not running(int(owner[1]), owner[2]):
            found.append(name)
    return found


def _running(pid: int, started: str) -> bool:
    return start_time(pid) == started


def private_dir(root: str | None = None) -> tempfile.TemporaryDirectory[str]:
    """A 0700 directory for one client's TLS files, named after this process; the first call of a process also
    removes what killed processes left in ``root`` (the system's temporary directory by default)."""
    global _swept  # noqa: PLW0603 (once per process, whichever client comes first)
    base = root or tempfile.gettempdir()
    with _sweep_lock:
        if not _swept:
            _swept = True
            if Path("/proc/self/stat").exists():  # without /proc no owner can be told apart: nothing is removed
                for name in stale(os.listdir(base), _running):
                    shutil.rmtree(os.path.join(base, name), ignore_errors=True)
    pid = os.getpid()
    return tempfile.TemporaryDirectory(prefix=f"{PREFIX}{pid}.{start_time(pid) or 0}-", dir=base)
