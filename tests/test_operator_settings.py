"""The Kopf settings kpo starts with, where a default of Kopf's broke a promise of kpo's."""

from __future__ import annotations

import kopf

from kpo.__main__ import configure


def test_a_deletion_waits_for_the_tick_under_way_not_for_kopfs_minute() -> None:
    """Kopf lets a resource go once its timer has stopped; with its defaults, a tick under way at the deletion made it
    look again only after 60 s (``cancellation_polling``), so a deleted resource lingered a minute (measured on the
    test bed while ticks on a silent cluster still took 3 s: of six TopicPartitionCounts deleted mid-tick none was
    gone after 22.7 s; with these settings all within 3 s). The promise itself is held end to end by
    ``e2e/test_concurrency.py``, which deletes 36 resources of unusable clusters within 15 s."""
    settings = kopf.OperatorSettings()
    assert settings.background.cancellation_polling == 60, "Kopf's default, which this test is about"
    configure(settings)
    assert settings.background.instant_exit_timeout is not None and settings.background.instant_exit_timeout >= 1
    assert settings.background.cancellation_polling <= 2
