"""A killed operator's TLS files (kpo.kafka.tls_files): who made a directory, and which ones are left over.

``stale`` is pure (the running check is given); one test reads this process's own /proc entry, and one makes
directories under pytest's tmp_path to see the sweep remove a dead process's and keep a live one's.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kpo.kafka import tls_files


def test_only_directories_of_processes_that_no_longer_run_are_stale() -> None:
    running = {(1, "500")}  # a restarted container's operator: pid 1 again, started at a later tick
    names = ["kpo-kafka-1.500-abc_12", "kpo-kafka-1.42-x9y8z7w6", "kpo-kafka-77.9-q", "kpo-kafka-k3j4h5g6",
             "other-1.2-x", "kpo-kafka-1-500-x"]
    assert tls_files.stale(names, lambda pid, started: (pid, started) in running) == [
        "kpo-kafka-1.42-x9y8z7w6", "kpo-kafka-77.9-q"]  # an older release's names, and others', are left alone


def test_a_process_start_time_is_read_from_proc_and_none_for_a_pid_that_does_not_run() -> None:
    if not Path("/proc/self/stat").exists():
        pytest.skip("no /proc here")
    mine = tls_files.start_time(os.getpid())
    assert mine is not None and mine.isdigit()
    assert tls_files.start_time(os.getpid()) == mine
    assert tls_files.start_time(2**22 + 1) is None  # above Linux's largest pid


def test_the_first_client_removes_what_a_killed_process_left_and_names_its_own(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    if not Path("/proc/self/stat").exists():
        pytest.skip("no /proc here")
    monkeypatch.setattr(tls_files, "_swept", False)
    pid = os.getpid()
    alive = tmp_path / f"kpo-kafka-{pid}.{tls_files.start_time(pid)}-live"
    dead = tmp_path / f"kpo-kafka-{pid}.1-dead"  # this pid, an earlier start: a container restarted
    foreign = tmp_path / "kpo-kafka-oldname"
    for made in (alive, dead, foreign):
        made.mkdir()
        (made / "key.pem").write_text("-----BEGIN PRIVATE KEY-----")
    own = tls_files.private_dir(str(tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([alive.name, foreign.name, Path(own.name).name])
    assert Path(own.name).name.startswith(f"kpo-kafka-{pid}.{tls_files.start_time(pid)}-")
    dead.mkdir()
    tls_files.private_dir(str(tmp_path)).cleanup()  # once per process: later clients do not sweep again
    assert dead.exists()
    own.cleanup()
