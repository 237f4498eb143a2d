"""A planning SparkApplication as kpo names, labels and reads it: pure rules, set by the Kubeflow Spark Operator.

Why these rules, each from the Spark Operator's own source (github.com/kubeflow/spark-operator, v1beta2):

- **Names.** Its admission webhook refuses a SparkApplication whose name is not a DNS-1035 label
  (``internal/webhook/sparkapplication_validator.go``, ``validateName``), because the controller names a Service
  after it: ``<app>-ui-svc`` (``pkg/util/sparkapplication.go``, ``GetDefaultUIServiceName``). A PartitionReassignment
  name is a DNS-1123 subdomain (dots, up to 253 characters, may start with a digit), so kpo cannot use it as it is.
  :func:`application_name` keeps the readable ``<name>-plan-<generation>-<attempt>`` when that is a DNS-1035 label
  short enough to take ``-ui-svc`` within 63 characters and the application lives next to its resource; otherwise
  it derives a label from the name and appends a hash of ``<namespace>/<name>``, so two resources that share a
  SparkApplication namespace never share a name.
- **Ownership.** An ownerReference cannot cross namespaces (the garbage collector deletes the dependent:
  ``OwnerRefInvalidNamespace``), and the Helm chart puts SparkApplications in the release namespace by default. So a
  SparkApplication names its resource by labels (namespace, uid, and the name when it fits a label value) plus an
  annotation with ``<namespace>/<name>``; kpo finds its applications by uid and generation and deletes them itself
  (the resource's finalizer). An ownerReference is added only within one namespace, as a second safety.
- **States.** The controller's state machine (``internal/controller/sparkapplication/controller.go``,
  ``api/v1beta2/sparkapplication_types.go``): "" (new) -> SUBMITTED -> RUNNING -> SUCCEEDING -> COMPLETED, or
  FAILING -> FAILED, or SUBMISSION_FAILED -> FAILED; PENDING_RERUN and INVALIDATING on reruns; UNKNOWN while it
  cannot read the driver pod's phase (it keeps re-checking); SUSPENDING -> SUSPENDED -> RESUMING with
  ``spec.suspend``. Only COMPLETED, FAILED and SUBMISSION_FAILED end an application kpo writes (``restartPolicy:
  Never``: no rerun, no retried submission); everything else is waiting, bounded by kpo's own timeout.
- **Messages.** ``errorMessage`` of a failed submission is spark-submit's whole stderr (``submission.go``: "failed to
  run spark-submit: <stderr>"), thousands of characters of Java stack trace. :func:`bounded_message` keeps its first
  line and its root cause; the whole text goes to the operator's log.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

#: The suffix of the UI Service the Spark Operator creates per application (GetDefaultUIServiceName).
UI_SERVICE_SUFFIX = "-ui-svc"
#: A DNS-1035 label is at most 63 characters; kpo leaves room for the UI Service's suffix.
MAX_NAME_LENGTH = 63 - len(UI_SERVICE_SUFFIX)

LABEL_NAME = "kpo.dev/partitionreassignment"
LABEL_NAMESPACE = "kpo.dev/partitionreassignment-namespace"
LABEL_UID = "kpo.dev/partitionreassignment-uid"
LABEL_GENERATION = "kpo.dev/generation"
ANNOTATION_OWNER = "kpo.dev/partitionreassignment"

#: The sparkConf keys the Spark Operator's admission webhook refuses, and why (internal/webhook/sparkconf_validator.go,
#: deniedSparkConfKeys); it also refuses ``spark.kubernetes.namespace`` unless it is the application's namespace.
DENIED_SPARK_CONF: Mapping[str, str] = {
    "spark.kubernetes.authenticate.driver.serviceAccountName": "configure the service account via the CRD spec instead",
    "spark.kubernetes.authenticate.executor.serviceAccountName":
        "configure the service account via the CRD spec instead",
    **dict.fromkeys((f"spark.kubernetes.authenticate.{who}{what}" for who in ("", "driver.", "executor.")
                     for what in ("oauthTokenFile", "oauthToken")),
                    "authentication credentials are managed by the operator"),
    "spark.master": "this value is managed by the operator",
    "spark.kubernetes.driver.master": "this value is managed by the operator",
    "spark.kubernetes.container.image": "use the image field on the CRD instead",
    "spark.kubernetes.driver.container.image": "use the image field on the CRD instead",
    "spark.kubernetes.executor.container.image": "use the image field on the CRD instead",
}
NAMESPACE_CONF = "spark.kubernetes.namespace"


def spark_conf_refusal(spark_conf: Mapping[str, str], namespace: str) -> str | None:
    """Why the Spark Operator's webhook would refuse ``spark_conf`` for an application in ``namespace``, in its own
    words (``sparkConf key "<key>" is not allowed: <why>``), or None."""
    for key, value in sorted(spark_conf.items()):
        if key in DENIED_SPARK_CONF:
            return f"sparkConf key {key!r} is not allowed: {DENIED_SPARK_CONF[key]}"
        if key == NAMESPACE_CONF and value != namespace:
            return (f"sparkConf key {key!r} is not allowed: must equal the application namespace {namespace!r}, "
                    f"got {value!r}")
    return None


_DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def is_dns1035_label(name: str) -> bool:
    """Kubernetes' IsDNS1035Label: lower-case letters, digits and '-', starting with a letter, at most 63."""
    return len(name) <= 63 and bool(_DNS1035_LABEL.match(name))


def is_label_value(value: str) -> bool:
    return len(value) <= 63 and bool(_LABEL_VALUE.match(value))


def _owner_digest(namespace: str, name: str) -> str:
    return hashlib.sha256(f"{namespace}/{name}".encode()).hexdigest()[:8]


def application_name(*, namespace: str, name: str, app_namespace: str, generation: int, attempt: int) -> str:
    """The SparkApplication's name for attempt ``attempt`` of generation ``generation`` of resource
    ``namespace/name``, created in ``app_namespace``: a DNS-1035 label of at most :data:`MAX_NAME_LENGTH`."""
    suffix = f"-plan-{generation}-{attempt}"
    plain = f"{name}{suffix}"
    if app_namespace == namespace and is_dns1035_label(plain) and len(plain) <= MAX_NAME_LENGTH:
        return plain
    tail = f"-{_owner_digest(namespace, name)}{suffix}"
    stem = re.sub(r"-{2,}", "-", re.sub(r"[^a-z0-9]+", "-", name.lower())).strip("-")
    if not stem[:1].isalpha():
        stem = f"kpo-{stem}".rstrip("-")
    return f"{stem[:max(MAX_NAME_LENGTH - len(tail), 1)].rstrip('-')}{tail}"


def owner_labels(*, namespace: str, name: str, uid: str, generation: int) -> dict[str, str]:
    """The labels that tie a SparkApplication (and its driver and executor pods) to its PartitionReassignment.
    The name is left out when it is no valid label value (longer than 63); the annotation carries it always."""
    labels = {LABEL_NAMESPACE: namespace, LABEL_UID: uid, LABEL_GENERATION: str(generation),
              "app.kubernetes.io/managed-by": "kpo"}
    if is_label_value(name):
        labels[LABEL_NAME] = name
    return labels


def owner_annotations(*, namespace: str, name: str) -> dict[str, str]:
    return {ANNOTATION_OWNER: f"{namespace}/{name}"}


def selector(uid: str, generation: int | None = None) -> str:
    """The label selector of a resource's SparkApplications, of one generation or all."""
    return f"{LABEL_UID}={uid}" + (f",{LABEL_GENERATION}={generation}" if generation is not None else "")


class Progress(StrEnum):
    WAITING = "Waiting"
    COMPLETED = "Completed"
    FAILED = "Failed"
    TIMED_OUT = "TimedOut"


#: The states that end an application kpo writes (restartPolicy Never), and what each means.
FINAL_STATES: Mapping[str, Progress] = {
    "COMPLETED": Progress.COMPLETED,
    "FAILED": Progress.FAILED,
    "SUBMISSION_FAILED": Progress.FAILED,
}

#: Every other state of the controller, and what kpo says while waiting in it.
WAITING_STATES: Mapping[str, str] = {
    "": "waiting for the Spark Operator to submit it",
    "SUBMITTED": "submitted, the driver is not running yet",
    "RUNNING": "the driver is running",
    "SUCCEEDING": "the driver completed, the Spark Operator is finishing it",
    "FAILING": "the driver failed, the Spark Operator is finishing it",
    "PENDING_RERUN": "waiting for a rerun",
    "INVALIDATING": "being invalidated for a rerun",
    "UNKNOWN": "the Spark Operator cannot read the driver pod's phase and keeps checking",
    "SUSPENDING": "being suspended (spec.suspend)",
    "SUSPENDED": "suspended (spec.suspend): it runs again once spec.suspend is false",
    "RESUMING": "being resumed",
}


@dataclass(frozen=True)
class Reading:
    progress: Progress
    message: str


def read_state(state: str, error_message: str, *, age_seconds: float, timeout_seconds: float) -> Reading:
    """What an application in ``state`` means for its plan, ``age_seconds`` after it was created."""
    final = FINAL_STATES.get(state)
    if final is Progress.COMPLETED:
        return Reading(final, "COMPLETED")
    if final is Progress.FAILED:
        return Reading(final, f"{state}: {error_message or 'the Spark Operator gave no errorMessage'}")
    doing = WAITING_STATES.get(state, "a state kpo does not know; waiting")
    if age_seconds > timeout_seconds:
        return Reading(Progress.TIMED_OUT, f"not finished after {int(timeout_seconds)} s (planner.sparkApplication."
                                           f"timeoutSeconds), still {state or 'new'}: {doing}")
    return Reading(Progress.WAITING, f"{state or 'new'}: {doing}")


#: Condition messages stay readable: a root cause, not a stack trace.
MAX_MESSAGE_LENGTH = 400
_FIRST_LINE_LENGTH = 160
_EXCEPTION = re.compile(r"\b[\w.$]*(Exception|Error)\b")


def root_cause(text: str) -> str:
    """The line of a (Java) error text that names the cause: the last ``Caused by:``, else the first line that names
    an exception, else the first line."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    causes = [line.removeprefix("Caused by:").strip() for line in lines if line.startswith("Caused by:")]
    if causes:
        return causes[-1]
    named = [line for line in lines if _EXCEPTION.search(line) and not line.startswith("at ")]
    return named[0] if named else (lines[0] if lines else "")


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "…"


def bounded_message(text: str, limit: int = MAX_MESSAGE_LENGTH) -> str:
    """``text`` on one line when it fits in ``limit``; otherwise its first line and its root cause, within it."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    joined = " / ".join(lines)
    if len(joined) <= limit:
        return joined
    first = lines[0]
    cause = root_cause(text)
    if not cause or cause == first:
        return _clip(first, limit)
    return _clip(f"{_clip(first, _FIRST_LINE_LENGTH)} … root cause: {cause}", limit)
