"""Where Kopf keeps its own bookkeeping on kpo's resources: a digest of the last handled spec, not a copy of it.

Kopf compares every object it sees with a "diff base", the essence (spec, labels, annotations) it last handled, to
tell a creation from an update from nothing new. Its stock storages keep that essence whole, as an annotation or
in the status. A PartitionReassignment's spec may list thousands of partitions: with about 6,000 entries the
annotation passed the API server's 256 KiB limit on all annotations together, the patch was refused and the
resource was never handled; in the status, the copy would double the object towards etcd's request limit instead.

kpo has no creation or update handlers: every kind reconciles from a timer that reads the whole object each time,
and the one change handler, on deletion, keys on ``deletionTimestamp``. Kopf needs the diff base only to see
*whether* the essence changed, never *how*, so kpo stores a SHA-256 digest of it (64 characters, whatever the spec)
and rebuilds the essence from the object when the digest matches. A mismatch reads as "changed" (an empty essence),
exactly what Kopf would have concluded from the full copy. The full-copy annotation of earlier kpo versions is
removed on the next store.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any, cast

import kopf

PREFIX = "kpo.dev"


def essence_digest(essence: Any) -> str:
    """SHA-256 of the essence's canonical JSON (sorted keys): equal essences, equal digests."""
    return hashlib.sha256(json.dumps(essence, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


class DigestDiffBaseStorage(kopf.DiffBaseStorage):
    """Kopf's diff base as a digest annotation ``kpo.dev/last-handled-digest`` (see the module text)."""

    def __init__(self, *, prefix: str = PREFIX, key: str = "last-handled-digest",
                 legacy_key: str = "last-handled-configuration") -> None:
        super().__init__()
        self.prefix = prefix
        self.annotation = f"{prefix}/{key}"
        self.legacy_annotation = f"{prefix}/{legacy_key}"

    def build(self, *, body: kopf.Body, extra_fields: Iterable[Any] | None = None) -> kopf.BodyEssence:
        essence = super().build(body=body, extra_fields=extra_fields)
        # kpo's own bookkeeping (this digest, Kopf's progress records) is never part of what the user changed.
        annotations = cast(dict[str, Any], essence).get("metadata", {}).get("annotations", {})
        self.remove_annotations(essence, {k for k in annotations if k.startswith(f"{self.prefix}/")})
        self.remove_empty_stanzas(essence)
        return essence

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:
        digest = body.metadata.annotations.get(self.annotation)
        if digest is None:
            return None
        essence = self.build(body=body)
        return essence if essence_digest(essence) == digest else cast(kopf.BodyEssence, {})

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        patch.metadata.annotations[self.annotation] = essence_digest(essence)
        if self.legacy_annotation in body.metadata.annotations:
            patch.metadata.annotations[self.legacy_annotation] = None
