"""The bench's greedy reference: :mod:`kpo.domain.greedy` on the planning job's input, its answer as JSON lines.

It reads the planning job's input (``request.json``, ``brokers.json``, ``partitions`` as JSON lines) and writes a
target assignment as JSON lines (topic, partition, replicas) that ``kpo.planning.spark.evaluate`` scores exactly like
kpo's own plan and Kafka's placer. The rules are in :mod:`kpo.domain.greedy` (the planning job runs the same code as a
candidate on small inputs); this module is the bench's I/O around them.

``python -m bench.planner.greedy INPUT_DIR OUTPUT.jsonl`` prints ``{"placementSeconds": .., "partitions": ..,
"offline": ..}`` (placement alone, without reading and writing files, like the bench's Kafka placer).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from kpo.domain.greedy import (
    Greedy,
    Key,
    Partition,
    Result,
    Setup,
    Spread,
    is_offline,
    place,
    plan,
    selected,
    setup,
    uneven_partitions,
)
from kpo.domain.plan_contract import BROKERS_FILE, PARTITIONS_PATH, REQUEST_FILE, BrokerInfo, PlanRequest, parse_brokers

__all__ = ["Greedy", "Key", "Partition", "Result", "Setup", "Spread", "is_offline", "place", "plan", "read_assignment",
           "read_input", "selected", "setup", "uneven_partitions", "write_assignment"]

def read_input(folder: Path) -> tuple[PlanRequest, tuple[BrokerInfo, ...], list[Partition]]:
    request = PlanRequest.from_json((folder / REQUEST_FILE).read_text())
    brokers = parse_brokers((folder / BROKERS_FILE).read_text())
    source = folder / PARTITIONS_PATH
    files = sorted(f for f in source.iterdir() if not f.name.startswith((".", "_"))) if source.is_dir() else [source]
    partitions = []
    for f in files:
        with f.open() as lines:
            for line in lines:
                if line.strip():
                    row = json.loads(line)
                    partitions.append(Partition(topic=row["topic"], partition=int(row["partition"]),
                                                replicas=tuple(int(b) for b in row["replicas"]),
                                                size=int(row.get("size_bytes") or 0)))
    return request, brokers, partitions


def read_assignment(path: Path) -> dict[Key, tuple[int, ...]]:
    out: dict[Key, tuple[int, ...]] = {}
    with path.open() as lines:
        for line in lines:
            if line.strip():
                row = json.loads(line)
                out[(row["topic"], int(row["partition"]))] = tuple(int(b) for b in row["replicas"])
    return out


def write_assignment(path: Path, assignment: Mapping[Key, Sequence[int]], original: Mapping[Key, Partition]) -> int:
    """The changed partitions as JSON lines; returns how many."""
    written = 0
    with path.open("w") as out:
        for key in sorted(assignment):
            replicas = tuple(assignment[key])
            if replicas != original[key].replicas:
                out.write(json.dumps({"topic": key[0], "partition": key[1], "replicas": list(replicas)}) + "\n")
                written += 1
    return written


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m bench.planner.greedy INPUT_DIR OUTPUT.jsonl", file=sys.stderr)
        return 2
    request, brokers, partitions = read_input(Path(args[0]))
    started = time.monotonic()
    result = plan(request, brokers, partitions)
    seconds = time.monotonic() - started
    written = write_assignment(Path(args[1]), result.assignment, {p.key: p for p in partitions})
    print(json.dumps({"placementSeconds": round(seconds, 3), "partitions": written, "offline": len(result.offline),
                      "moves": result.moves, "unplaced": result.unplaced}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
