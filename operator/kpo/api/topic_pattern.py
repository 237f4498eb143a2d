"""Topic patterns, matched in time linear in the name, whatever the pattern.

A user's pattern runs inside the operator against every topic name of a cluster. Python's ``re`` and Java's regex
backtrack: ``(a+)+b`` against a name of 29 a's takes over a minute, doubling with each character, and froze every
handler of the operator in one tick. RE2 (the engine Kubernetes CEL uses for ``matches``) compiles a pattern to an
automaton and never backtracks, so no pattern can stall a tick. It refuses what needs backtracking (backreferences,
lookarounds): those patterns are refused when the resource is read, with RE2's own reason.

Everything that matches a topic pattern — the API's validation, the life cycles and the planning job — goes through
this module, so a pattern means the same thing everywhere: a match of the whole topic name.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

import re2

#: RE2's memory budget for one compiled pattern (its default is 8 MiB): a pattern whose automaton would need more,
#: such as ``(a{100}){100}``, is refused rather than compiled.
MAX_MEMORY_BYTES = 8 << 20


class _Compiled(Protocol):
    def fullmatch(self, text: str) -> object | None: ...


class TopicPatternError(ValueError):
    """The pattern is not one RE2 can run."""


def compile_topic_pattern(pattern: str) -> _Compiled:
    options = re2.Options()
    options.log_errors = False  # RE2 would print each refused pattern to stderr; the refusal is raised instead
    options.max_mem = MAX_MEMORY_BYTES
    try:
        compiled: _Compiled = re2.compile(pattern, options)
    except re2.error as exc:
        reason = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise TopicPatternError(f"not a pattern RE2 can run: {reason}") from exc
    return compiled


def matching(pattern: str, names: Iterable[str]) -> set[str]:
    """The names the pattern matches as a whole."""
    compiled = compile_topic_pattern(pattern)
    return {name for name in names if compiled.fullmatch(name) is not None}
