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

Even a digest does not fit an object whose own annotations already come within a few bytes of the limit. Then any
patch that adds an annotation is refused whole (422), finalizer removal included: a resource with one 262,118-byte
annotation was never let go after ``kubectl delete``, and Kopf logged a traceback on every attempt. So both of kpo's
storages write only what fits (:func:`fits`) and skip the rest, with one warning per object. Skipping costs little:
a missing digest reads as "changed", which for kpo's timer-driven kinds means nothing; a missing progress record
means a retried deletion handler starts its count anew.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any, cast

import kopf

PREFIX = "kpo.dev"
#: The API server's limit on all of an object's annotations together, keys and values (TotalAnnotationSizeLimitB).
ANNOTATIONS_LIMIT_BYTES = 256 * 1024

logger = logging.getLogger(__name__)


def annotations_size(annotations: Mapping[str, str]) -> int:
    return sum(len(key.encode()) + len(value.encode()) for key, value in annotations.items())


def annotations_after(current: Mapping[str, str], changes: Mapping[str, str | None]) -> dict[str, str]:
    """The annotations once a merge patch's changes apply (None removes a key)."""
    after = dict(current)
    for key, value in changes.items():
        if value is None:
            after.pop(key, None)
        else:
            after[key] = value
    return after


class _Oversized:
    """Warns once per object that kpo's bookkeeping is left out of its annotations."""

    def __init__(self) -> None:
        self._warned: set[str] = set()

    def warn(self, body: kopf.Body) -> None:
        uid = str(body.metadata.uid)
        if uid in self._warned:
            return
        self._warned.add(uid)
        logger.warning("%s/%s: its annotations leave no room for kpo's bookkeeping (the API server allows %d bytes "
                       "in all), so kpo keeps none on it", body.metadata.namespace, body.metadata.name,
                       ANNOTATIONS_LIMIT_BYTES)


_OVERSIZED = _Oversized()


def fits(body: kopf.Body, patch: kopf.Patch, write: Callable[[], None]) -> bool:
    """Run ``write`` (which adds annotations to ``patch``); undo it if the object's annotations would then pass the
    API server's limit, and say whether it stayed."""
    annotations = patch.setdefault("metadata", {}).setdefault("annotations", {})
    before = dict(annotations)
    write()
    if annotations_size(annotations_after(body.metadata.annotations, annotations)) <= ANNOTATIONS_LIMIT_BYTES:
        return True
    annotations.clear()
    annotations.update(before)
    if not annotations:
        del patch["metadata"]["annotations"]
        if not patch["metadata"]:
            del patch["metadata"]
    _OVERSIZED.warn(body)
    return False


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
        if self.legacy_annotation in body.metadata.annotations:
            patch.metadata.annotations[self.legacy_annotation] = None

        def write() -> None:
            patch.metadata.annotations[self.annotation] = essence_digest(essence)

        fits(body, patch, write)


class BoundedAnnotationsProgressStorage(kopf.AnnotationsProgressStorage):
    """Kopf's progress records as annotations, written only when they fit (see the module text)."""

    def store(self, *, key: Any, record: Any, body: kopf.Body, patch: kopf.Patch) -> None:
        fits(body, patch, lambda: super(BoundedAnnotationsProgressStorage, self).store(
            key=key, record=record, body=body, patch=patch))

    def touch(self, *, body: kopf.Body, patch: kopf.Patch, value: str | None) -> None:
        fits(body, patch, lambda: super(BoundedAnnotationsProgressStorage, self).touch(
            body=body, patch=patch, value=value))
