"""The concurrency bench: N PartitionReassignments applied at once on the test bed (issue 25), 500 by default.

``make bench-concurrency`` (or ``python -m bench.concurrency.run --resources 500``) runs the scenario of the e2e
concurrency suite (``e2e/concurrency_support.py``: one follower of one ~30 kB partition moved per resource, a 20 KiB/s
throttle, the operator's default limits) at bench size, against the test bed ``make testbed-up`` started (when it is
healthy) or a private one it starts and stops itself. The operator runs as a process of its own with the operator's
defaults, watching only the bench's namespace. Everything is judged from Kafka's view and the Kubernetes API.

It prints one table row (resources, wall time, the schedule floor and the ratio, the most moves seen in flight, per
broker and per direction, the operator's peak RSS, API requests per resource, Kafka requests per pass, Succeeded
Events per resource, throttles left) with the checks that failed, and appends it to ``bench/concurrency/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import sys
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import yaml
from confluent_kafka.admin import AdminClient
from kubernetes import config

from e2e import concurrency_support as cs
from e2e.helm_support import free_port
from e2e.kube_support import install_crds
from e2e.operator_support import OperatorProcess, operator_env, watched_namespace
from kpo_testbed import Testbed
from kpo_testbed.paths import REPO_ROOT

RESULTS = Path(__file__).with_name("RESULTS.md")


@contextlib.contextmanager
def testbed(private: bool) -> Iterator[Testbed]:
    shared = None if private else Testbed.open(REPO_ROOT / ".testbed")
    if shared is not None and shared.healthy():
        print("using the test bed in .testbed/ (make testbed-up)", flush=True)
        yield shared
        return
    with tempfile.TemporaryDirectory(prefix="kpo-bench-concurrency-") as folder:
        print(f"starting a private test bed in {folder}", flush=True)
        bed = Testbed.up(Path(folder))
        try:
            yield bed
        finally:
            bed.down()


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--resources", type=int, default=500)
    parser.add_argument("--messages", type=int, default=cs.Scenario.messages,
                        help="messages of --message-bytes per partition")
    parser.add_argument("--message-bytes", type=int, default=cs.Scenario.message_bytes)
    parser.add_argument("--throttle", type=int, default=cs.Scenario.throttle, help="spec.execution.throttle, B/s")
    parser.add_argument("--poll-interval", type=float, default=cs.Scenario.poll_interval,
                        help="the operator's pollIntervalSeconds (its default: 2)")
    parser.add_argument("--private-testbed", action="store_true", help="never reuse .testbed/")
    parser.add_argument("--results", default=str(RESULTS), help="append the row here ('': nowhere)")
    args = parser.parse_args()
    scenario = replace(cs.Scenario(), resources=args.resources, messages=args.messages,
                       message_bytes=args.message_bytes, throttle=args.throttle, poll_interval=args.poll_interval)
    prefix = f"bench-conc-{uuid.uuid4().hex[:6]}"
    with testbed(args.private_testbed) as bed, tempfile.TemporaryDirectory(prefix="kpo-bench-operator-") as folder:
        api = config.new_client_from_config(config_file=str(bed.state.kube.kubeconfig))
        install_crds(api)
        bootstrap = bed.state.kafka.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap, "logger": cs.QUIET})
        config_path = Path(folder) / "kpo.yaml"
        config_path.write_text(yaml.safe_dump({"pollIntervalSeconds": scenario.poll_interval,
                                               "clusters": {"default": {"bootstrapServers": bootstrap}}}))
        env = operator_env(bed.state.kube.kubeconfig, bootstrap,
                           {"KPO_CONFIG": str(config_path), "KPO_POLL_INTERVAL": str(scenario.poll_interval)})
        operator = OperatorProcess(env, Path(folder) / "operator.log", namespaces=[f"{prefix}-*"],
                                   metrics_port=free_port())
        operator.start()
        try:
            with watched_namespace(api, prefix) as namespace:
                harness = cs.Harness(bootstrap, admin, api, namespace, operator.peak_rss_bytes, operator.metrics_port,
                                     log=lambda line: print(line, flush=True))
                report = cs.run(harness, scenario, prefix)
        finally:
            operator.stop()
            log_tail = operator.log_tail(20)
    failures = report.failures() + report.beyond_bounds()
    table = cs.markdown([report.row()])
    print(f"\n{report.text()}\n\n{table}\n")
    print("checks failed:\n- " + "\n- ".join(failures) if failures else "every check passed")
    if args.results:
        stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
        commit = os.popen("git rev-parse --short HEAD 2>/dev/null").read().strip() or "unknown"
        load = os.getloadavg()
        section = [f"## {stamp}, commit {commit}, {os.cpu_count()} cores ({platform.machine()}), "
                   f"load {load[0]:.1f} at the end", "", table, ""]
        section += ["Checks failed:", *[f"- {f}" for f in failures], ""] if failures else ["Every check passed.", ""]
        if report.notes:
            section += [f"- {note}" for note in report.notes] + [""]
        with Path(args.results).open("a") as out:
            if out.tell() == 0:
                out.write("# Concurrency bench results (`make bench-concurrency`)\n\nOne section per run, newest "
                          "last; the scenario is described in `bench/concurrency/run.py` and "
                          "`e2e/concurrency_support.py`.\n\n")
            out.write("\n".join(section) + "\n")
        print(f"appended to {args.results}")
    if failures:
        print(f"\noperator log (last lines):\n{log_tail}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
