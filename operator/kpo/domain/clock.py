"""Time, one way: inside kpo a moment is an aware UTC ``datetime`` in whole seconds; it becomes a string only where
it is written (status fields, condition transition times, messages) and is parsed back only where it is read (the
status, ``metadata.creationTimestamp``).

Kubernetes writes times as RFC 3339 in UTC with a ``Z`` and whole seconds; so does kpo, so a status that did not
change compares equal tick after tick and writes nothing.
"""

from __future__ import annotations

import datetime as dt
from typing import Any


def utcnow() -> dt.datetime:
    """Now, in UTC, whole seconds."""
    return dt.datetime.now(dt.UTC).replace(microsecond=0)


def rfc3339(moment: dt.datetime) -> str:
    """``moment`` as Kubernetes writes times: RFC 3339, UTC, a ``Z``."""
    return moment.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")


def parse_rfc3339(value: Any) -> dt.datetime | None:
    """A time read back from the API (``None`` when absent or not a time)."""
    if not value:
        return None
    try:
        parsed = dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=dt.UTC)
