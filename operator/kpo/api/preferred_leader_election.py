"""PreferredLeaderElection: move partition leadership back to the preferred (first) replica, once or on a schedule.

This is kafka-leader-election.sh as a resource, and a controlled replacement for ``auto.leader.rebalance.enable``:
the selection says which partitions (all, named topics, a topic pattern or explicit partitions), ``schedule`` repeats
the election, ``after`` waits for a PartitionReassignment to succeed first (moves change preferred leaders).

Unclean elections (KIP-460) may elect an out-of-sync replica and lose acknowledged writes, so the API makes them
deliberate: an unclean election must name what it elects, and it is never scheduled.
"""

from __future__ import annotations

import re
from datetime import timedelta
from enum import StrEnum
from typing import Annotated

from pydantic import AfterValidator, AwareDatetime, Field, StrictStr

from kpo.api.common import (
    ClusterRef,
    PartitionFailure,
    StatusBase,
    TopicPartition,
    cluster_ref_immutable,
    require_one_entry_per_partition,
)
from kpo.api.schema import (
    LIST_ATOMIC,
    ApiModel,
    BrokerSet,
    ObjectName,
    Rule,
    RuleReason,
    StatusModel,
    TopicPattern,
    TopicSet,
)

#: A Go-style duration restricted to hours, minutes and seconds ("15m", "1h30m", "90s"), which CEL's duration() and
#: Python agree on.
INTERVAL_PATTERN = r"^([0-9]+h)?([0-9]+m)?([0-9]+s)?$"
MIN_INTERVAL = timedelta(seconds=10)
#: status.lastRun.electedPartitions lists at most this many partitions; the counters are always complete.
ELECTED_PARTITIONS_CAP = 100
_UNITS = {"h": 3600, "m": 60, "s": 1}


def parse_interval(text: str) -> timedelta:
    """The duration an interval string (already matching :data:`INTERVAL_PATTERN`) stands for."""
    return timedelta(seconds=sum(int(n) * _UNITS[unit] for n, unit in re.findall(r"([0-9]+)([hms])", text)))


class ElectionType(StrEnum):
    PREFERRED = "Preferred"
    UNCLEAN = "Unclean"


class Schedule(ApiModel):
    """Repeat the election."""

    interval: StrictStr = Field(
        pattern=INTERVAL_PATTERN,
        min_length=2,
        max_length=32,
        description='Time between the starts of two runs, in hours, minutes and seconds: "15m", "1h30m", "90s". '
        "At least 10s.",
    )

    rules = (
        Rule(
            # The pattern guard keeps a malformed interval to its one schema error (no CEL conversion error too).
            cel=f"!self.interval.matches('{INTERVAL_PATTERN}') || "
            f"duration(self.interval) >= duration('{int(MIN_INTERVAL.total_seconds())}s')",
            message=f"interval must be at least {int(MIN_INTERVAL.total_seconds())}s",
            holds=lambda s: parse_interval(s.interval) >= MIN_INTERVAL,
            field_path=".interval",
        ),
    )

    @property
    def every(self) -> timedelta:
        return parse_interval(self.interval)


_SELECTED = "has(self.topics) || has(self.topicPattern) || has(self.partitions)"


class PreferredLeaderElectionSpec(ApiModel):
    """Which partitions to elect leaders for, how, and when."""

    cluster_ref: ClusterRef = None
    topics: TopicSet | None = Field(
        default=None,
        min_length=1,
        description="Elect leaders for every partition of these topics. At most one of topics, topicPattern and "
        "partitions; none of them: every partition in the cluster.",
    )
    topic_pattern: TopicPattern | None = Field(
        default=None,
        description="Elect leaders for every partition of the topics whose whole name matches this regular "
        "expression (RE2 syntax).",
    )
    partitions: Annotated[list[TopicPartition], AfterValidator(require_one_entry_per_partition)] | None = Field(
        default=None,
        min_length=1,
        description="Elect leaders for exactly these partitions.",
        json_schema_extra=LIST_ATOMIC,
    )
    election_type: ElectionType = Field(
        default=ElectionType.PREFERRED,
        description="Preferred: make the preferred (first) replica the leader where it is in sync. Unclean: elect "
        "any live replica for partitions that have no leader, even an out-of-sync one (may lose data; needs an "
        "explicit selection and no schedule).",
    )
    schedule: Schedule | None = Field(
        default=None,
        description="Repeat the election at a fixed interval. Omitted: run once.",
    )
    after: ObjectName | None = Field(
        default=None,
        description="Name of a PartitionReassignment in the same namespace; the election waits (phase Waiting) "
        "until it has Succeeded.",
    )
    exclude_leaders: BrokerSet = Field(
        default_factory=list,
        description="Brokers that must not be made leaders: selected partitions whose preferred replica is on one of "
        "them are left out of the election (counted in status.lastRun.excluded). Preferred elections only.",
    )

    rules = (
        Rule(
            cel="!has(self.topics) || !has(self.topicPattern)",
            message="select by topics, topicPattern or partitions, not several",
            holds=lambda s: s.topics is None or s.topic_pattern is None,
            field_path=".topicPattern",
            reason=RuleReason.FORBIDDEN,
        ),
        Rule(
            cel="!has(self.partitions) || !(has(self.topics) || has(self.topicPattern))",
            message="select by topics, topicPattern or partitions, not several",
            holds=lambda s: s.partitions is None or (s.topics is None and s.topic_pattern is None),
            field_path=".partitions",
            reason=RuleReason.FORBIDDEN,
        ),
        Rule(
            cel=f"self.electionType != 'Unclean' || {_SELECTED}",
            message="an Unclean election must name its partitions (topics, topicPattern or partitions): electing "
            "out-of-sync replicas cluster-wide risks losing data everywhere",
            holds=lambda s: s.election_type is not ElectionType.UNCLEAN
            or s.topics is not None
            or s.topic_pattern is not None
            or s.partitions is not None,
            field_path=".electionType",
        ),
        Rule(
            cel="self.electionType != 'Unclean' || !has(self.schedule)",
            message="an Unclean election cannot be scheduled: run it once, deliberately",
            holds=lambda s: s.election_type is not ElectionType.UNCLEAN or s.schedule is None,
            field_path=".schedule",
            reason=RuleReason.FORBIDDEN,
        ),
        Rule(
            cel="self.electionType != 'Unclean' || !has(self.excludeLeaders) || size(self.excludeLeaders) == 0",
            message="excludeLeaders applies to Preferred elections: an Unclean election takes whichever replica "
            "Kafka can find",
            holds=lambda s: s.election_type is not ElectionType.UNCLEAN or not s.exclude_leaders,
            field_path=".excludeLeaders",
            reason=RuleReason.FORBIDDEN,
        ),
        cluster_ref_immutable(),
    )


class ElectionPhase(StrEnum):
    PENDING = "Pending"
    WAITING = "Waiting"
    ELECTING = "Electing"
    SUCCEEDED = "Succeeded"
    SCHEDULED = "Scheduled"
    FAILED = "Failed"
    INVALID = "Invalid"


class ElectionRun(StatusModel):
    """The outcome of one election run (one ElectLeaders request over the selection)."""

    started_at: AwareDatetime | None = Field(default=None, description="When the run started.")
    finished_at: AwareDatetime | None = Field(default=None, description="When the run finished.")
    elected: int = Field(default=0, ge=0, description="Partitions whose leader changed to the chosen replica.")
    already_preferred: int = Field(
        default=0, ge=0, description="Partitions already led by their preferred replica (ELECTION_NOT_NEEDED)."
    )
    failed: int = Field(default=0, ge=0, description="Partitions Kafka refused to elect for (see failures).")
    excluded: int = Field(
        default=0, ge=0, description="Selected partitions left out because their preferred replica is on a broker "
        "in spec.excludeLeaders."
    )
    failures: list[PartitionFailure] = Field(
        default_factory=list,
        description="The refused partitions, with Kafka's reason (e.g. PREFERRED_LEADER_NOT_AVAILABLE).",
    )
    elected_partitions: list[str] = Field(
        default_factory=list,
        max_length=ELECTED_PARTITIONS_CAP,
        description=f'Partitions whose leader changed, as "topic-partition" (at most {ELECTED_PARTITIONS_CAP}; '
        "elected has the full count).",
    )


class PreferredLeaderElectionStatus(StatusBase):
    """The last run and the schedule."""

    phase: ElectionPhase | None = Field(
        default=None,
        description="Pending, Waiting (for the reassignment named in after), Electing, Succeeded (a one-off run "
        "finished), Scheduled (waiting for the next run), Failed or Invalid.",
    )
    last_run: ElectionRun | None = Field(default=None, description="Outcome of the most recent run.")
    runs: int = Field(default=0, ge=0, description="Runs completed so far.")
    next_run_at: AwareDatetime | None = Field(default=None, description="When the next scheduled run starts.")
    topic_missing_since: AwareDatetime | None = Field(
        default=None, description="When kpo first found a topic the spec names missing for this generation. It waits "
        "a short grace period for a topic applied together with this resource before declaring the spec Invalid.")
