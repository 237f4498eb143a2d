"""Resolve the Secret references of the operator's Kafka connections to literal credentials.

Only the Secrets the configuration names are read, one key at a time, so the Helm chart can grant ``get`` on exactly
those Secrets (``resourceNames``) and nothing else.
"""

from __future__ import annotations

import base64

from kubernetes import client

from kpo.config import SecretKeyRef


def read_secret_key(core: client.CoreV1Api, ref: SecretKeyRef, default_namespace: str) -> str:
    secret = core.read_namespaced_secret(ref.name, ref.namespace or default_namespace)
    data = secret.data or {}
    if ref.key not in data:
        raise KeyError(f"Secret {ref.namespace or default_namespace}/{ref.name} has no key {ref.key!r}")
    return base64.b64decode(data[ref.key]).decode()
