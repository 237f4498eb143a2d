"""Kopf's diff base as a digest: the same answers Kopf's full copy gives (new, unchanged, changed), in 64 characters."""

from __future__ import annotations

import copy
from typing import Any

import kopf

from kpo.persistence import (
    BoundedAnnotationsProgressStorage,
    DigestDiffBaseStorage,
    annotations_after,
    annotations_size,
    essence_digest,
)


def body(partitions: int = 3, labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None,
         phase: str = "Executing") -> kopf.Body:
    return kopf.Body({
        "apiVersion": "kpo.dev/v1alpha1", "kind": "PartitionReassignment",
        "metadata": {"name": "big", "namespace": "ns", "uid": "u", "resourceVersion": "7",
                     "labels": labels or {}, "annotations": annotations or {}},
        "spec": {"partitions": [{"topic": "t", "partition": p, "replicas": [1, 2, 3]} for p in range(partitions)]},
        "status": {"phase": phase},
    })


def stored(storage: DigestDiffBaseStorage, of: kopf.Body) -> dict[str, Any]:
    patch = kopf.Patch()
    storage.store(body=of, patch=patch, essence=storage.build(body=of))
    return dict(patch.get("metadata", {}).get("annotations", {}))


def test_a_resource_never_handled_has_no_diff_base() -> None:
    assert DigestDiffBaseStorage().fetch(body=body()) is None


def test_the_stored_annotation_is_a_digest_whatever_the_spec_size() -> None:
    storage = DigestDiffBaseStorage()
    annotations = stored(storage, body(20_000))
    assert list(annotations) == ["kpo.dev/last-handled-digest"]
    assert len(annotations["kpo.dev/last-handled-digest"]) == 64


def test_an_unchanged_object_reads_back_as_its_own_essence() -> None:
    storage = DigestDiffBaseStorage()
    digest = stored(storage, body())["kpo.dev/last-handled-digest"]
    # Status, resourceVersion and kpo's own annotations are not part of the essence.
    later = body(annotations={"kpo.dev/last-handled-digest": digest, "kpo.dev/partitionreassignment_delete": "{}"},
                 phase="Succeeded")
    assert storage.fetch(body=later) == storage.build(body=later)


def test_a_changed_spec_or_label_reads_as_changed() -> None:
    storage = DigestDiffBaseStorage()
    digest = stored(storage, body())["kpo.dev/last-handled-digest"]
    for changed in (body(4, annotations={"kpo.dev/last-handled-digest": digest}),
                    body(labels={"team": "a"}, annotations={"kpo.dev/last-handled-digest": digest})):
        fetched = storage.fetch(body=changed)
        assert fetched is not None and fetched != storage.build(body=changed)


def test_storing_removes_the_full_copy_earlier_versions_kept() -> None:
    annotations = stored(DigestDiffBaseStorage(),
                         body(annotations={"kpo.dev/last-handled-configuration": '{"spec": {}}'}))
    assert annotations["kpo.dev/last-handled-configuration"] is None


def test_the_digest_ignores_key_order() -> None:
    essence = {"spec": {"a": 1, "b": [1, 2]}, "metadata": {"labels": {"x": "y"}}}
    reordered = {"metadata": {"labels": {"x": "y"}}, "spec": {"b": [1, 2], "a": 1}}
    assert essence_digest(essence) == essence_digest(copy.deepcopy(reordered))


FULL = 262_144 - len("big") - 20  # a user annotation that leaves 20 bytes of the API server's limit


def test_a_digest_that_would_pass_the_annotation_limit_is_not_written() -> None:
    storage = DigestDiffBaseStorage()
    assert stored(storage, body(annotations={"big": "x" * FULL})) == {}
    assert list(stored(storage, body(annotations={"big": "x" * (FULL - 91)}))) == ["kpo.dev/last-handled-digest"]


def test_a_skipped_digest_leaves_the_rest_of_the_patch_alone() -> None:
    storage = DigestDiffBaseStorage()
    of = body(annotations={"big": "x" * FULL, "kpo.dev/last-handled-configuration": "{}"})
    patch = kopf.Patch()
    storage.store(body=of, patch=patch, essence=storage.build(body=of))
    # The legacy copy is still removed: a removal only ever shrinks the annotations.
    assert dict(patch["metadata"]["annotations"]) == {"kpo.dev/last-handled-configuration": None}


def test_progress_records_are_written_only_when_they_fit() -> None:
    storage = BoundedAnnotationsProgressStorage(prefix="kpo.dev")
    record: Any = {"started": "2026-11-26T00:00:00", "retries": 1}
    roomy, full = kopf.Patch(), kopf.Patch()
    storage.store(key=kopf.HandlerId("kpr_delete"), record=record, body=body(), patch=roomy)
    storage.store(key=kopf.HandlerId("kpr_delete"), record=record, body=body(annotations={"big": "x" * FULL}),
                  patch=full)
    assert "kpo.dev/kpr_delete" in roomy["metadata"]["annotations"]
    assert full == {}
    storage.touch(body=body(annotations={"big": "x" * FULL}), patch=full, value="2026")
    assert full == {}


def test_the_size_counts_keys_and_values_after_the_patch() -> None:
    assert annotations_size({"ab": "cde"}) == 5
    assert annotations_after({"a": "1", "b": "2"}, {"a": None, "c": "3"}) == {"b": "2", "c": "3"}
