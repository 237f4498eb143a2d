"""The SparkApplication kpo writes and reads: names the Spark Operator's webhook accepts, ownership without a
cross-namespace ownerReference, the controller's states, bounded messages (:mod:`kpo.domain.spark_application`,
:func:`kpo.k8s.sparkapp.manifest`)."""

from __future__ import annotations

import pytest

from kpo.config import ResourcesSpec, SparkApplicationSettings
from kpo.domain.spark_application import (
    FINAL_STATES,
    LABEL_NAME,
    LABEL_NAMESPACE,
    LABEL_UID,
    MAX_MESSAGE_LENGTH,
    MAX_NAME_LENGTH,
    UI_SERVICE_SUFFIX,
    WAITING_STATES,
    Progress,
    application_name,
    bounded_message,
    is_dns1035_label,
    is_label_value,
    owner_labels,
    read_state,
    root_cause,
    selector,
    spark_conf_refusal,
)
from kpo.k8s.sparkapp import manifest

# Every state of api/v1beta2/sparkapplication_types.go (ApplicationStateType), "" being the new application.
CONTROLLER_STATES = ("", "SUBMITTED", "RUNNING", "COMPLETED", "FAILED", "SUBMISSION_FAILED", "PENDING_RERUN",
                     "INVALIDATING", "SUCCEEDING", "FAILING", "SUSPENDING", "SUSPENDED", "RESUMING", "UNKNOWN")

OWNER = {"apiVersion": "kpo.dev/v1alpha1", "kind": "PartitionReassignment",
         "metadata": {"name": "drain", "namespace": "team-a", "uid": "0b5c7e3e-1111-2222-3333-444455556666"}}


def _name(name: str, *, namespace: str = "team-a", app_namespace: str = "team-a", generation: int = 1,
          attempt: int = 1) -> str:
    return application_name(namespace=namespace, name=name, app_namespace=app_namespace, generation=generation,
                            attempt=attempt)


def test_a_plain_name_in_its_own_namespace_stays_readable() -> None:
    assert _name("drain") == "drain-plan-1-1"
    assert _name("drain", generation=3, attempt=2) == "drain-plan-3-2"


@pytest.mark.parametrize("name", ["drain.dot", "1-drain", "0", "a" * 253, "x" * 50, "a.b.c-d--e", "9.9.9",
                                  "drain-", "drain" + ".x" * 100])
def test_every_valid_resource_name_gives_a_dns1035_label_with_room_for_the_ui_service(name: str) -> None:
    derived = _name(name, generation=123456, attempt=99)
    assert is_dns1035_label(derived), derived
    assert len(derived) <= MAX_NAME_LENGTH
    assert is_dns1035_label(derived + UI_SERVICE_SUFFIX)
    assert derived.endswith("-plan-123456-99")


def test_a_derived_name_keeps_what_it_can_of_the_resource_name() -> None:
    assert _name("drain.dot").startswith("drain-dot-")
    assert _name("1-drain").startswith("kpo-1-drain-")


def test_names_that_derive_alike_still_differ_by_their_hash() -> None:
    assert _name("drain.dot") != _name("drain-dot", app_namespace="spark")
    assert _name("a" * 100) != _name("a" * 101)


def test_in_a_shared_namespace_same_named_resources_of_two_namespaces_get_distinct_names() -> None:
    mine = _name("drain", namespace="team-a", app_namespace="spark-jobs")
    theirs = _name("drain", namespace="team-b", app_namespace="spark-jobs")
    assert mine != theirs
    assert is_dns1035_label(mine) and is_dns1035_label(theirs)


def test_dns1035_rules() -> None:
    assert is_dns1035_label("a-1")
    for bad in ("1a", "a.b", "A", "a-", "-a", "", "a" * 64):
        assert not is_dns1035_label(bad), bad


def test_labels_carry_namespace_uid_generation_and_the_name_when_it_fits() -> None:
    labels = owner_labels(namespace="team-a", name="drain.dot", uid="u-1", generation=4)
    assert labels[LABEL_NAMESPACE] == "team-a"
    assert labels[LABEL_UID] == "u-1"
    assert labels[LABEL_NAME] == "drain.dot"
    assert labels["kpo.dev/generation"] == "4"
    long = owner_labels(namespace="team-a", name="a" * 64, uid="u-1", generation=4)
    assert LABEL_NAME not in long
    assert all(is_label_value(v) for v in long.values())
    assert selector("u-1", 4) == f"{LABEL_UID}=u-1,kpo.dev/generation=4"
    assert selector("u-1") == f"{LABEL_UID}=u-1"


def test_the_manifest_in_the_resources_namespace_is_owned_and_labelled() -> None:
    app = manifest(SparkApplicationSettings(), name="drain-plan-1-1", namespace="team-a", owner=OWNER,
                   input_uri="/in", output_uri="/out", generation=1)
    meta = app["metadata"]
    assert meta["ownerReferences"][0]["uid"] == OWNER["metadata"]["uid"]  # type: ignore[index]
    assert meta["labels"][LABEL_UID] == OWNER["metadata"]["uid"]  # type: ignore[index]
    assert meta["annotations"]["kpo.dev/partitionreassignment"] == "team-a/drain"
    assert app["spec"]["driver"]["labels"] == meta["labels"] == app["spec"]["executor"]["labels"]


def test_the_manifest_in_another_namespace_has_no_owner_reference() -> None:
    app = manifest(SparkApplicationSettings(namespace="spark-jobs"), name="x", namespace="spark-jobs", owner=OWNER,
                   input_uri="/in", output_uri="/out", generation=1)
    assert "ownerReferences" not in app["metadata"]
    assert app["metadata"]["labels"][LABEL_NAMESPACE] == "team-a"


def test_the_manifest_carries_no_conf_the_spark_operator_manages_and_the_core_request_as_a_field() -> None:
    settings = SparkApplicationSettings(driver=ResourcesSpec(core_request="100m"),
                                        executor=ResourcesSpec(instances=2, core_request="200m"))
    app = manifest(settings, name="x", namespace="team-a", owner=OWNER, input_uri="/in", output_uri="/out",
                   generation=1)
    assert app["spec"]["sparkConf"] == {}
    assert app["spec"]["driver"]["coreRequest"] == "100m"
    assert app["spec"]["executor"]["coreRequest"] == "200m"
    assert "coreRequest" not in manifest(SparkApplicationSettings(), name="x", namespace="team-a", owner=OWNER,
                                         input_uri="/i", output_uri="/o", generation=1)["spec"]["driver"]


def test_every_controller_state_is_known() -> None:
    assert set(CONTROLLER_STATES) == set(FINAL_STATES) | set(WAITING_STATES)


@pytest.mark.parametrize("state", [s for s in CONTROLLER_STATES if s not in FINAL_STATES])
def test_a_state_the_controller_leaves_is_waiting_until_the_timeout(state: str) -> None:
    reading = read_state(state, "", age_seconds=10, timeout_seconds=1800)
    assert reading.progress is Progress.WAITING, reading
    late = read_state(state, "", age_seconds=1801, timeout_seconds=1800)
    assert late.progress is Progress.TIMED_OUT
    assert "1800 s" in late.message and (state or "new") in late.message


def test_unknown_and_suspension_are_not_failures() -> None:
    for state in ("UNKNOWN", "SUSPENDING", "SUSPENDED", "RESUMING", "SUCCEEDING", "FAILING"):
        assert read_state(state, "", age_seconds=0, timeout_seconds=60).progress is Progress.WAITING


def test_final_states() -> None:
    assert read_state("COMPLETED", "", age_seconds=99999, timeout_seconds=1).progress is Progress.COMPLETED
    failed = read_state("FAILED", "driver container failed with ExitCode: 1, Reason: Error", age_seconds=0,
                        timeout_seconds=60)
    assert failed.progress is Progress.FAILED
    assert failed.message == "FAILED: driver container failed with ExitCode: 1, Reason: Error"
    assert read_state("SUBMISSION_FAILED", "", age_seconds=0, timeout_seconds=60).progress is Progress.FAILED


def test_a_state_kpo_does_not_know_is_waited_for() -> None:
    reading = read_state("SOMETHING_NEW", "", age_seconds=0, timeout_seconds=60)
    assert reading.progress is Progress.WAITING and "SOMETHING_NEW" in reading.message


STACK = "\n".join([
    "failed to submit spark application: failed to run spark-submit: 26/11/25 10:00:00 WARN NativeCodeLoader: "
    "Unable to load native-hadoop library",
    'Exception in thread "main" io.fabric8.kubernetes.client.KubernetesClientException: An error has occurred.',
    *["\tat io.fabric8.kubernetes.client.dsl.internal.OperationSupport.waitForResult(OperationSupport.java:520)"]
    * 80,
    "Caused by: java.net.UnknownHostException: kubernetes.default.svc: Name or service not known",
    *["\tat java.base/java.net.InetAddress.getAllByName0(InetAddress.java:1534)"] * 40,
])


def test_a_stack_trace_is_bounded_to_its_first_line_and_root_cause() -> None:
    assert len(STACK) > 6000
    message = bounded_message(STACK)
    assert len(message) <= MAX_MESSAGE_LENGTH
    assert message.startswith("failed to submit spark application")
    assert message.endswith("java.net.UnknownHostException: kubernetes.default.svc: Name or service not known")
    assert "\n" not in message


def test_root_cause_without_caused_by_is_the_first_named_exception() -> None:
    text = "some log line\nException in thread \"main\" java.lang.OutOfMemoryError: Java heap space\n\tat x.y(Z.java:1)"
    assert root_cause(text) == 'Exception in thread "main" java.lang.OutOfMemoryError: Java heap space'
    assert root_cause("just words\nmore") == "just words"


def test_a_short_message_is_left_alone_and_a_long_line_is_clipped() -> None:
    assert bounded_message("driver container failed with ExitCode: 1, Reason: Error") == \
        "driver container failed with ExitCode: 1, Reason: Error"
    clipped = bounded_message("x" * 1000)
    assert len(clipped) == MAX_MESSAGE_LENGTH and clipped.endswith("…")


@pytest.mark.parametrize("key", ["spark.master", "spark.kubernetes.driver.master", "spark.kubernetes.container.image",
                                 "spark.kubernetes.authenticate.driver.serviceAccountName",
                                 "spark.kubernetes.authenticate.executor.oauthTokenFile"])
def test_conf_the_spark_operator_manages_is_refused_in_its_words(key: str) -> None:
    refusal = spark_conf_refusal({"spark.ui.enabled": "false", key: "x"}, "team-a")
    assert refusal is not None and refusal.startswith(f"sparkConf key {key!r} is not allowed: ")
    with pytest.raises(ValueError, match="is not allowed"):
        SparkApplicationSettings(spark_conf={key: "x"})


def test_the_namespace_conf_must_name_the_applications_namespace() -> None:
    assert spark_conf_refusal({"spark.kubernetes.namespace": "team-a"}, "team-a") is None
    refusal = spark_conf_refusal({"spark.kubernetes.namespace": "other"}, "team-a")
    assert refusal is not None and "must equal the application namespace 'team-a'" in refusal
    assert spark_conf_refusal({"spark.sql.shuffle.partitions": "8"}, "team-a") is None


def test_a_few_short_lines_are_kept_whole_on_one_line() -> None:
    text = ("the planning job exited with code 1 without writing metrics.json; last output: Error occurred during "
            "initialization of VM\nToo small initial heap\n")
    assert bounded_message(text) == ("the planning job exited with code 1 without writing metrics.json; last output: "
                                     "Error occurred during initialization of VM / Too small initial heap")
