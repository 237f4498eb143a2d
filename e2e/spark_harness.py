"""A stand-in for the Kubeflow Spark Operator, the one stand-in of the test bed (its Go module cannot be had here).

It enforces what the real operator (github.com/kubeflow/spark-operator, v1beta2) enforces and reports what it
reports, so that kpo is judged the way the real operator would judge it. Each rule below names the source file of the
real operator it comes from; the code here is written from those facts, not copied.

- **Admission webhook** (``internal/webhook/sparkapplication_validator.go``, ``sparkconf_validator.go``; the chart
  enables it by default): a real ValidatingWebhookConfiguration the API server calls over TLS, so a refused
  SparkApplication is never stored and its creator gets the webhook's message with HTTP 403, as from the real one.
  It refuses a name that is not a DNS-1035 label (``validateName``), the sparkConf keys the operator manages
  (``deniedSparkConfKeys``: the master, the images, service accounts, OAuth credentials) and a
  ``spark.kubernetes.namespace`` other than the application's namespace. On update it checks the name always and the
  spec only when the spec changed (``ValidateUpdate``).
- **Namespaces** (``cmd/operator/controller/start.go`` ``--namespaces`` / ``--namespace-selector``,
  ``pkg/util/namespace.go`` ``NamespaceMatcher``): it acts on applications of the listed namespaces or of namespaces
  whose labels match the selector, all namespaces when given neither; others are left without a status.
- **Submission** (``internal/controller/sparkapplication/submission.go``): ``spark-submit`` with ``--master`` the API
  server, ``--deploy-mode`` the spec's mode, ``--name`` the application's, ``spark.kubernetes.namespace``, the image
  and pull policy, ``spark.kubernetes.submission.waitAppCompletion=false``, the user's sparkConf, the driver pod name
  ``<app>-driver``, driver/executor cores, ``coreRequest`` (``request.cores``), memory, instances, labels (plus
  ``sparkoperator.k8s.io/app-name``, ``launched-by-spark-operator`` and ``submission-id``) and the driver's
  ServiceAccount. A failed spark-submit is ``SUBMISSION_FAILED`` with ``errorMessage`` "failed to submit spark
  application: failed to run spark-submit: <its whole stderr>" (``submitSparkApplication``), as the real one writes.
- **UI Service** (``web_ui.go``, ``driveringress.go``, ``pkg/util/sparkapplication.go`` ``GetDefaultUIServiceName``):
  on each SUBMITTED pass, a ClusterIP Service ``<app>-ui-svc`` (name + md5 hash when longer than 63) selecting the
  driver, port 4040 ``spark-driver-ui-port``, owned by the application; ``status.driverInfo.webUIServiceName``,
  ``webUIPort``, ``webUIAddress``. When the API server refuses the Service, the pass fails before the status is
  written: the application stays SUBMITTED, as with the real one.
- **States** (``controller.go`` ``Reconcile``, ``updateDriverState``; ``pkg/util/sparkapplication.go``
  ``GetDriverState``, ``DriverStateToApplicationState``): "" -> SUBMITTED | SUBMISSION_FAILED; SUBMITTED, RUNNING and
  UNKNOWN follow the driver pod: Pending -> SUBMITTED, Running -> RUNNING, Succeeded (or a container that exited 0) ->
  SUCCEEDING, Failed -> FAILING with ``errorMessage`` "driver container failed with ExitCode: N, Reason: R", any other
  phase -> UNKNOWN; a driver pod missing after the 10 s creation grace period -> FAILING "driver pod not found".
  SUCCEEDING -> COMPLETED and FAILING, SUBMISSION_FAILED -> FAILED (``restartPolicy: Never``: ``ShouldRetry`` is
  false); ``spec.suspend`` -> SUSPENDING -> (driver pod and UI Service deleted) SUSPENDED -> (suspend cleared)
  RESUMING -> submitted again. Not walked: PENDING_RERUN and INVALIDATING (reruns, only with restartPolicy OnFailure
  or Always, which kpo never writes).

One test-bed fact, not a rule of the operator, kept out of the SparkApplication: the harness runs on the host, so its
``--master`` is the API server's loopback address (the real one reads KUBERNETES_SERVICE_HOST/PORT in its pod). The
driver finds the API server at ``kubernetes.default.svc`` through the bed's cluster DNS (CoreDNS, testbed/node), as
in a cluster. Executors reach the driver at its pod IP (the planner image's entry point advertises it).
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import hashlib
import http.server
import json
import logging
import os
import re
import ssl
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from kpo.planning.spark.runner import pyspark_home

GROUP, VERSION, PLURAL = "sparkoperator.k8s.io", "v1beta2", "sparkapplications"
CRD_FILE = Path(__file__).resolve().parent / "sparkoperator" / "sparkapplication-crd.yaml"
WEBHOOK_NAME = "validate-sparkapplication.sparkoperator.k8s.io"
WEBHOOK_PATH = "/validate-sparkoperator-k8s-io-v1beta2-sparkapplication"

# pkg/common/spark.go
LABEL_APP_NAME = "sparkoperator.k8s.io/app-name"
LABEL_LAUNCHED_BY = "sparkoperator.k8s.io/launched-by-spark-operator"
LABEL_SUBMISSION_ID = "sparkoperator.k8s.io/submission-id"
LABEL_CREATED_BY = "sparkoperator.k8s.io/created-by-spark-operator"
DRIVER_CONTAINER = "spark-kubernetes-driver"
UI_PORT, UI_PORT_NAME = 4040, "spark-driver-ui-port"
# cmd/operator/controller/start.go: --driver-pod-creation-grace-period
DRIVER_POD_CREATION_GRACE = dt.timedelta(seconds=10)

# internal/webhook/sparkconf_validator.go: deniedSparkConfKeys
DENIED_SPARK_CONF = {
    "spark.kubernetes.authenticate.driver.serviceAccountName": "configure the service account via the CRD spec instead",
    "spark.kubernetes.authenticate.executor.serviceAccountName":
        "configure the service account via the CRD spec instead",
    "spark.kubernetes.authenticate.oauthTokenFile": "authentication credentials are managed by the operator",
    "spark.kubernetes.authenticate.oauthToken": "authentication credentials are managed by the operator",
    "spark.kubernetes.authenticate.driver.oauthTokenFile": "authentication credentials are managed by the operator",
    "spark.kubernetes.authenticate.driver.oauthToken": "authentication credentials are managed by the operator",
    "spark.kubernetes.authenticate.executor.oauthTokenFile": "authentication credentials are managed by the operator",
    "spark.kubernetes.authenticate.executor.oauthToken": "authentication credentials are managed by the operator",
    "spark.master": "this value is managed by the operator",
    "spark.kubernetes.driver.master": "this value is managed by the operator",
    "spark.kubernetes.container.image": "use the image field on the CRD instead",
    "spark.kubernetes.driver.container.image": "use the image field on the CRD instead",
    "spark.kubernetes.executor.container.image": "use the image field on the CRD instead",
}

TERMINATED = {"COMPLETED", "FAILED"}
log = logging.getLogger(__name__)


def _now() -> str:
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def _parse_time(value: str | None) -> dt.datetime | None:
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None


# ----------------------------------------------------------------------------------------------- webhook rules

def dns1035_errors(name: str) -> list[str]:
    """k8s.io/apimachinery's IsDNS1035Label, in its words."""
    errors = []
    if len(name) > 63:
        errors.append("must be no more than 63 characters")
    if not re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", name):
        errors.append("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
                      "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', "
                      "regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')")
    return errors


def admission_refusal(app: Mapping[str, Any], old: Mapping[str, Any] | None = None) -> str | None:
    """Why the real webhook refuses ``app`` (created, or updated from ``old``), in its words; None if it admits it."""
    meta, spec = app.get("metadata") or {}, app.get("spec") or {}
    name = str(meta.get("name") or "")
    if errors := dns1035_errors(name):
        return f'invalid SparkApplication name "{name}": {", ".join(errors)}'
    if old is not None and (old.get("spec") or {}) == spec:
        return None
    for key, value in (spec.get("sparkConf") or {}).items():
        if key in DENIED_SPARK_CONF:
            return f'sparkConf key "{key}" is not allowed: {DENIED_SPARK_CONF[key]}'
        if key == "spark.kubernetes.namespace" and value != meta.get("namespace"):
            return (f'sparkConf key "{key}" is not allowed: must equal the application namespace '
                    f'"{meta.get("namespace")}", got "{value}"')
    return None


def ui_service_name(app_name: str) -> str:
    """GetDefaultUIServiceName: ``<app>-ui-svc``, or a truncated name with an md5 hash when longer than 63."""
    preferred = f"{app_name}-ui-svc"
    if len(preferred) <= 63:
        return preferred
    digest = hashlib.md5(preferred.encode()).hexdigest()[:8]  # the real operator names it so; not for security
    return f"{app_name[:63 - len('ui-svc') - 10]}-{digest}-ui-svc"


def namespace_matches(namespace: str, labels: Mapping[str, str], namespaces: list[str], selector: str) -> bool:
    """NamespaceMatcher: the listed namespaces or those whose labels match ``selector`` (``k=v,k2=v2``); every
    namespace when neither is given."""
    if not namespaces and not selector:
        return True
    if namespace in namespaces:
        return True
    if selector:
        wanted = dict(part.split("=", 1) for part in selector.split(","))
        return all(labels.get(k) == v for k, v in wanted.items())
    return False


# ------------------------------------------------------------------------------------------------ state machine

def driver_state(pod: client.V1Pod) -> str:
    """GetDriverState: the driver's state from its pod's phase and its driver container."""
    ended = _driver_terminated(pod)
    phase = pod.status.phase
    if phase == "Pending":
        return "PENDING"
    if phase == "Running":
        if ended is not None:
            return "COMPLETED" if ended.exit_code == 0 else "FAILED"
        return "RUNNING"
    if phase == "Succeeded":
        return "COMPLETED"
    if phase == "Failed":
        return "COMPLETED" if ended is not None and ended.exit_code == 0 else "FAILED"
    return "UNKNOWN"


#: DriverStateToApplicationState
APPLICATION_STATE_OF_DRIVER = {"PENDING": "SUBMITTED", "RUNNING": "RUNNING", "COMPLETED": "SUCCEEDING",
                               "FAILED": "FAILING"}


def _driver_terminated(pod: client.V1Pod) -> client.V1ContainerStateTerminated | None:
    for status in pod.status.container_statuses or []:
        if status.name == DRIVER_CONTAINER:
            return status.state.terminated if status.state else None
    return None


# ----------------------------------------------------------------------------------------------- submission

def submit_argv(app: dict[str, Any], master: str, driver_template: Path, submission_id: str) -> list[str]:
    """The spark-submit command the real operator builds (buildSparkSubmitArgs) for ``app``."""
    meta, spec = app["metadata"], app["spec"]
    driver, executor = spec.get("driver") or {}, spec.get("executor") or {}
    operator_labels = {LABEL_APP_NAME: meta["name"], LABEL_LAUNCHED_BY: "true", LABEL_SUBMISSION_ID: submission_id}
    conf: list[tuple[str, str]] = [
        ("spark.kubernetes.namespace", meta["namespace"]),
        ("spark.kubernetes.container.image", spec["image"]),
        ("spark.kubernetes.container.image.pullPolicy", spec.get("imagePullPolicy", "IfNotPresent")),
        ("spark.kubernetes.submission.waitAppCompletion", "false"),
        *[(str(k), str(v)) for k, v in (spec.get("sparkConf") or {}).items()],
        ("spark.kubernetes.driver.pod.name", f"{meta['name']}-driver"),
    ]
    for role, pod in (("driver", driver), ("executor", executor)):
        conf += [(f"spark.kubernetes.{role}.label.{k}", str(v)) for k, v in operator_labels.items()]
        if "cores" in pod:
            conf.append((f"spark.{role}.cores", str(pod["cores"])))
        if "coreRequest" in pod:
            conf.append((f"spark.kubernetes.{role}.request.cores", str(pod["coreRequest"])))
        if "memory" in pod:
            conf.append((f"spark.{role}.memory", str(pod["memory"])))
        if pod.get("serviceAccount"):
            conf.append((f"spark.kubernetes.authenticate.{role}.serviceAccountName", str(pod["serviceAccount"])))
        conf += [(f"spark.kubernetes.{role}.label.{k}", str(v)) for k, v in (pod.get("labels") or {}).items()]
    if "instances" in executor:
        conf.append(("spark.executor.instances", str(executor["instances"])))
    conf.append(("spark.kubernetes.driver.podTemplateFile", str(driver_template)))
    return [str(pyspark_home() / "bin" / "spark-submit"), "--master", f"k8s://{master}",
            "--deploy-mode", str(spec.get("mode", "cluster")), "--name", meta["name"],
            *[arg for k, v in conf for arg in ("--conf", f"{k}={v}")],
            str(spec["mainApplicationFile"]), *[str(a) for a in spec.get("arguments") or []]]


def driver_template(app: dict[str, Any]) -> dict[str, Any]:
    """The driver's pod template: owned by the SparkApplication, as the real operator's pod webhook makes it
    (internal/webhook/sparkpod_defaulter.go, addOwnerReference)."""
    meta = app["metadata"]
    owner = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "SparkApplication", "name": meta["name"],
             "uid": meta["uid"], "controller": True}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"ownerReferences": [owner]},
            "spec": {"containers": [{"name": DRIVER_CONTAINER}]}}


# ------------------------------------------------------------------------------------------------ the webhook

class _AdmissionHandler(http.server.BaseHTTPRequestHandler):
    #: Seconds a connection may stay silent (the API server gives the webhook 10 s).
    timeout = 15

    def setup(self) -> None:
        # The TLS handshake here, in the connection's own thread and under its timeout: done in accept (the default),
        # one client that connects and stays silent would stop the whole server, and every later admission call
        # would fail with "failed calling webhook".
        self.request.settimeout(self.timeout)
        self.request.do_handshake()
        super().setup()

    def do_POST(self) -> None:
        if getattr(self.server, "unanswered", False):
            self.server.dropped += 1  # type: ignore[attr-defined]
            self.close_connection = True  # a webhook pod going away: the API server reads EOF
            return
        review = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        request = review.get("request") or {}
        refusal = admission_refusal(request.get("object") or {}, request.get("oldObject")) \
            if request.get("operation") in ("CREATE", "UPDATE") else None
        response: dict[str, Any] = {"uid": request.get("uid"), "allowed": refusal is None}
        if refusal is not None:
            # controller-runtime's admission.Denied: 403 Forbidden with the validator's error.
            response["status"] = {"code": 403, "reason": "Forbidden", "message": refusal}
        body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                           "response": response}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        return


class _WebhookServer(http.server.ThreadingHTTPServer):
    #: Set while the webhook is "down": every call is dropped unanswered.
    unanswered = False
    #: How many calls were dropped, for a test to know that attempts went on.
    dropped = 0

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A connection that failed its handshake or timed out is the client's business, not a traceback on stderr.
        log.debug("webhook connection from %s failed", client_address, exc_info=True)


class AdmissionWebhook:
    """The validating webhook, served on loopback with its own CA and registered with the API server."""

    def __init__(self, api: client.ApiClient, scratch: Path, namespace_labels: Mapping[str, str]) -> None:
        self.admission = client.AdmissionregistrationV1Api(api)
        self.pki = scratch / "webhook-pki"
        self.namespace_labels = dict(namespace_labels)
        self.server = _WebhookServer(("127.0.0.1", 0), _AdmissionHandler)
        self._thread = threading.Thread(target=self.server.serve_forever, name="spark-webhook", daemon=True)

    def _certificates(self) -> bytes:
        self.pki.mkdir(parents=True, exist_ok=True)

        def openssl(*args: str) -> None:
            subprocess.run(["openssl", *args], cwd=self.pki, check=True, capture_output=True)
        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
                "-subj", "/CN=spark-webhook-ca")
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "tls.key", "-out", "tls.csr", "-subj",
                "/CN=spark-webhook")
        (self.pki / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
        openssl("x509", "-req", "-in", "tls.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial", "-out",
                "tls.crt", "-days", "2", "-extfile", "san.ext")
        return (self.pki / "ca.crt").read_bytes()

    def start(self) -> None:
        ca = self._certificates()
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.pki / "tls.crt", self.pki / "tls.key")
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True,
                                                 do_handshake_on_connect=False)
        self._thread.start()
        port = self.server.server_address[1]
        hook = client.V1ValidatingWebhook(
            name=WEBHOOK_NAME, admission_review_versions=["v1"], side_effects="None", failure_policy="Fail",
            match_policy="Exact", timeout_seconds=10,
            client_config=client.AdmissionregistrationV1WebhookClientConfig(
                url=f"https://127.0.0.1:{port}{WEBHOOK_PATH}", ca_bundle=base64.b64encode(ca).decode()),
            namespace_selector=client.V1LabelSelector(match_labels=self.namespace_labels or None),
            rules=[client.V1RuleWithOperations(api_groups=[GROUP], api_versions=[VERSION], resources=[PLURAL],
                                               operations=["CREATE", "UPDATE"])])
        config = client.V1ValidatingWebhookConfiguration(
            metadata=client.V1ObjectMeta(name=f"spark-operator-stand-in-{port}"), webhooks=[hook])
        self.name = str(self.admission.create_validating_webhook_configuration(config).metadata.name)

    @contextlib.contextmanager
    def unanswered(self) -> Iterator[None]:
        """The webhook registered but not answering (its pod restarting): with ``failurePolicy: Fail``, as the
        chart sets it, the API server refuses every SparkApplication with a 500 "failed calling webhook"."""
        self.server.unanswered = True
        try:
            yield
        finally:
            self.server.unanswered = False

    def stop(self) -> None:
        try:
            self.admission.delete_validating_webhook_configuration(self.name)
        except ApiException as exc:
            if exc.status != 404:
                raise
        self.server.shutdown()
        self.server.server_close()


# --------------------------------------------------------------------------------------------- the controller

class SparkOperatorHarness:
    """The controller and its webhook. ``namespaces`` and ``namespace_selector`` are the real operator's
    ``--namespaces`` and ``--namespace-selector`` (equality terms only); the webhook covers the selected
    namespaces, as the chart's does its job namespaces."""

    def __init__(self, api: client.ApiClient, kubeconfig: Path, *, namespaces: list[str] | None = None,
                 namespace_selector: str = "") -> None:
        self.custom = client.CustomObjectsApi(api)
        self.core = client.CoreV1Api(api)
        self.master = str(api.configuration.host)
        self.kubeconfig = kubeconfig
        self.namespaces = list(namespaces or [])
        self.selector = namespace_selector
        self.runs: list[str] = []
        self.executor_pods: dict[str, set[str]] = {}
        #: Every state each application was seen in by this controller, in order ("namespace/name": [...]).
        self.states: dict[str, list[str]] = {}
        self._busy: set[str] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="spark-operator-stand-in", daemon=True)
        self._scratch = Path(tempfile.mkdtemp(prefix="spark-operator-"))
        labels = dict(part.split("=", 1) for part in namespace_selector.split(",")) if namespace_selector else {}
        self.webhook = AdmissionWebhook(api, self._scratch, labels)

    def start(self) -> None:
        self.webhook.start()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.webhook.stop()

    # The controller-runtime reconcile loop, as a resync every half second.
    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                apps = self.custom.list_cluster_custom_object(GROUP, VERSION, PLURAL)["items"]
                labels = {ns.metadata.name: ns.metadata.labels or {} for ns in self.core.list_namespace().items}
                for app in apps:
                    meta = app["metadata"]
                    if namespace_matches(meta["namespace"], labels.get(meta["namespace"], {}), self.namespaces,
                                         self.selector):
                        self._reconcile(app)
            except ApiException as exc:
                log.info("spark operator stand-in: %s", exc.reason)
            self._stop.wait(0.5)

    def _key(self, app: Mapping[str, Any]) -> str:
        return f"{app['metadata']['namespace']}/{app['metadata']['name']}"

    def _reconcile(self, app: dict[str, Any]) -> None:
        key = self._key(app)
        if app["metadata"].get("deletionTimestamp"):
            return
        with self._lock:
            if key in self._busy:
                return
        status = app.get("status") or {}
        state = str((status.get("applicationState") or {}).get("state") or "")
        seen = self.states.setdefault(key, [])
        if not seen or seen[-1] != state:
            seen.append(state)
        suspend = bool((app.get("spec") or {}).get("suspend"))
        if suspend and state not in TERMINATED | {"SUSPENDED", "SUSPENDING"}:
            self._write(app, {"applicationState": {"state": "SUSPENDING"}})
        elif state in ("", "RESUMING"):
            self._submit_in_background(app)
        elif state in ("SUBMITTED", "RUNNING", "UNKNOWN"):
            self._follow_driver(app, status, ui_service=state == "SUBMITTED")
        elif state == "SUCCEEDING":
            self._write(app, {"applicationState": {"state": "COMPLETED"}})
        elif state == "FAILING":
            self._write(app, {"applicationState": {"state": "FAILED",
                                                    "errorMessage": status["applicationState"].get("errorMessage")}})
        elif state == "SUBMISSION_FAILED":
            self._write(app, {"applicationState": {"state": "FAILED",
                                                    "errorMessage": status["applicationState"].get("errorMessage")},
                              "terminationTime": _now()})
        elif state == "SUSPENDING":
            self._delete_resources(app, status)
            self._write(app, {"applicationState": {"state": "SUSPENDED", "errorMessage": None}, **_reset()})
        elif state == "SUSPENDED" and not suspend and self._resources_gone(app, status):
            self._write(app, {"applicationState": {"state": "RESUMING"}})
        elif state in TERMINATED:
            self._executors(app)

    def _write(self, app: Mapping[str, Any], status: dict[str, Any]) -> bool:
        meta = app["metadata"]
        # The Go status struct always carries driverInfo (a struct, not omitempty) and the CRD requires it; an empty
        # object in a merge patch keeps what is there.
        status = {"driverInfo": {}, **status}
        try:
            self.custom.patch_namespaced_custom_object_status(GROUP, VERSION, meta["namespace"], PLURAL,
                                                              meta["name"], {"status": status})
        except ApiException as exc:
            if exc.status != 404:
                raise
            return False  # the application is gone: nothing to report to
        return True

    # -------------------------------------------------------------------------------------------- submission

    def _submit_in_background(self, app: dict[str, Any]) -> None:
        key = self._key(app)
        with self._lock:
            self._busy.add(key)

        def run() -> None:
            try:
                if self._still_new(app):
                    self._submit(app)
            finally:
                with self._lock:
                    self._busy.discard(key)
        threading.Thread(target=run, daemon=True).start()

    def _still_new(self, app: Mapping[str, Any]) -> bool:
        """Whether ``app`` is still as listed. The resync lists every half second, so a list taken just before the
        previous submission wrote SUBMITTED can reach here after that submission let go of the key: submitting from
        it again would run spark-submit twice (its driver pod already exists). The real controller reconciles a key
        from its informer's cache, updated by the watch event of its own status write; a fresh read is the stand-in's
        equivalent."""
        meta = app["metadata"]
        try:
            now = self.custom.get_namespaced_custom_object(GROUP, VERSION, meta["namespace"], PLURAL, meta["name"])
        except ApiException as exc:
            if exc.status != 404:
                raise
            return False
        return bool(now["metadata"]["resourceVersion"] == meta["resourceVersion"])

    def _submit(self, app: dict[str, Any]) -> None:
        """submitSparkApplication: SUBMITTED, or SUBMISSION_FAILED with spark-submit's stderr."""
        meta, status = app["metadata"], app.get("status") or {}
        self.runs.append(self._key(app))
        submission_id = str(uuid.uuid4())
        template = self._scratch / f"{meta['uid']}-{submission_id}-driver.yaml"
        template.write_text(yaml.safe_dump(driver_template(app)))
        attempted = _now()
        # The image's Python runs the job: a PYSPARK_PYTHON of this host would be sent along to the driver pod.
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_")}
        env["KUBECONFIG"] = str(self.kubeconfig)
        done = subprocess.run(submit_argv(app, self.master, template, submission_id), env=env, capture_output=True,
                              text=True, check=False, timeout=300)
        template.unlink(missing_ok=True)
        common = {"submissionID": submission_id, "lastSubmissionAttemptTime": attempted,
                  "submissionAttempts": int(status.get("submissionAttempts") or 0) + 1,
                  "driverInfo": {"podName": f"{meta['name']}-driver"}}
        if done.returncode != 0:
            said = done.stderr
            error = "driver pod already exist" if "AlreadyExists" in said else \
                f"failed to run spark-submit: {said}" if said else f"spark-submit exited with {done.returncode}"
            self._write(app, {**common, "applicationState": {"state": "SUBMISSION_FAILED", "errorMessage":
                                                             f"failed to submit spark application: {error}"}})
            return
        self._write(app, {**common, "applicationState": {"state": "SUBMITTED", "errorMessage": None},
                          "executionAttempts": int(status.get("executionAttempts") or 0) + 1})

    # ---------------------------------------------------------------------------------------- the driver pod

    def _follow_driver(self, app: dict[str, Any], status: Mapping[str, Any], *, ui_service: bool) -> None:
        """updateSparkApplicationState (and, when SUBMITTED, the UI Service) then one status write."""
        meta = app["metadata"]
        state = status["applicationState"]["state"]
        pod_name = (status.get("driverInfo") or {}).get("podName") or f"{meta['name']}-driver"
        new: dict[str, Any] = {}
        try:
            pod: client.V1Pod | None = self.core.read_namespaced_pod(pod_name, meta["namespace"])
        except ApiException as exc:
            if exc.status != 404:
                raise
            pod = None
        if pod is None:
            attempted = _parse_time(status.get("lastSubmissionAttemptTime"))
            if state != "SUBMITTED" or attempted is None or \
                    dt.datetime.now(dt.UTC) - attempted > DRIVER_POD_CREATION_GRACE:
                new["applicationState"] = {"state": "FAILING", "errorMessage": "driver pod not found"}
                new["terminationTime"] = _now()
            else:
                return
        else:
            new["sparkApplicationId"] = (pod.metadata.labels or {}).get("spark-app-selector", "")
            driver = driver_state(pod)
            error = (status.get("applicationState") or {}).get("errorMessage")
            if driver in ("COMPLETED", "FAILED"):
                if not status.get("terminationTime"):
                    new["terminationTime"] = _now()
                if driver == "FAILED":
                    ended = _driver_terminated(pod)
                    if ended is None:
                        error = "driver container status missing"
                    elif ended.exit_code != 0:
                        error = f"driver container failed with ExitCode: {ended.exit_code}, Reason: {ended.reason}"
            new["applicationState"] = {"state": APPLICATION_STATE_OF_DRIVER.get(driver, "UNKNOWN"),
                                       "errorMessage": error}
            new["executorState"] = self._executors(app)
        if ui_service:
            try:
                new["driverInfo"] = {"podName": pod_name, **self._ui_service(app)}
            except ApiException as exc:
                # The real reconcile returns before writing the status: the application stays SUBMITTED.
                log.warning("spark operator stand-in: %s: failed to create web UI service: %s", self._key(app),
                            exc.reason)
                return
        self._write(app, new)

    def _ui_service(self, app: Mapping[str, Any]) -> dict[str, Any]:
        meta = app["metadata"]
        name = ui_service_name(meta["name"])
        service = client.V1Service(
            metadata=client.V1ObjectMeta(
                name=name, namespace=meta["namespace"], labels={LABEL_APP_NAME: meta["name"], LABEL_CREATED_BY: "true"},
                owner_references=[client.V1OwnerReference(api_version=f"{GROUP}/{VERSION}", kind="SparkApplication",
                                                          name=meta["name"], uid=meta["uid"], controller=True)]),
            spec=client.V1ServiceSpec(type="ClusterIP", selector={LABEL_APP_NAME: meta["name"], "spark-role": "driver"},
                                      ports=[client.V1ServicePort(name=UI_PORT_NAME, port=UI_PORT,
                                                                  target_port=UI_PORT)]))
        try:
            created = self.core.create_namespaced_service(meta["namespace"], service)
        except ApiException as exc:
            if exc.status != 409:
                raise
            created = self.core.read_namespaced_service(name, meta["namespace"])
        return {"webUIServiceName": name, "webUIPort": UI_PORT,
                "webUIAddress": f"{created.spec.cluster_ip}:{UI_PORT}"}

    def _executors(self, app: Mapping[str, Any]) -> dict[str, str]:
        meta = app["metadata"]
        pods = self.core.list_namespaced_pod(meta["namespace"],
                                             label_selector=f"spark-role=executor,{LABEL_APP_NAME}={meta['name']}")
        executors = {p.metadata.name: {"Pending": "PENDING", "Running": "RUNNING", "Succeeded": "COMPLETED",
                                       "Failed": "FAILED"}.get(str(p.status.phase), "UNKNOWN") for p in pods.items}
        self.executor_pods.setdefault(self._key(app), set()).update(executors)
        return executors

    def _delete_resources(self, app: Mapping[str, Any], status: Mapping[str, Any]) -> None:
        """deleteSparkResources: the driver pod and the UI Service."""
        meta = app["metadata"]
        pod = (status.get("driverInfo") or {}).get("podName") or f"{meta['name']}-driver"
        for delete, name in ((self.core.delete_namespaced_pod, pod),
                             (self.core.delete_namespaced_service, ui_service_name(meta["name"]))):
            try:
                delete(name, meta["namespace"])
            except ApiException as exc:
                if exc.status != 404:
                    raise

    def _resources_gone(self, app: Mapping[str, Any], status: Mapping[str, Any]) -> bool:
        meta = app["metadata"]
        pod = (status.get("driverInfo") or {}).get("podName") or f"{meta['name']}-driver"
        for read, name in ((self.core.read_namespaced_pod, pod),
                           (self.core.read_namespaced_service, ui_service_name(meta["name"]))):
            try:
                read(name, meta["namespace"])
            except ApiException as exc:
                if exc.status == 404:
                    continue
                raise
            return False
        return True


@contextlib.contextmanager
def running_harness(api: client.ApiClient, kubeconfig: Path, *, namespaces: list[str] | None = None,
                    namespace_selector: str = "") -> Iterator[SparkOperatorHarness]:
    """The SparkApplication CRD installed (once per bed), the stand-in and its webhook running for the block."""
    ext = client.ApiextensionsV1Api(api)
    crd = yaml.load(CRD_FILE.read_text(), Loader=yaml.CSafeLoader)  # 800 kB: libyaml reads it in a second
    try:
        ext.create_custom_resource_definition(crd)
    except ApiException as exc:
        if exc.status != 409:
            raise
        # A bed that outlived an older checkout may hold another version of the CRD: this one replaces it.
        crd["metadata"]["resourceVersion"] = ext.read_custom_resource_definition(
            crd["metadata"]["name"]).metadata.resource_version
        ext.replace_custom_resource_definition(crd["metadata"]["name"], crd)
    deadline = time.monotonic() + 30
    while not any(c.type == "Established" and c.status == "True"
                  for c in ext.read_custom_resource_definition(crd["metadata"]["name"]).status.conditions or []):
        if time.monotonic() > deadline:
            raise TimeoutError("the SparkApplication CRD is not Established after 30 s")
        time.sleep(0.2)
    harness = SparkOperatorHarness(api, kubeconfig, namespaces=namespaces, namespace_selector=namespace_selector)
    harness.start()
    try:
        yield harness
    finally:
        harness.stop()


# api/v1beta2: DriverInfo's fields, each omitempty.
DRIVER_INFO_FIELDS = ("podName", "webUIAddress", "webUIIngressAddress", "webUIIngressName", "webUIPort",
                      "webUIServiceName")


def _reset() -> dict[str, Any]:
    """resetSparkApplicationStatus for SUSPENDED: the run's traces go, the attempts stay. ``DriverInfo{}`` is an empty
    object, not no object (the CRD requires ``driverInfo``): in a merge patch, each of its fields set to null."""
    return {"sparkApplicationId": None, "executorState": None,
            "driverInfo": dict.fromkeys(DRIVER_INFO_FIELDS)}
