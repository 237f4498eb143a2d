"""The Spark Operator stand-in enforces and reports what the real Kubeflow Spark Operator does: one test per rule,
each naming the real operator's source it comes from (see e2e/spark_harness.py). The webhook's rules are checked
through the real API server (a refused application is never stored); the state walks run real spark-submits and
driver pods on the node. The first tests need no test bed: they check the stand-in's own naming and mapping."""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from e2e.conftest import SESSION
from e2e.kube_support import wait_until
from e2e.node_support import PLANNER_ACCOUNT, planner_service_account
from e2e.spark_harness import (
    DENIED_SPARK_CONF,
    GROUP,
    PLURAL,
    VERSION,
    SparkOperatorHarness,
    driver_state,
    namespace_matches,
    running_harness,
    ui_service_name,
)
from kpo_testbed.node import NodeImages

LABEL = "kpo.dev/e2e-spark-harness"
SELECTOR = f"{LABEL}={SESSION}"


# --------------------------------------------------------------------------------------------- no bed needed

def test_the_ui_service_name_is_truncated_and_hashed_past_63() -> None:
    """pkg/util/sparkapplication.go, GetDefaultUIServiceName / generateName."""
    assert ui_service_name("drain-plan-1-1") == "drain-plan-1-1-ui-svc"
    long = ui_service_name("a" * 60)
    assert len(long) <= 63 and long.startswith("a" * 47 + "-") and long.endswith("-ui-svc")


def test_namespaces_listed_or_selected_or_all() -> None:
    """pkg/util/namespace.go, NamespaceMatcher."""
    assert namespace_matches("x", {}, [], "")
    assert namespace_matches("jobs", {}, ["jobs"], "")
    assert not namespace_matches("other", {}, ["jobs"], "")
    assert namespace_matches("other", {"team": "a"}, ["jobs"], "team=a")
    assert not namespace_matches("other", {"team": "b"}, [], "team=a")


def _pod(phase: str, exit_code: int | None = None) -> client.V1Pod:
    statuses = None
    if exit_code is not None:
        statuses = [client.V1ContainerStatus(
            name="spark-kubernetes-driver", image="i", image_id="", ready=False, restart_count=0,
            state=client.V1ContainerState(terminated=client.V1ContainerStateTerminated(exit_code=exit_code)))]
    return client.V1Pod(status=client.V1PodStatus(phase=phase, container_statuses=statuses))


def test_driver_state_from_the_pod() -> None:
    """pkg/util/sparkapplication.go, GetDriverState: the driver container's exit decides a Running or Failed pod."""
    assert driver_state(_pod("Pending")) == "PENDING"
    assert driver_state(_pod("Running")) == "RUNNING"
    assert driver_state(_pod("Running", 0)) == "COMPLETED"
    assert driver_state(_pod("Running", 1)) == "FAILED"
    assert driver_state(_pod("Succeeded")) == "COMPLETED"
    assert driver_state(_pod("Failed", 0)) == "COMPLETED"
    assert driver_state(_pod("Failed", 2)) == "FAILED"
    assert driver_state(_pod("Unknown")) == "UNKNOWN"


# -------------------------------------------------------------------------------------------------- on the bed

@pytest.fixture(scope="module")
def harness(api_client: client.ApiClient, kubeconfig: Path) -> Iterator[SparkOperatorHarness]:
    with running_harness(api_client, kubeconfig, namespace_selector=SELECTOR) as running:
        yield running


@contextlib.contextmanager
def _namespace(api: client.ApiClient, *, watched: bool = True) -> Iterator[str]:
    core = client.CoreV1Api(api)
    name = f"e2eh-{SESSION}-{uuid.uuid4().hex[:6]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(
        name=name, labels={LABEL: SESSION} if watched else None)))
    planner_service_account(api, name)
    try:
        yield name
    finally:
        core.delete_namespace(name)


@pytest.fixture
def namespace(api_client: client.ApiClient, harness: SparkOperatorHarness) -> Iterator[str]:
    with _namespace(api_client) as name:
        yield name


def _app(name: str, image: str = "kpo/planner:none", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "SparkApplication", "metadata": {"name": name},
            "spec": {"type": "Python", "mode": "cluster", "image": image, "imagePullPolicy": "Never",
                     "mainApplicationFile": "local:///opt/kpo/planner-job.py", "sparkVersion": "4.3.0",
                     "restartPolicy": {"type": "Never"},
                     "driver": {"cores": 1, "coreRequest": "100m", "memory": "512m",
                                "serviceAccount": PLANNER_ACCOUNT},
                     "executor": {"instances": 1, "cores": 1, "coreRequest": "100m", "memory": "512m"},
                     **spec}}


def _create(api: client.ApiClient, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
    created: dict[str, Any] = client.CustomObjectsApi(api).create_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, body)
    return created


def _refusal(api: client.ApiClient, namespace: str, body: dict[str, Any]) -> str:
    with pytest.raises(ApiException) as refused:
        _create(api, namespace, body)
    assert refused.value.status == 403, refused.value
    return str(json.loads(refused.value.body)["message"])


def _walked_to(harness: SparkOperatorHarness, key: str, state: str, timeout: float) -> list[str]:
    """The states the stand-in saw the application in, once it has seen it in ``state``."""
    wait_until(lambda: harness.states.get(key, [])[-1:] == [state], timeout, f"{key} {state}")
    return list(harness.states[key])


def _state(api: client.ApiClient, namespace: str, name: str) -> dict[str, Any]:
    app = client.CustomObjectsApi(api).get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
    return dict((app.get("status") or {}).get("applicationState") or {})


@pytest.mark.parametrize("name", ["drain.dot-plan-1-1", "1-drain-plan-1-1", "x" * 64])
def test_the_webhook_refuses_a_name_that_is_no_dns1035_label(api_client: client.ApiClient, namespace: str,
                                                              name: str) -> None:
    """internal/webhook/sparkapplication_validator.go, validateName."""
    said = _refusal(api_client, namespace, _app(name))
    assert "denied the request" in said and "invalid SparkApplication name" in said, said


@pytest.mark.parametrize("key", sorted(DENIED_SPARK_CONF))
def test_the_webhook_refuses_conf_the_operator_manages(api_client: client.ApiClient, namespace: str,
                                                       key: str) -> None:
    """internal/webhook/sparkconf_validator.go, deniedSparkConfKeys."""
    said = _refusal(api_client, namespace, _app("conf", sparkConf={key: "x"}))
    assert said.endswith(f'denied the request: sparkConf key "{key}" is not allowed: {DENIED_SPARK_CONF[key]}'), said


def test_the_webhook_refuses_another_namespace_in_conf_and_admits_its_own(api_client: client.ApiClient,
                                                                          namespace: str) -> None:
    """internal/webhook/sparkconf_validator.go: spark.kubernetes.namespace must be the application's."""
    said = _refusal(api_client, namespace, _app("other", sparkConf={"spark.kubernetes.namespace": "elsewhere"}))
    assert "must equal the application namespace" in said, said
    _create(api_client, namespace, _app("own", suspend=True, sparkConf={"spark.kubernetes.namespace": namespace}))


def test_the_webhook_checks_a_changed_spec_on_update(api_client: client.ApiClient, namespace: str) -> None:
    """internal/webhook/sparkapplication_validator.go, ValidateUpdate."""
    _create(api_client, namespace, _app("changed", suspend=True))
    with pytest.raises(ApiException) as refused:
        client.CustomObjectsApi(api_client).patch_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, "changed", {"spec": {"sparkConf": {"spark.master": "local"}}})
    assert refused.value.status == 403 and "spark.master" in str(refused.value.body)


def test_an_unwatched_namespace_is_left_alone(api_client: client.ApiClient, harness: SparkOperatorHarness) -> None:
    """cmd/operator/controller/start.go --namespaces / --namespace-selector: no state, no submission."""
    with _namespace(api_client, watched=False) as elsewhere:
        _create(api_client, elsewhere, _app("ignored"))
        time.sleep(3)  # six passes of the stand-in
        assert _state(api_client, elsewhere, "ignored") == {}
        assert f"{elsewhere}/ignored" not in harness.runs


def test_a_failed_submission_is_submission_failed_then_failed_with_spark_submits_stderr(
        api_client: client.ApiClient, harness: SparkOperatorHarness, namespace: str) -> None:
    """controller.go submitSparkApplication and reconcileFailedSubmissionSparkApplication (restartPolicy Never);
    submission.go: the errorMessage is spark-submit's stderr. The driver's ServiceAccount does not exist, so the
    API server refuses the driver pod and spark-submit fails."""
    body = _app("nosa")
    body["spec"]["driver"]["serviceAccount"] = "nobody-here"
    _create(api_client, namespace, body)
    assert _walked_to(harness, f"{namespace}/nosa", "FAILED", 180) == ["", "SUBMISSION_FAILED", "FAILED"]
    error = _state(api_client, namespace, "nosa")["errorMessage"]
    assert error.startswith("failed to submit spark application: failed to run spark-submit: "), error[:300]
    assert "nobody-here" in error


def test_suspension_walks_suspending_suspended_resuming(api_client: client.ApiClient,
                                                        harness: SparkOperatorHarness, namespace: str) -> None:
    """controller.go: spec.suspend -> SUSPENDING -> SUSPENDED; cleared -> RESUMING -> submitted again (here the
    submission fails: no such ServiceAccount, which keeps the test short)."""
    body = _app("pause", suspend=True)
    body["spec"]["driver"]["serviceAccount"] = "nobody-here"
    _create(api_client, namespace, body)
    _walked_to(harness, f"{namespace}/pause", "SUSPENDED", 30)
    assert f"{namespace}/pause" not in harness.runs
    client.CustomObjectsApi(api_client).patch_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, "pause", {"spec": {"suspend": False}})
    walked = _walked_to(harness, f"{namespace}/pause", "FAILED", 180)
    assert walked == ["", "SUSPENDING", "SUSPENDED", "RESUMING", "SUBMISSION_FAILED", "FAILED"]


def test_a_failing_driver_is_failing_then_failed_with_its_exit_code(api_client: client.ApiClient,
                                                                   harness: SparkOperatorHarness, namespace: str,
                                                                   node_images: NodeImages) -> None:
    """controller.go updateDriverState: "driver container failed with ExitCode: N, Reason: R"; util
    DriverStateToApplicationState: FAILED driver -> FAILING; reconcileFailingSparkApplication -> FAILED. The planner
    job is given no arguments, so the driver exits non-zero. The UI Service is made on the SUBMITTED pass."""
    body = _app("broken", image=node_images.planner, arguments=[], sparkConf={"spark.ui.enabled": "false"})
    _create(api_client, namespace, body)
    walked = _walked_to(harness, f"{namespace}/broken", "FAILED", 300)
    assert walked[:2] == ["", "SUBMITTED"] and walked[-2:] == ["FAILING", "FAILED"], walked
    error = _state(api_client, namespace, "broken")["errorMessage"]
    assert error.startswith("driver container failed with ExitCode: ") and "Reason: Error" in error, error
    service = client.CoreV1Api(api_client).read_namespaced_service("broken-ui-svc", namespace)
    assert service.spec.selector == {"sparkoperator.k8s.io/app-name": "broken", "spark-role": "driver"}
    assert service.metadata.owner_references[0].name == "broken"
    assert service.spec.ports[0].port == 4040 and service.spec.ports[0].name == "spark-driver-ui-port"
