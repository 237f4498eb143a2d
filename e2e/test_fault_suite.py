"""The fault suite (issue 12, "Must show"): every fault a Kafka platform has on a bad day, under a live producer.

Each scenario moves a topic that an idempotent acks=all producer writes to throughout, breaks something mid-flight
(the operator, a destination broker, the active KRaft controller, the kube-apiserver, a broker during a revert),
restores it, and then checks what an operator on call would:

- the resource ends in the right phase;
- not one acknowledged message is lost (the log is read to its high watermark, as the happy-path test does);
- no move is left in Kafka (ListPartitionReassignments is empty) and no replication throttle is left on any broker
  or on the topic;
- the status never claimed more than Kafka showed: a sampler reads the status, then Kafka, every half second, and a
  partition the status counts as completed must already have its target replicas in Kafka;
- the operator's peak RSS (VmHWM of every operator process the suite sees) stays under 400 MB.

The results table (scenario | phase | acked | lost | moves/throttles left | peak RSS | duration) is printed at the end
of the module and written to ``fault-suite.md`` in pytest's base temp dir; docs/testing.md quotes it. A scenario records
its row before it asserts, so the table is complete even when one fails.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient
from kafka.admin import KafkaAdminClient

from e2e.kafka_support import broker_rate, create_topic, replicas_of, topic_list, wait_for, wait_for_new_controller
from e2e.kube_support import Resources
from e2e.operator_support import OperatorProcess
from e2e.reassignment_support import KeyedProducer, fill, listed_moves, read_log, spec_partitions
from kpo_testbed import Testbed

KPR = "PartitionReassignment"
BROKERS = (1, 2, 3)
RSS_LIMIT_MB = 400
# ~0.6 MB per partition under a 100 kB/s throttle: moves last long enough to break something mid-flight.
FILL_MESSAGES = 60
SIGKILL_FILL_MESSAGES = 400
THROTTLE = 100_000
THROTTLE_KEYS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
TOPIC_THROTTLE_KEYS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")

pytestmark = pytest.mark.usefixtures("kpo_operator")


@dataclass
class Row:
    scenario: str
    phase: str
    acked: int
    lost: int
    duplicated: int
    left: str
    peak_rss_mb: float
    seconds: float
    #: Acknowledged messages the first read to the high watermark missed and a second read found.
    late: int = 0


class PeakRss:
    """The operator's peak resident set (VmHWM) over every process the suite sees: restarts start a new one."""

    def __init__(self, operator: OperatorProcess) -> None:
        self.operator = operator
        self.peak_kb = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def sample(self) -> None:
        proc = self.operator.proc
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(OSError, ValueError):
            for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    self.peak_kb = max(self.peak_kb, int(line.split()[1]))

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            self.sample()

    @property
    def peak_mb(self) -> float:
        self.sample()
        return self.peak_kb / 1024

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


@dataclass
class Suite:
    rss: PeakRss
    rows: list[Row] = field(default_factory=list)

    def table(self) -> str:
        lines = ["| scenario | phase | acked | lost | moves/throttles left | peak RSS | duration |",
                 "|---|---|---|---|---|---|---|"]
        for r in self.rows:
            lost = f"{r.lost}" + (f" ({r.duplicated} duplicated)" if r.duplicated else "") + (
                f" ({r.late} found only by a second read)" if r.late else "")
            lines.append(f"| {r.scenario} | {r.phase} | {r.acked} | {lost} | {r.left} | {r.peak_rss_mb:.0f} MB "
                         f"| {r.seconds:.0f} s |")
        return "\n".join(lines)


@pytest.fixture(scope="module")
def suite(kpo_operator: OperatorProcess, request: pytest.FixtureRequest,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[Suite]:
    rss = PeakRss(kpo_operator)
    rss.start()
    found = Suite(rss)
    yield found
    rss.stop()
    table = found.table() + f"\n\nOperator peak RSS over the suite: {rss.peak_mb:.0f} MB (limit {RSS_LIMIT_MB} MB)\n"
    (tmp_path_factory.getbasetemp() / "fault-suite.md").write_text(table)
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    with capture.global_and_fixture_disabled() if capture is not None else contextlib.nullcontext():
        print("\nfault suite:\n" + table)


class Honesty:
    """Samples the resource's status and then Kafka, every half second, and notes every claim Kafka did not bear out.

    The status is read first: a partition it counts as completed must, a moment later, be on its target replicas in
    Kafka with no move in flight. A move never goes back by itself while Executing, but once the spec asks to stop, a
    revert may take it back between the two reads, before the status shows the revert: that check ends there.
    Reverted must mean every partition not listed in ``skipped`` is on its original replicas, and Succeeded that
    every one is on its target.
    Reads that fail (the API server or a broker being down is the point of the suite) are skipped.
    """

    def __init__(self, resources: Resources, name: str, admin: AdminClient, testbed: Testbed, topic: str,
                 originals: dict[int, list[int]], targets: dict[int, list[int]]) -> None:
        self.resources, self.name, self.admin, self.topic = resources, name, admin, topic
        self.testbed = testbed
        self.originals, self.targets = originals, targets
        self.violations: list[str] = []
        self.samples = 0
        self.phases: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._kafka: KafkaAdminClient | None = None

    def _moving(self) -> set[int]:
        if self._kafka is None:
            self._kafka = KafkaAdminClient(bootstrap_servers=live_bootstrap(self.testbed), request_timeout_ms=5000)
        try:
            raw = self._kafka.list_partition_reassignments()
        except Exception:
            self._kafka.close()
            self._kafka = None
            raise
        return {tp.partition for tp in raw if tp.topic == self.topic}

    def check_once(self) -> None:
        try:
            body = self.resources.get(KPR, self.name)
            status = body.get("status") or {}
            replicas = replicas_of(self.admin, self.topic)
            moving = self._moving()
        except Exception:  # a read during the fault: nothing to compare
            return
        self.samples += 1
        phase = str(status.get("phase") or "")
        if not self.phases or self.phases[-1] != phase:
            self.phases.append(phase)
        done = {p for p, t in self.targets.items() if sorted(replicas.get(p, [])) == sorted(t) and p not in moving}
        completed = int((status.get("progress") or {}).get("completed") or 0)
        stop_asked = bool((body.get("spec") or {}).get("stop"))
        if phase in ("Executing", "Succeeded") and completed > len(done) and not stop_asked:
            self.violations.append(f"{phase}: status counts {completed} completed, Kafka shows {len(done)} "
                                   f"({replicas}, moving {sorted(moving)})")
        if phase == "Succeeded" and len(done) < len(self.targets):
            self.violations.append(f"Succeeded while Kafka shows {replicas}, moving {sorted(moving)}")
        if phase == "Reverted":
            skipped = {int(s["partition"]) for s in status.get("skipped") or []}
            wrong = {p: replicas.get(p) for p, o in self.originals.items()
                     if p not in skipped and (sorted(replicas.get(p, [])) != sorted(o) or p in moving)}
            if wrong:
                self.violations.append(f"Reverted while partitions {wrong} are not on their original replicas")

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            self.check_once()

    def __enter__(self) -> Honesty:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(30)
        if self._kafka is not None:
            self._kafka.close()


def live_bootstrap(testbed: Testbed) -> str:
    """The client addresses of the Kafka nodes running now: kafka-python gives up on a dead bootstrap address."""
    running = [n.bootstrap for n in testbed.state.kafka.nodes if f"kafka-{n.node_id}" in testbed.state.processes]
    return ",".join(running)


def _all_moves(testbed: Testbed) -> dict[Any, Any]:
    """Every move Kafka lists, asked of the nodes running now (:func:`listed_moves`)."""
    return listed_moves(live_bootstrap(testbed))


def _throttles_left(admin: AdminClient, topic: str, settle: float = 30) -> list[str]:
    """The throttles Kafka still shows, once they are gone or ``settle`` seconds have passed. A broker that was down
    keeps its throttle until the operator's first tick that reaches it again: the operator and the test's own client
    both reconnect to a restarted broker after a backoff, and a CI run that read the broker's rates the moment the
    test bed saw it registered again found them still set."""
    def read() -> list[list[str]]:
        left = [f"broker {b} {key}={value}" for b in BROKERS for key in THROTTLE_KEYS
                if (value := broker_rate(admin, b, key)) is not None]
        left += [f"topic {key}={sorted(entries)}" for key in TOPIC_THROTTLE_KEYS
                 if (entries := topic_list(admin, topic, key))]
        return [left]

    deadline = time.monotonic() + settle
    # A broker just restarted may not answer DescribeConfigs at once.
    left = wait_for(read, 60, "the brokers' and the topic's throttle configs")[0]
    while left and time.monotonic() < deadline:
        time.sleep(1)
        left = wait_for(read, 60, "the brokers' and the topic's throttle configs")[0]
    return left


@dataclass
class Scenario:
    """One fault scenario's set-up and the figures it ends with."""

    suite: Suite
    name: str
    resources: Resources
    admin: AdminClient
    topic: str
    originals: dict[int, list[int]]
    targets: dict[int, list[int]]
    problems: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)

    def spec(self, throttle: int = THROTTLE, **extra: Any) -> dict[str, Any]:
        # Every move at once (the default allows two copies into one broker at a time): the fault hits them all.
        execution = {"throttle": throttle, "maxMovesPerBrokerDirection": len(self.targets)}
        return {"partitions": spec_partitions(self.topic, self.targets), "execution": execution, **extra}

    def status(self) -> dict[str, Any]:
        return self.resources.status(KPR, "faulted")

    def in_flight(self) -> bool:
        return bool(self.status().get("inFlight"))


@contextlib.contextmanager
def scenario(suite: Suite, name: str, resources: Resources, admin: AdminClient, testbed: Testbed, topic: str,
             originals: dict[int, list[int]], targets: dict[int, list[int]], *, expected_phase: str,
             fill_messages: int = FILL_MESSAGES) -> Iterator[Scenario]:
    """Topic filled, producer writing, status sampled; the body creates the resource named "faulted", breaks and
    restores something. Then: the phase, the log, what is left in Kafka; the row is recorded, then asserted."""
    bootstrap_servers = testbed.state.kafka.bootstrap_servers
    create_topic(admin, topic, len(originals), assignment=[originals[p] for p in sorted(originals)])
    fill(bootstrap_servers, topic, sorted(originals), messages=fill_messages)
    run = Scenario(suite, name, resources, admin, topic, originals, targets)
    producer = KeyedProducer(bootstrap_servers, topic)
    producer.start()
    phase = "?"
    with Honesty(resources, "faulted", admin, testbed, topic, originals, targets) as honesty:
        try:
            yield run
            status = resources.wait_phase(KPR, "faulted", {expected_phase, "Failed", "Invalid"}, timeout=180)
            phase = status["phase"]
            if phase != expected_phase:
                run.problems.append(f"ended {phase}, not {expected_phase}: {status.get('conditions')}")
            honesty.check_once()
        finally:
            time.sleep(1)  # a last second of writes after the end
            acked = producer.stop()
    expected = dict(targets if expected_phase == "Succeeded" else originals)
    if replicas_of(admin, topic) != expected:
        run.problems.append(f"Kafka placement {replicas_of(admin, topic)}, expected {expected}")
    written = [v for v in read_log(bootstrap_servers, topic, len(originals)) if v.isdigit()]
    if missing := set(acked) - set(written):
        # Read once more before calling anything lost: a message found the second time was in the log all along, and
        # where the missing ones were acknowledged (partition, offset) says which partition and which end lost them.
        time.sleep(5)
        written = [v for v in read_log(bootstrap_servers, topic, len(originals)) if v.isdigit()]
        if still := set(acked) - set(written):
            where = sorted(producer.placed[v] for v in still)
            run.problems.append(f"{len(still)} acknowledged message(s) not in the log, acknowledged at "
                                f"(partition, offset) {where[:5]}..{where[-5:]}")
    lost = len(set(acked) - set(written))
    duplicated = len(written) - len(set(written))
    moves_left = wait_for_quiet(testbed)
    throttles = _throttles_left(admin, topic)
    left = "none" if not moves_left and not throttles else f"{len(moves_left)} move(s), {len(throttles)} throttle(s)"
    suite.rows.append(Row(name, phase, len(acked), lost, duplicated, left, suite.rss.peak_mb,
                          time.monotonic() - run.started, late=len(missing) - lost if missing else 0))
    assert lost == 0, f"{lost} acknowledged message(s) lost: {run.problems}"
    assert duplicated == 0, f"{duplicated} message(s) in the log twice"
    assert len(acked) > 1000, "the producer did not write throughout"
    assert not moves_left, f"moves left in Kafka: {moves_left}"
    assert not throttles, f"throttles left: {throttles}"
    assert honesty.samples >= 5, "the status was hardly ever sampled"
    assert not honesty.violations, honesty.violations[:5]
    assert suite.rss.peak_mb < RSS_LIMIT_MB, f"operator peak RSS {suite.rss.peak_mb:.0f} MB"
    assert not run.problems, run.problems


def wait_for_quiet(testbed: Testbed, timeout: float = 20) -> dict[Any, Any]:
    """Moves still listed after ``timeout`` (a finishing move may need a moment to leave the list)."""
    deadline = time.monotonic() + timeout
    moves = _all_moves(testbed)
    while moves and time.monotonic() < deadline:
        time.sleep(1)
        moves = _all_moves(testbed)
    return moves


def _rotation(partitions: int) -> tuple[dict[int, list[int]], dict[int, list[int]]]:
    """Two replicas per partition spread over brokers 1-3, and targets one broker along (every broker gains and
    loses replicas)."""
    originals = {p: [BROKERS[p % 3], BROKERS[(p + 1) % 3]] for p in range(partitions)}
    targets = {p: [BROKERS[(p + 1) % 3], BROKERS[(p + 2) % 3]] for p in range(partitions)}
    return originals, targets


def _onto(broker: int, partitions: int) -> tuple[dict[int, list[int]], dict[int, list[int]]]:
    """Partitions on the two other brokers, each moving one replica onto ``broker``."""
    a, b = (x for x in BROKERS if x != broker)
    originals = {p: [a, b] if p % 2 == 0 else [b, a] for p in range(partitions)}
    targets = {p: [o[0], broker] for p, o in originals.items()}
    return originals, targets


def test_operator_sigkill_three_times_mid_flight(suite: Suite, testbed: Testbed, kpo_operator: OperatorProcess,
                                                 kafka_admin: AdminClient, topic_name: str,
                                                 resources: Resources) -> None:
    originals, targets = _rotation(6)
    with scenario(suite, "operator SIGKILL x3 mid-flight", resources, kafka_admin, testbed, topic_name,
                  originals, targets, expected_phase="Succeeded", fill_messages=SIGKILL_FILL_MESSAGES) as run:
        # Each broker takes in two partitions of ~4 MB under a 20 kB/s throttle. Kafka enforces a throttle between
        # fetches of up to replica.fetch.max.bytes (1 MiB) per partition, once per quota window (~11 s): ~1.2 MB
        # moved in 18 s here, so the size, not the rate, keeps all three kills mid-flight (about a minute).
        resources.create(KPR, "faulted", run.spec(throttle=20_000))
        try:
            # Kopf posts Events from a queue: a SIGKILL right after the transition would lose it, and the point here
            # is that the restarts never enter the life cycle again, so the first kill waits for it to be posted.
            wait_for(lambda: any("Pending -> Executing" in e.message for e in resources.events("faulted")), 60,
                     "the Pending -> Executing Event")
            for kill in range(3):
                wait_for(run.in_flight, 60, f"moves in flight before kill {kill + 1}")
                kpo_operator.kill()
                time.sleep(1)
                kpo_operator.start()
                time.sleep(2)  # the restarted operator's first ticks
            # The kills are over: the throttle that kept the moves in flight through them is lifted so that they end
            # soon. Under it, a CI run (2026-11-28) saw the last two moves, both into broker 2, copy their 4 MB and
            # then grow by no byte for over two minutes while the producer wrote, past the scenario's 180 s (not seen
            # alone: 87 s; cause not found). The restarts are this test's subject, not Kafka's 20 kB/s quota.
            resources.patch_spec(KPR, "faulted", {"execution": {"throttle": 50_000_000}})
        finally:
            if kpo_operator.proc is None or kpo_operator.proc.poll() is not None:
                kpo_operator.start()
    transitions = [e.message for e in resources.events("faulted") if "->" in e.message]
    assert sum("Pending -> Executing" in m for m in transitions) == 1, transitions


def test_destination_broker_sigkill(suite: Suite, testbed: Testbed, kafka_admin: AdminClient,
                                    topic_name: str, resources: Resources) -> None:
    broker = 3
    originals, targets = _onto(broker, 4)
    # ~2 MB a partition, as in the revert test: Kafka lets the first megabyte of a throttled copy through at once, and
    # with ~0.6 MB (60 messages) a CI run (2026-11-29) saw every copy end between "in flight" and the kill.
    with scenario(suite, f"destination broker {broker} SIGKILL", resources, kafka_admin, testbed,
                  topic_name, originals, targets, expected_phase="Succeeded", fill_messages=200) as run:
        resources.create(KPR, "faulted", run.spec())
        try:
            wait_for(run.in_flight, 60, "moves onto the broker in flight")
            testbed.kill_node(broker)
            if not _all_moves(testbed):
                run.problems.append(f"Kafka lists no move right after broker {broker} was killed: the copies ended "
                                    "before the kill, so this run tests nothing (the test's race, not kpo's)")
            # Kafka cannot finish a move onto a dead broker: kpo must say so, not go quiet or give up. Measured at
            # 12-30 s: until the broker is fenced (6 s) and librdkafka has dropped it, a tick may wait out a request
            # timeout (10 s) on it; the broker-loss tests give the same minute.
            reported = _wait_quietly(lambda: _broker_unavailable(resources, broker), 60)
            status = run.status()
            if status.get("phase") != "Executing":
                run.problems.append(f"phase {status.get('phase')} while broker {broker} is down")
            if not reported:
                run.problems.append(f"no BrokerUnavailable condition or Event naming broker {broker} within 60 s: "
                                    f"{status.get('conditions')}")
        finally:
            _restart(testbed, broker)
        # The broker is back: the throttle that kept the copies in flight through the kill is lifted so that they end
        # soon (~1 MB each left at 100 kB/s took another 40 s in CI); the kill is this test's subject, not the quota.
        resources.patch_spec(KPR, "faulted", {"execution": {"throttle": 50_000_000}})


def test_active_controller_sigkill(suite: Suite, testbed: Testbed, kafka_admin: AdminClient,
                                   topic_name: str, resources: Resources) -> None:
    originals, targets = _rotation(6)
    with scenario(suite, "active controller SIGKILL", resources, kafka_admin, testbed, topic_name,
                  originals, targets, expected_phase="Succeeded") as run:
        controller = testbed.active_controller()  # first: the tool is a JVM, slow enough to miss the moves
        resources.create(KPR, "faulted", run.spec())
        try:
            wait_for(run.in_flight, 60, "moves in flight")
            testbed.kill_node(controller)

            wait_for_new_controller(testbed, controller)
        finally:
            _restart(testbed, controller)


def test_kube_apiserver_restart(suite: Suite, testbed: Testbed, kpo_operator: OperatorProcess,
                                kafka_admin: AdminClient, topic_name: str,
                                resources: Resources) -> None:
    originals, targets = _rotation(6)
    # Resources at rest during the outage: each kind, finished. They must not poll, so they must not log either.
    create_topic(kafka_admin, f"{topic_name}-rest", 2, assignment=[[1, 2], [2, 3]])
    resources.create(KPR, "at-rest", {"partitions": spec_partitions(f"{topic_name}-rest", {0: [1, 2]})})
    resources.create("TopicPartitionCount", "at-rest", {"topic": f"{topic_name}-rest", "partitions": 4})
    resources.create("PreferredLeaderElection", "at-rest", {"topics": [f"{topic_name}-rest"]})
    for kind in (KPR, "TopicPartitionCount", "PreferredLeaderElection"):
        resources.wait_phase(kind, "at-rest", "Succeeded", timeout=60)
    at_rest = _at_rest(resources, (KPR, "TopicPartitionCount", "PreferredLeaderElection"), "at-rest")
    # Moves large enough to outlast the outage: the ticks must resume after it to finish them, and the status is
    # sampled for a while after the API is back (with 60 messages the moves ended while it was down, and an operator
    # that wrote Succeeded as soon as it was back left the sampler only a few reads).
    with scenario(suite, "kube-apiserver SIGKILL, 15 s down, restart", resources, kafka_admin, testbed,
                  topic_name, originals, targets, expected_phase="Succeeded",
                  fill_messages=SIGKILL_FILL_MESSAGES) as run:
        resources.create(KPR, "faulted", run.spec())
        wait_for(run.in_flight, 60, "moves in flight")
        mark = len(kpo_operator.log_text())
        # SIGKILL: a graceful stop waits up to a minute for the open watch streams to end.
        testbed.stop_apiserver(graceful=False)
        try:
            time.sleep(15)
        finally:
            testbed.start_apiserver()
        wait_for(lambda: "Kubernetes API available again" in kpo_operator.log_text()[mark:], 60,
                 "the operator to find the API again")
        outage_log = kpo_operator.log_text()[mark:]
    lines = outage_log.splitlines()
    assert "Traceback" not in outage_log, outage_log[-4000:]
    assert sum("Kubernetes API unavailable" in line for line in lines) == 1, outage_log[-4000:]
    assert len(lines) <= 25, f"{len(lines)} log lines for one outage:\n" + "\n".join(lines[:60])
    for kind, version in at_rest.items():
        assert resources.get(kind, "at-rest")["metadata"]["resourceVersion"] == version, f"{kind} at rest changed"


def test_revert_with_a_broker_down(suite: Suite, testbed: Testbed, kafka_admin: AdminClient,
                                   topic_name: str, resources: Resources) -> None:
    broker = 3
    originals, targets = _onto(broker, 4)
    # Partition 0 only swaps its preferred leader: no copy, so it completes at once while the others are in flight.
    targets[0] = list(reversed(originals[0]))
    # ~2 MB a partition: Kafka lets the first megabyte of a throttled copy through at once (one fetch), so smaller
    # partitions finish before the broker can be killed mid-move.
    with scenario(suite, f"revert with broker {broker} down", resources, kafka_admin, testbed,
                  topic_name, originals, targets, expected_phase="Reverted", fill_messages=200) as run:
        resources.create(KPR, "faulted", run.spec(onStop="Revert"))
        try:
            wait_for(run.in_flight, 60, "moves in flight")
            _wait_quietly(lambda: int((run.status().get("progress") or {}).get("completed") or 0) >= 1, 15)
            wait_for(lambda: broker_rate(kafka_admin, broker, "follower.replication.throttled.rate") is not None, 30,
                     f"kpo's throttle on broker {broker}")
            testbed.kill_node(broker)
            resources.patch_spec(KPR, "faulted", {"stop": True})
            # Everything a revert can do without the broker: the originals are all on brokers 1 and 2.
            if not _wait_quietly(lambda: replicas_of(kafka_admin, topic_name) == originals
                                 and not wait_for_quiet(testbed, timeout=0), 90):
                run.problems.append(f"broker {broker} down: after 90 s Kafka shows "
                                    f"{replicas_of(kafka_admin, topic_name)}, not the originals {originals} "
                                    f"(all on the brokers that are up); status {run.status().get('conditions')}")
            # A few ticks to report it: with the broker dead a tick's reads wait out their 2 s timeouts first (a CI
            # run still said "1 moving" 4 s after Kafka showed every original back).
            _wait_quietly(lambda: _condition_reason(run.status(), "Progressing") == "ThrottleCleanupPending", 30)
            status = run.status()
            pending = status.get("throttle") or {}
            if broker not in (pending.get("brokers") or []):
                run.problems.append(f"broker {broker} is down, so its throttle cannot be gone, yet status.throttle "
                                    f"is {pending}")
            # Reverted may be said (every partition is back), but not as done: Ready stays False and Progressing
            # says which throttle is still to be taken back (as in e2e/test_broker_loss.py).
            conditions = {c.get("type"): c for c in status.get("conditions") or []}
            ready, progressing = conditions.get("Ready") or {}, conditions.get("Progressing") or {}
            if ready.get("status") != "False":
                run.problems.append(f"Ready {ready.get('status')} while the throttle on broker {broker} is still to "
                                    f"be removed: {status.get('conditions')}")
            if not (progressing.get("status") == "True" and progressing.get("reason") == "ThrottleCleanupPending"
                    and f"[{broker}]" in str(progressing.get("message"))):
                run.problems.append(f"Progressing does not say the throttle cleanup of broker {broker} is pending: "
                                    f"{status.get('conditions')}")
            restored = replicas_of(kafka_admin, topic_name)
            wrongly_skipped = [s for s in status.get("skipped") or []
                               if restored.get(int(s["partition"])) == originals[int(s["partition"])]]
            if wrongly_skipped:
                run.problems.append(f"skipped lists partitions that were in fact restored: {wrongly_skipped}")
        finally:
            _restart(testbed, broker)
    final = resources.status(KPR, "faulted")
    assert not final.get("throttle"), final.get("throttle")


def _at_rest(resources: Resources, kinds: tuple[str, ...], name: str) -> dict[str, str]:
    """The resources' resourceVersions once two reads 2 s apart agree, within 30 s.

    The phase is written first; the operator's last write on a finished resource may come a moment later (a CI run
    saw a TopicPartitionCount's version move once right after its Succeeded, seconds before the outage). A resource
    that keeps being written is not at rest, and fails here."""
    def versions() -> dict[str, str]:
        return {kind: resources.get(kind, name)["metadata"]["resourceVersion"] for kind in kinds}

    seen = [versions()]

    def settled() -> dict[str, str] | None:
        time.sleep(2)
        seen.append(versions())
        return seen[-1] if seen[-1] == seen[-2] else None

    return wait_for(settled, 30, f"{name} of {kinds} to settle (first read: {seen[0]})")


def _restart(testbed: Testbed, node: int) -> None:
    """Start a killed node again; on two busy cores a JVM may take more than the test bed's usual two minutes."""
    testbed.start_node(node, wait=False)
    testbed.state.kafka.wait_healthy((node,), timeout=300)


def _condition_reason(status: dict[str, Any], kind: str) -> str | None:
    return next((c.get("reason") for c in status.get("conditions") or [] if c.get("type") == kind), None)


def _wait_quietly(check: Any, timeout: float) -> bool:
    try:
        wait_for(check, timeout, "")
    except AssertionError:
        return False
    return True


def _broker_unavailable(resources: Resources, broker: int) -> bool:
    conditions = resources.status(KPR, "faulted").get("conditions") or []
    said = [str(c.get("message")) for c in conditions if c.get("reason") == "BrokerUnavailable"]
    said += [str(e.message) for e in resources.events("faulted") if e.reason == "BrokerUnavailable"]
    return any(str(broker) in message for message in said)
