"""When Kafka's replication throttle lets a move beat bytes / throttle (issue 26, item 4).

Kafka does not hold a throttled replica to the rate at every instant. Its replication quota
(``ReplicationQuotaManager``, one for the leader side and one for the follower side of each broker) is a ``SimpleRate``
over samples of ``replication.quota.window.size.seconds`` (1 s), of which ``replication.quota.window.num`` (11) are
kept: the rate is the bytes of the kept samples over the time since the oldest one began (at least one sample), and a
sample is dropped once its last event is a window old. The quota is checked *before* a fetch: a follower leaves a
throttled partition out of its fetch request while its quota is exceeded
(``RemoteLeaderEndPoint.shouldFollowerThrottle``), a leader answers it with no records
(``ReplicaManager.shouldLeaderThrottle``); the bytes are recorded *after* the fetch. So a fetch that starts under the
quota carries up to ``replica.fetch.max.bytes`` (1 MiB) of every partition in it, up to
``replica.fetch.response.max.bytes`` (10 MiB) in all, whatever the rate.

What happens next depends on one comparison. When one round of fetches through a broker carries no more than its
throttle allows in the quota window, the broker waits until the window has paid the excess back, and over the move
the rate holds (measured on the test bed: one 6 MB partition at 150 kB/s took 39.6 s for 40 s of bytes / throttle).
When it carries more, the sample holding the excess is dropped before it is paid back, and the next round goes
through at once: the quota forgets what exceeds its window, and the moves end well before bytes / throttle (twelve
1.5 MB partitions drained from one broker at 150 kB/s took 37.7 s for 120 s).

kpo reads neither setting from the brokers: it assumes Kafka's defaults, which are below.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from kpo.domain.fluid import SimMove

#: ``replica.fetch.max.bytes``: what one fetch carries of one partition at most.
FETCH_MAX_BYTES = 1_048_576
#: ``replica.fetch.response.max.bytes``: what one fetch carries in all at most.
RESPONSE_MAX_BYTES = 10_485_760
#: ``replication.quota.window.num`` x ``replication.quota.window.size.seconds``: how long the quota remembers bytes.
QUOTA_WINDOW_SECONDS = 11.0


@dataclass(frozen=True)
class Burst:
    """One broker direction whose round of fetches carries more than its throttle allows in the quota window."""

    broker: int
    direction: str  # "out" (the leader's side) or "in" (the follower's)
    fetch_bytes: float
    window_bytes: float

    def describe(self) -> str:
        verb = "sends" if self.direction == "out" else "receives"
        return (f"broker {self.broker} {verb} up to {self.fetch_bytes / 1e6:.1f} MB in one round of fetches (up to "
                f"{FETCH_MAX_BYTES} bytes of each partition), more than its throttle passes in Kafka's quota window "
                f"({self.window_bytes / 1e6:.2f} MB in {QUOTA_WINDOW_SECONDS:g} s), and the quota forgets the excess")


def fetch_round_bytes(in_flight: Iterable[SimMove]) -> dict[tuple[str, int], float]:
    """The bytes one round of fetches can carry through each broker direction: each follower fetches the partitions
    it copies from one leader in one request, up to ``FETCH_MAX_BYTES`` of each and ``RESPONSE_MAX_BYTES`` in all."""
    per_link: dict[tuple[int, int], float] = defaultdict(float)
    for move in in_flight:
        for receiver in move.receivers:
            per_link[(move.leader, receiver)] += min(move.size, FETCH_MAX_BYTES)
    through: dict[tuple[str, int], float] = defaultdict(float)
    for (leader, receiver), carried in per_link.items():
        through[("out", leader)] += min(carried, RESPONSE_MAX_BYTES)
        through[("in", receiver)] += min(carried, RESPONSE_MAX_BYTES)
    return dict(through)


def burst(in_flight: Iterable[SimMove], throttle: float) -> Burst | None:
    """The broker direction whose round of fetches most exceeds ``throttle`` x the quota window, if any does."""
    window = throttle * QUOTA_WINDOW_SECONDS
    over = [(carried, key) for key, carried in fetch_round_bytes(in_flight).items() if carried > window]
    if not over:
        return None
    carried, (direction, broker) = max(over)
    return Burst(broker, direction, carried, window)
