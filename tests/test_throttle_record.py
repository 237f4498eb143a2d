"""The cluster's throttle record: every resource's journal in one place, written before any change in Kafka.

The ledger's promises that the per-resource journals could not keep: holders recorded before a restart still count
when no status says so yet, a journal reaches the record before the configs it names reach Kafka, an earlier
version's journals are taken in, and what a holder that no longer exists alone held is taken back.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from kpo.domain.model import TopicPartition
from kpo.domain.throttle import FOLLOWER_RATE, LEADER_RATE, ConfigChange, ThrottleJournal, plan
from kpo.execution.ledger import ThrottleLedger
from kpo.k8s.throttle_record import COMPRESSED, data_key, decode, encode, record_name, resource_key
from test_cluster_executor import ThrottledCluster

P0, P1 = TopicPartition("a", 0), TopicPartition("a", 1)
LIVE = {1, 2, 3}
NOTHING = ThrottleJournal()


class Record:
    """The record as a dict; remembers what Kafka held at each save, to judge the order of the two."""

    def __init__(self, cluster: ThrottledCluster, journals: Mapping[str, ThrottleJournal] | None = None,
                 gone: frozenset[str] = frozenset(), unknown: frozenset[str] = frozenset()) -> None:
        self.cluster = cluster
        self.journals = dict(journals or {})
        self.gone, self.unknown = gone, unknown
        self.saves: list[tuple[str, ThrottleJournal, dict[tuple[str, str], dict[str, str]]]] = []
        self.asked: list[str] = []

    def load(self) -> dict[str, ThrottleJournal]:
        return dict(self.journals)

    def save(self, key: str, journal: ThrottleJournal) -> None:
        self.saves.append((key, journal, {k: dict(v) for k, v in self.cluster.throttled().items()}))
        if journal.empty:
            self.journals.pop(key, None)
        else:
            self.journals[key] = journal

    def exists(self, key: str) -> bool | None:
        self.asked.append(key)
        return None if key in self.unknown else key not in self.gone


def _ensure(ledger: ThrottleLedger, cluster: ThrottledCluster, key: str, tp: TopicPartition,
            previous: ThrottleJournal = NOTHING) -> ThrottleJournal:
    return ledger.ensure(key, cluster, plan(1000, {tp: ((1, 2), (1, 3))}), previous=previous,  # type: ignore[arg-type]
                         index={}, save=lambda _j: None, live_brokers=LIVE)


def _remove(ledger: ThrottleLedger, cluster: ThrottledCluster, key: str, journal: ThrottleJournal,
            index: Mapping[str, ThrottleJournal] | None = None) -> ThrottleJournal:
    return ledger.remove(key, cluster, journal, index=index or {}, save=lambda _j: None,  # type: ignore[arg-type]
                         live_brokers=LIVE)


def test_a_journal_reaches_the_record_before_its_configs_reach_kafka() -> None:
    cluster = ThrottledCluster()
    record = Record(cluster)
    mine = _ensure(ThrottleLedger(record=record), cluster, "ns/first", P0)
    key, saved, kafka_then = record.saves[0]
    assert (key, saved) == ("ns/first", mine)
    assert kafka_then == {}, "nothing was throttled in Kafka when the record was written"
    assert cluster.configs[("broker", "3")] == {LEADER_RATE: "1000", FOLLOWER_RATE: "1000"}


def test_a_holder_recorded_before_a_restart_keeps_a_shared_rate_though_no_status_names_it() -> None:
    cluster = ThrottledCluster()
    record = Record(cluster)
    before = ThrottleLedger(record=record)
    first = _ensure(before, cluster, "ns/first", P0)
    second = _ensure(before, cluster, "ns/second", P1)
    after_restart = ThrottleLedger(record=record)  # a new operator: its index is empty, its memory too
    assert _remove(after_restart, cluster, "ns/second", second).empty
    assert cluster.configs[("broker", "3")] == {LEADER_RATE: "1000", FOLLOWER_RATE: "1000"}, "first still needs it"
    assert _remove(after_restart, cluster, "ns/first", first).empty
    assert cluster.throttled() == {}
    assert record.journals == {}, "an ended resource leaves no key behind"


def test_without_the_record_the_same_restart_took_the_shared_rate_from_under_the_other() -> None:
    # What the record is for: the per-resource journals alone, with statuses not yet written.
    cluster = ThrottledCluster()
    before = ThrottleLedger()
    _ensure(before, cluster, "ns/first", P0)
    second = _ensure(before, cluster, "ns/second", P1)
    _remove(ThrottleLedger(), cluster, "ns/second", second)
    assert ("broker", "3") not in cluster.throttled()


def test_an_earlier_versions_journal_is_taken_into_the_record_before_anything_more_is_applied() -> None:
    cluster = ThrottledCluster()
    old = _ensure(ThrottleLedger(), cluster, "ns/old", P0)  # kept in its own ConfigMap only
    record = Record(cluster)
    _ensure(ThrottleLedger(record=record), cluster, "ns/old", P1, previous=old)
    assert record.saves[0][:2] == ("ns/old", old)
    assert record.journals["ns/old"].follower_replicas["a"] == {"0:3", "1:3"}


def test_what_a_holder_that_no_longer_exists_alone_held_is_taken_back_once() -> None:
    cluster = ThrottledCluster()
    record = Record(cluster, gone=frozenset({"ns/gone"}))
    ledger = ThrottleLedger(record=record)
    gone = _ensure(ledger, cluster, "ns/gone", P0)
    mine = _ensure(ledger, cluster, "ns/mine", P1)
    restarted = ThrottleLedger(record=record)  # "ns/gone" lost its finalizer while no operator ran
    assert _remove(restarted, cluster, "ns/mine", mine).empty
    assert gone.follower_replicas and cluster.throttled() == {}, "the departed holder's entries went too"
    assert record.journals == {}
    _remove(restarted, cluster, "ns/mine", ThrottleJournal())
    assert record.asked == ["ns/gone"], "asked once"


def test_a_holder_that_cannot_be_read_or_is_live_in_the_index_is_never_taken_back() -> None:
    for index_it in (False, True):
        cluster = ThrottledCluster()
        record = Record(cluster, gone=frozenset({"ns/other"}), unknown=frozenset() if index_it else
                        frozenset({"ns/other"}))
        ledger = ThrottleLedger(record=record)
        other = _ensure(ledger, cluster, "ns/other", P0)
        mine = _ensure(ledger, cluster, "ns/mine", P1)
        restarted = ThrottleLedger(record=record)
        _remove(restarted, cluster, "ns/mine", mine, index={"ns/other": other} if index_it else None)
        assert cluster.configs[("broker", "3")] == {LEADER_RATE: "1000", FOLLOWER_RATE: "1000"}
        assert "ns/other" in record.journals


def test_forgetting_a_holder_removes_its_key() -> None:
    cluster = ThrottledCluster()
    record = Record(cluster)
    ledger = ThrottleLedger(record=record)
    _ensure(ledger, cluster, "ns/orphaned", P0)
    ledger.forget("ns/orphaned")
    assert record.journals == {}


def test_record_names_and_keys() -> None:
    assert record_name("default") == "kpo-throttles-default"
    assert record_name("Prod_EU").startswith("kpo-throttles-prod-eu-")
    assert record_name("Prod_EU") != record_name("prod-eu")
    assert len(record_name("x" * 300)) <= 63
    assert record_name("___").startswith("kpo-throttles-") and not record_name("___").endswith("-")
    assert data_key("team-a/drain.b1") == "team-a_drain.b1"
    assert resource_key(data_key("team-a/drain.b1")) == "team-a/drain.b1"


def test_a_large_journal_is_kept_compressed_and_read_back_the_same() -> None:
    small = ThrottleJournal(rate=1000, brokers=frozenset({1, 3}), leader_replicas={"a": frozenset({"0:1"})})
    assert encode(small).startswith("{") and decode(encode(small)) == small
    # A 10,000-partition resource at RF 3: what the rollback record leaves it (256 KiB) in plain JSON.
    large = ThrottleJournal(rate=1000, brokers=frozenset({1, 2, 3, 4}),
                            leader_replicas={"orders": frozenset(f"{p}:{b}" for p in range(10_000) for b in (1, 2, 3))},
                            follower_replicas={"orders": frozenset(f"{p}:4" for p in range(10_000))})
    packed = encode(large)
    assert packed.startswith(COMPRESSED) and decode(packed) == large
    assert len(packed) < len(str(large.to_json())) / 3


class LaggingCluster(ThrottledCluster):
    """Answers the first read of an entity after a change with what it held before, as a KRaft broker does for the
    milliseconds between the controller's acknowledgement and the broker applying the record."""

    def __init__(self) -> None:
        super().__init__()
        self.before: dict[tuple[str, str], dict[str, str]] = {}

    def alter_configs(self, changes: Sequence[ConfigChange]) -> None:
        for change in changes:
            self.before.setdefault((change.resource, change.name),
                                   dict(self.configs.get((change.resource, change.name), {})))
        super().alter_configs(changes)

    def broker_configs(self, brokers: Collection[int], names: Collection[str]) -> dict[int, dict[str, str]]:
        now = super().broker_configs(brokers, names)
        for b in brokers:
            if (stale := self.before.pop(("broker", str(b)), None)) is not None:
                now[b] = {k: v for k, v in stale.items() if k in names}
        return now


def test_a_removal_read_back_before_the_broker_shows_it_is_read_again_not_served_from_the_cache() -> None:
    cluster = LaggingCluster()
    ledger = ThrottleLedger(record=Record(cluster))
    mine = _ensure(ledger, cluster, "ns/first", P0)
    cluster.before.clear()  # the rates are applied: every broker shows them
    assert _remove(ledger, cluster, "ns/first", mine).empty, "cleaned in this pass: the second read shows it"
    assert cluster.throttled() == {}


def test_a_removal_kafka_never_shows_is_kept_for_the_next_pass() -> None:
    cluster = ThrottledCluster()
    ledger = ThrottleLedger(record=Record(cluster), read_back_seconds=0)
    mine = _ensure(ledger, cluster, "ns/first", P0)
    real_alter = cluster.alter_configs
    # Kafka 3.2 as seen: broker 3 acknowledges the DELETE of its rates and keeps them.
    cluster.alter_configs = lambda changes: real_alter([c for c in changes  # type: ignore[method-assign]
                                                        if not (c.resource == "broker" and c.name == "3")])
    left = _remove(ledger, cluster, "ns/first", mine)
    assert left.brokers == {3} and not left.topics
    cluster.alter_configs = real_alter  # type: ignore[method-assign]
    assert _remove(ledger, cluster, "ns/first", left).empty and cluster.throttled() == {}
