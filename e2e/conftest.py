"""Session fixtures for the end-to-end suite: the real test bed, started once.

If ``make testbed-up`` already started a healthy test bed in ``.testbed/``, the session reuses it (fast iteration) and
leaves it running; otherwise the session starts a private one in a temporary directory, on free ports, and stops it
at the end. Each test gets its own namespace and its own topic names, so tests never see each other's objects.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka.admin import AdminClient
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from e2e.kube_support import Resources, install_crds
from e2e.operator_support import OperatorProcess, operator_env
from kpo.kafka.client import ROUTE_AROUND_DEAD_NODES
from kpo_testbed import Testbed, node
from kpo_testbed.kafka import LIMITED_USER, SCRAM_MECHANISM
from kpo_testbed.paths import REPO_ROOT

QUIET = logging.getLogger("e2e.librdkafka")
QUIET.addHandler(logging.NullHandler())
QUIET.propagate = False


#: The modules with a test on the node (the ``node_images`` fixture). The node is the host's -- its address, containerd,
#: the cgroups its pods run in -- one per machine, so under pytest-xdist these modules all go to one worker. The
#: collection below fails when a module uses the node without being listed here.
NODE_MODULES = frozenset({"e2e/test_leader_election.py", "e2e/test_node.py", "e2e/test_planning.py",
                          "e2e/test_spark_harness.py"})


def module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    on_node = {module_of(item.nodeid) for item in items
               if isinstance(item, pytest.Function) and "node_images" in item.fixturenames}
    if not on_node <= NODE_MODULES:
        raise pytest.UsageError(f"e2e/conftest.py: add {sorted(on_node - NODE_MODULES)} to NODE_MODULES: their tests "
                                "run on the node, which only one pytest-xdist worker may use")
    for item in items:
        item.add_marker(pytest.mark.e2e)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # The node's modules are the longest unit (Spark jobs in pods): first, so the other worker's modules fill in
        # around it rather than leaving it to run alone at the end. Every worker collects the same order.
        items.sort(key=lambda item: module_of(item.nodeid) not in NODE_MODULES)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """For ``-n N`` (``make test``'s ``E2E_WORKERS``, 2 by default): a worker takes whole modules, so a module's
    fixtures (clusters of its own) start once, and the node's modules together (``NODE_MODULES``). pytest-xdist's
    ``loadgroup`` would say it with marks, but it renames node ids, which pytest 9 no longer lets it do."""
    from xdist.scheduler import LoadScopeScheduling  # noqa: PLC0415 (only under pytest-xdist)

    class WholeModulesNodeTogether(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            module = module_of(nodeid)
            return "node" if module in NODE_MODULES else module

    return WholeModulesNodeTogether(config, log)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A failing test's report carries the tail of each operator's log that ran during it (still running, or stopped
    by the test itself): in CI the logs are gone after the run, and a status that never changed says nothing of
    why."""
    if call.when == "setup":
        OperatorProcess.stopped_in_test.clear()
    report: pytest.TestReport = yield
    if report.failed:
        shown = OperatorProcess.running | OperatorProcess.stopped_in_test
        for operator in sorted(shown, key=lambda o: str(o.log_path)):
            report.sections.append((f"operator log {operator.log_path} (last 80 lines)", operator.log_tail(80)))
    return report


@pytest.fixture(scope="session")
def testbed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Testbed]:
    """``make testbed-up``'s bed when it runs, else a private one. Each pytest-xdist worker starts its own: tests
    judge brokers' throttles and configs cluster-wide, which another worker's moves on a shared bed would break."""
    shared = None if os.environ.get("PYTEST_XDIST_WORKER") else Testbed.open(REPO_ROOT / ".testbed")
    if shared is not None and shared.healthy():
        yield shared
        return
    bed = Testbed.up(tmp_path_factory.mktemp("testbed"), owner=os.getpid())
    try:
        yield bed
    finally:
        bed.down()


@pytest.fixture(scope="session")
def node_images(testbed: Testbed) -> Iterator[node.NodeImages]:
    """The test bed's real node (containerd, kubelet, scheduler, workload controllers), attached for the tests that
    run pods, with kpo's operator and planner images imported; stopped at the end if this session attached it."""
    images = node.NodeImages.built()
    started = node.up(testbed.state_dir)
    yield images
    if started:
        node.down(testbed.state_dir)


@pytest.fixture(scope="session")
def bootstrap_servers(testbed: Testbed) -> str:
    return testbed.state.kafka.bootstrap_servers


@pytest.fixture(scope="session")
def kafka_admin(bootstrap_servers: str) -> AdminClient:
    # The operator's own routing settings: with a node killed, a default client waits out its whole timeout on it.
    return AdminClient({"bootstrap.servers": bootstrap_servers, "logger": QUIET, **ROUTE_AROUND_DEAD_NODES})


@pytest.fixture(scope="session")
def kubeconfig(testbed: Testbed) -> Path:
    return testbed.state.kube.kubeconfig


@pytest.fixture(scope="session")
def api_client(kubeconfig: Path) -> client.ApiClient:
    return config.new_client_from_config(config_file=str(kubeconfig))


# Namespaces of this pytest session share a prefix, and the session's operator watches only those: several sessions
# (or a test's own operator, e.g. one running as the Helm chart's ServiceAccount) can share one test bed.
SESSION = uuid.uuid4().hex[:6]
SESSION_NAMESPACES = f"e2e-{SESSION}-*"


@pytest.fixture
def namespace(api_client: client.ApiClient) -> Iterator[str]:
    name = f"e2e-{SESSION}-{uuid.uuid4().hex[:6]}"
    core = client.CoreV1Api(api_client)
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    yield name
    core.delete_namespace(name)


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    base = request.node.name.replace("[", "-").replace("]", "").replace("_", "-")[:40].strip("-")
    return f"{base}-{uuid.uuid4().hex[:6]}"


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def kpo_crds(api_client: client.ApiClient) -> None:
    install_crds(api_client)


OPERATOR_NAMESPACE = "kpo-system"
LIMITED_SECRET = "kafka-kpo-limited"


@pytest.fixture(scope="session")
def operator_namespace(api_client: client.ApiClient, testbed: Testbed) -> str:
    """The operator's own namespace, holding the Secret with the SASL password of the "limited" cluster."""
    core = client.CoreV1Api(api_client)
    if not any(ns.metadata.name == OPERATOR_NAMESPACE for ns in core.list_namespace().items):
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=OPERATOR_NAMESPACE)))
    password = testbed.state.kafka.passwords[LIMITED_USER]
    secret = client.V1Secret(metadata=client.V1ObjectMeta(name=LIMITED_SECRET), string_data={"password": password})
    try:
        core.create_namespaced_secret(OPERATOR_NAMESPACE, secret)
    except ApiException as exc:
        if exc.status != 409:
            raise
        core.replace_namespaced_secret(LIMITED_SECRET, OPERATOR_NAMESPACE, secret)
    return OPERATOR_NAMESPACE


@pytest.fixture(scope="session")
def operator_config(testbed: Testbed, operator_namespace: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two clusters: the default over PLAINTEXT, and "limited": SASL/SCRAM as a user with only the ACLs a test
    grants, its password read from a Secret."""
    config_path = tmp_path_factory.mktemp("operator-config") / "kpo.yaml"
    config_path.write_text(yaml.safe_dump({
        "pollIntervalSeconds": 1,
        "clusters": {
            "default": {"bootstrapServers": testbed.state.kafka.bootstrap_servers},
            "limited": {
                "bootstrapServers": testbed.state.kafka.sasl_bootstrap_servers,
                "securityProtocol": "SASL_PLAINTEXT",
                "sasl": {"mechanism": SCRAM_MECHANISM, "username": LIMITED_USER,
                         "passwordSecret": {"name": LIMITED_SECRET, "key": "password"}},
            },
        },
    }))
    return config_path


@pytest.fixture(scope="session")
def kpo_operator(kpo_crds: None, kubeconfig: Path, bootstrap_servers: str, operator_config: Path,
                 operator_namespace: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorProcess]:
    """One operator for the session (watching all namespaces); a test that kills it starts it again."""
    log_path = tmp_path_factory.mktemp("operator") / "operator.log"
    env = operator_env(kubeconfig, bootstrap_servers,
                       {"KPO_CONFIG": str(operator_config), "KPO_NAMESPACE": operator_namespace})
    operator = OperatorProcess(env, log_path, namespaces=[SESSION_NAMESPACES])
    operator.start()
    yield operator
    operator.stop()


@pytest.fixture
def resources(api_client: client.ApiClient, namespace: str) -> Resources:
    return Resources(api_client, namespace)
