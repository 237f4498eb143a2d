"""Command line for the test bed (used by the Makefile and documented in docs/testing.md).

    python -m kpo_testbed up|down|status [--dir .testbed]
    python -m kpo_testbed kill-node N [--graceful]    stop one Kafka node (SIGKILL unless --graceful)
    python -m kpo_testbed start-node N                start it again and wait until it has registered
    python -m kpo_testbed controller                  print the node id of the active KRaft controller
    python -m kpo_testbed restart-apiserver [--down S] stop kube-apiserver, wait S seconds, start it again
    python -m kpo_testbed reap-after PID TICKS        once that process is gone, stop the bed (started by `up`)
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from kpo_testbed.bed import Testbed, UnhealthyTestbedError
from kpo_testbed.paths import REPO_ROOT
from kpo_testbed.procs import ProcessRecord, is_running


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m kpo_testbed", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", type=Path, default=REPO_ROOT / ".testbed", help="state directory")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("up")
    sub.add_parser("down")
    sub.add_parser("status")
    sub.add_parser("controller")
    kill = sub.add_parser("kill-node")
    kill.add_argument("node", type=int)
    kill.add_argument("--graceful", action="store_true")
    start = sub.add_parser("start-node")
    start.add_argument("node", type=int)
    restart = sub.add_parser("restart-apiserver")
    restart.add_argument("--down", type=float, default=0.0, help="seconds to stay down")
    reap = sub.add_parser("reap-after")
    reap.add_argument("pid", type=int)
    reap.add_argument("ticks", type=int, help="its start time in clock ticks (/proc/PID/stat): a reused pid is not it")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    state_dir: Path = args.dir.resolve()

    if args.command == "up":
        began = time.monotonic()
        try:
            bed = Testbed.up(state_dir)
        except UnhealthyTestbedError as exc:
            print(exc, file=sys.stderr)
            return 1
        print(f"test bed up in {time.monotonic() - began:.1f}s: Kafka {bed.state.kafka.bootstrap_servers}, "
              f"kube-apiserver {bed.state.kube.server}")
        print(f"  . {state_dir / 'env'}")
        return 0
    if args.command == "reap-after":
        _reap_after(state_dir, ProcessRecord(name="owner", pid=args.pid, start_ticks=args.ticks))
        return 0
    bed_or_none = Testbed.open(state_dir)
    if bed_or_none is None:
        if args.command in ("down", "status"):
            print(f"no test bed in {state_dir}")
            return 0 if args.command == "down" else 1
        print(f"no test bed in {state_dir}; run make testbed-up", file=sys.stderr)
        return 1
    bed = bed_or_none
    if args.command == "down":
        bed.down()
        print(f"test bed in {state_dir} stopped")
    elif args.command == "status":
        problems = bed.problems()
        for name, record in sorted(bed.state.processes.items()):
            print(f"{name:26} pid {record.pid:<8} {'running' if is_running(record) else 'DEAD'}")
        print(f"NOT healthy: {'; '.join(problems)}" if problems else "healthy")
        return 1 if problems else 0
    elif args.command == "controller":
        print(bed.active_controller())
    elif args.command == "kill-node":
        bed.kill_node(args.node, graceful=args.graceful)
    elif args.command == "start-node":
        bed.start_node(args.node)
    elif args.command == "restart-apiserver":
        bed.stop_apiserver()
        try:
            time.sleep(args.down)
        finally:
            bed.start_apiserver()
    return 0


def _reap_after(state_dir: Path, owner: ProcessRecord) -> None:
    while is_running(owner):
        time.sleep(2)
    bed = Testbed.open(state_dir)
    if bed is not None:
        print(f"pid {owner.pid} ended without stopping its test bed in {state_dir}: stopping it", flush=True)
        bed.down()


if __name__ == "__main__":
    sys.exit(main())
