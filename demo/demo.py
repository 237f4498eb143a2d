"""``make demo``: kpo's main job on the local test bed, with live progress.

Installs the CRDs, starts the operator in the background (its log: .testbed/operator.log), creates a topic with
data, applies a PartitionReassignment and prints its progress from the resource's status until it succeeds — exactly
what ``kubectl get kpr -w`` shows, in more detail. The test bed and the operator keep running afterwards so you can
try more; ``make testbed-down`` stops both.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kubernetes import client, config

from kpo_testbed import Testbed
from kpo_testbed.paths import REPO_ROOT

TOPIC = "demo-orders"
PARTITIONS = 12
BYTES_PER_PARTITION = 3_000_000
STATE = REPO_ROOT / ".testbed"
PID_FILE = STATE / "operator.pid"
LOG_FILE = STATE / "operator.log"


def say(text: str) -> None:
    print(f"\033[1m==> {text}\033[0m", flush=True)


def kubectl(bed: Testbed, *args: str) -> str:
    return subprocess.run(["kubectl", *args], env=bed.env(), check=True, capture_output=True, text=True).stdout


def operator_running() -> bool:
    if not PID_FILE.exists():
        return False
    pid = int(PID_FILE.read_text())
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return False
    return "-m kpo" in cmdline


def start_operator(bed: Testbed) -> None:
    if operator_running():
        say(f"the operator is already running (pid {PID_FILE.read_text().strip()})")
        return
    env = {**bed.env(), "KPO_POLL_INTERVAL": "1", "PYTHONUNBUFFERED": "1"}
    with LOG_FILE.open("ab") as log:
        proc = subprocess.Popen([sys.executable, "-m", "kpo", "--liveness", "", "--metrics-port", "0"], env=env,
                                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, cwd=REPO_ROOT)
    PID_FILE.write_text(str(proc.pid))
    time.sleep(2)
    if proc.poll() is not None:
        sys.exit(f"the operator exited at once; see {LOG_FILE}")
    say(f"operator started (pid {proc.pid}, log {LOG_FILE.relative_to(REPO_ROOT)})")


def stop_operator() -> None:
    if operator_running():
        os.kill(int(PID_FILE.read_text()), signal.SIGTERM)
        print(f"stopped the demo operator (pid {PID_FILE.read_text().strip()})")
    PID_FILE.unlink(missing_ok=True)


def make_topic(admin: AdminClient, bootstrap: str) -> dict[int, list[int]]:
    placement = {p: [1 + p % 3, 1 + (p + 1) % 3] for p in range(PARTITIONS)}
    if TOPIC not in admin.list_topics(timeout=10).topics:
        topic = NewTopic(TOPIC, num_partitions=PARTITIONS, replica_assignment=[placement[p] for p in placement])
        admin.create_topics([topic])[TOPIC].result(timeout=30)
        time.sleep(1)
        say(f"topic {TOPIC}: {PARTITIONS} partitions, replication factor 2; writing "
            f"{PARTITIONS * BYTES_PER_PARTITION // 1_000_000} MB of keyed messages")
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "acks": "all"})
        payload = b"o" * 10_000
        for p in range(PARTITIONS):
            for i in range(BYTES_PER_PARTITION // len(payload)):
                producer.produce(TOPIC, key=f"order-{p}-{i}".encode(), value=payload, partition=p)
                producer.poll(0)
        producer.flush(120)
    metadata = admin.list_topics(TOPIC, timeout=10).topics[TOPIC]
    return {p: list(m.replicas) for p, m in sorted(metadata.partitions.items())}


def watch(custom: client.CustomObjectsApi, name: str, timeout: float = 600) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        obj = custom.get_namespaced_custom_object("kpo.dev", "v1alpha1", "default", "partitionreassignments", name)
        status = obj.get("status") or {}
        progress = status.get("progress") or {}
        moving = ", ".join(f"{m['partition']}->{m['replicas']}" for m in status.get("inFlight") or [])
        eta = progress.get("etaSeconds")
        line = (f"{status.get('phase', 'Pending'):10} {progress.get('summary', '-'):>6} partitions  "
                f"{progress.get('percent', 0):3}%  {progress.get('bytesMoved', 0) / 1e6:6.1f}/"
                f"{progress.get('bytesToMove', 0) / 1e6:.1f} MB  ETA {'-' if eta is None else f'{eta}s':>5}  "
                f"moving: {moving or '-'}")
        if line != last:
            print(time.strftime("%H:%M:%S"), line, flush=True)
            last = line
        if status.get("phase") in ("Succeeded", "Failed", "Invalid", "Stopped", "Reverted"):
            return status
        time.sleep(1)
    sys.exit("the reassignment did not finish in time; see .testbed/operator.log")


def main() -> int:
    if "--stop-operator" in sys.argv:
        stop_operator()
        return 0
    bed = Testbed.open(STATE)
    if bed is None or not bed.healthy():
        sys.exit("no healthy test bed in .testbed; run make testbed-up (make demo does it for you)")
    say("installing kpo's CRDs: kubectl apply --server-side -f crds/")
    print(kubectl(bed, "apply", "--server-side", "--force-conflicts", "-f", str(REPO_ROOT / "crds")), end="")
    start_operator(bed)

    bootstrap = bed.state.kafka.bootstrap_servers
    before = make_topic(AdminClient({"bootstrap.servers": bootstrap}), bootstrap)
    spec = yaml.safe_load((REPO_ROOT / "demo" / "reassignment.yaml").read_text())
    # Each partition trades the replica it has on one broker for the broker it is not on: one new copy each.
    spec["spec"]["partitions"] = [
        {"topic": TOPIC, "partition": p, "replicas": [r[1], ({1, 2, 3} - set(r)).pop()]} for p, r in before.items()]
    config.load_kube_config(str(bed.state.kube.kubeconfig))
    custom = client.CustomObjectsApi()
    name = spec["metadata"]["name"]
    try:
        custom.delete_namespaced_custom_object("kpo.dev", "v1alpha1", "default", "partitionreassignments", name)
        time.sleep(3)
    except client.exceptions.ApiException:
        pass
    say(f"applying PartitionReassignment {name}: {len(spec['spec']['partitions'])} partitions, "
        f"maxMovesPerBroker 2, throttle 4 MB/s, leaders elected at the end")
    custom.create_namespaced_custom_object("kpo.dev", "v1alpha1", "default", "partitionreassignments", spec)
    status = watch(custom, name)

    ready = next((c["message"] for c in status.get("conditions", []) if c["type"] == "Ready"), "")
    say(f"{name}: {status['phase']}: {ready}")
    after = AdminClient({"bootstrap.servers": bootstrap}).list_topics(TOPIC, timeout=10).topics[TOPIC]
    for p, m in sorted(after.partitions.items()):
        print(f"  {TOPIC}-{p:<3} replicas {before[p]} -> {list(m.replicas)}   leader {m.leader}")
    print(f"  leader election: {json.dumps(status.get('leaderElection'))}; throttles left: "
          f"{status.get('throttle') or 'none'}")
    say("events")
    print(kubectl(bed, "get", "events", "-n", "default", "--field-selector", f"involvedObject.name={name}",
                  "--sort-by=.lastTimestamp"), end="")
    say("what to try next")
    print(f"""  . .testbed/env                         # kubectl, helm and the test bed's addresses in this shell
  kubectl get kpo -A                     # every kpo resource, with phase and progress
  kubectl get kpr {name} -o yaml  # the full status: progress, throttle, leader election
  kubectl apply -f examples/reassignment-stop.yaml   # more examples in examples/ (edit the topic names first)
  kubectl get cm {name}-rollback -o jsonpath='{{.data.rollback\\.json}}'   # the original placement
  make test                              # every test, on a private test bed
  make testbed-down                      # stop the operator and the test bed""")
    return 0 if status["phase"] == "Succeeded" else 1


if __name__ == "__main__":
    sys.exit(main())
