"""Session fixtures for the end-to-end suite: the real test bed, started once.

If ``make testbed-up`` already started a healthy test bed in ``.testbed/``, the session reuses it (fast iteration) and
leaves it running; otherwise the session starts a private one in a temporary directory, on free ports, and stops it
at the end. Each test gets its own namespace and its own topic names, so tests never see each other's objects.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient
from kubernetes import client, config

from e2e.kube_support import Resources, install_crds
from e2e.operator_support import OperatorProcess, operator_env
from kpo_testbed import Testbed
from kpo_testbed.paths import REPO_ROOT

QUIET = logging.getLogger("e2e.librdkafka")
QUIET.addHandler(logging.NullHandler())
QUIET.propagate = False


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def testbed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Testbed]:
    shared = Testbed.open(REPO_ROOT / ".testbed")
    if shared is not None and shared.healthy():
        yield shared
        return
    bed = Testbed.up(tmp_path_factory.mktemp("testbed"))
    try:
        yield bed
    finally:
        bed.down()


@pytest.fixture(scope="session")
def bootstrap_servers(testbed: Testbed) -> str:
    return testbed.state.kafka.bootstrap_servers


@pytest.fixture(scope="session")
def kafka_admin(bootstrap_servers: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap_servers, "logger": QUIET})


@pytest.fixture(scope="session")
def kubeconfig(testbed: Testbed) -> Path:
    return testbed.state.kube.kubeconfig


@pytest.fixture(scope="session")
def api_client(kubeconfig: Path) -> client.ApiClient:
    return config.new_client_from_config(config_file=str(kubeconfig))


@pytest.fixture
def namespace(api_client: client.ApiClient) -> Iterator[str]:
    name = f"e2e-{uuid.uuid4().hex[:8]}"
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


@pytest.fixture(scope="session")
def kpo_operator(kpo_crds: None, kubeconfig: Path, bootstrap_servers: str,
                 tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorProcess]:
    """One operator for the session (watching all namespaces); a test that kills it starts it again."""
    log_path = tmp_path_factory.mktemp("operator") / "operator.log"
    operator = OperatorProcess(operator_env(kubeconfig, bootstrap_servers), log_path)
    operator.start()
    yield operator
    operator.stop()


@pytest.fixture
def resources(api_client: client.ApiClient, namespace: str) -> Resources:
    return Resources(api_client, namespace)
