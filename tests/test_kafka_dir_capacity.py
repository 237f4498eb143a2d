"""Each log dir's capacity as kpo reads it from kafka-python's DescribeLogDirs answer (KIP-827): a broker older than
Kafka 3.3 answers version 3 or lower, which kafka-python gives as -1 or leaves out, and an offline dir answers with an
error; neither may count as a dir of known size (RelieveCapacity refuses with CapacityUnknown instead). Pure: the
answer's dictionaries, no broker."""

from __future__ import annotations

from kpo.domain.model import DirCapacity
from kpo.kafka.client import capacity_of


def test_a_dir_that_reports_its_file_system_counts_and_one_that_does_not_is_left_out() -> None:
    answer = [
        {"log_dir": "/data/a", "error_code": 0, "total_bytes": 1000, "usable_bytes": 250, "topics": []},
        {"log_dir": "/data/b", "error_code": 0, "total_bytes": -1, "usable_bytes": -1, "topics": []},  # before 3.3
        {"log_dir": "/data/c", "error_code": 0, "topics": []},  # a version without the fields at all
        {"log_dir": "/data/d", "error_code": 56, "total_bytes": 1000, "usable_bytes": 900},  # KAFKA_STORAGE_ERROR
        {"log_dir": "/data/e", "error_code": 0, "total_bytes": 1000, "usable_bytes": 0},  # full, still known
        {"log_dir": "/data/f", "error_code": 0, "total_bytes": 0, "usable_bytes": 0},  # no size: unknown
    ]
    assert capacity_of(7, answer) == {(7, "/data/a"): DirCapacity(1000, 250), (7, "/data/e"): DirCapacity(1000, 0)}
