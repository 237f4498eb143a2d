"""What is wrong with a spec, for the user: one problem per reason, and a summary bounded in size.

Every kind refuses bad input the same way — a condition and an Event naming the field, the reason and what to do — so
the problem type and its summary live here, below the three life cycles, not in one kind's module.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """One reason a spec cannot be carried out on this cluster, phrased for the user."""

    field: str
    reason: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


#: Problems a message names one by one; the rest are counted. A condition message is capped at 32 KiB by the API
#: (metav1.Condition), and a spec of thousands of entries can have a problem each: 700 unknown partitions made a
#: message the API server refused, and the resource never got a phase.
PROBLEMS_SHOWN = 20
#: Characters of one problem's text in a message: a problem quotes user input (topic names, log dirs, broker lists).
PROBLEM_CHARS = 400


def summarize(problems: Sequence[Problem], shown: int = PROBLEMS_SHOWN) -> str:
    """The first ``shown`` problems, each clipped, then how many more there are and of which kinds: bounded in
    size whatever the number of problems (at most ``shown * PROBLEM_CHARS`` plus the counts)."""
    parts = [_clip(str(p)) for p in problems[:shown]]
    rest = problems[shown:]
    if rest:
        kinds = Counter(p.reason for p in rest)
        counted = ", ".join(f"{n} {reason}" for reason, n in sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0])))
        parts.append(f"and {len(rest)} more problem(s) ({counted}; {len(problems)} in all)")
    return "; ".join(parts)


def _clip(text: str) -> str:
    return text if len(text) <= PROBLEM_CHARS else text[:PROBLEM_CHARS - 1] + "…"
