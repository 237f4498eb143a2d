"""The container images, checked without a container engine (there is none here): the build context holds what the
Dockerfile copies and keeps out what it must not carry, the entry points the images call exist and start, and the
chart's Deployment runs exactly the operator image's entry point."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = ROOT / "Dockerfile"
CHART = ROOT / "helm" / "kpo"


def instructions() -> list[tuple[str, str, str]]:
    """(stage, instruction, arguments) for every instruction, continuation lines joined."""
    joined = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    stage = ""
    found = []
    for raw in joined.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        word, _, rest = line.partition(" ")
        word = word.upper()
        if word == "FROM":
            parts = rest.split()
            stage = parts[2] if len(parts) >= 3 and parts[1].upper() == "AS" else ""
        found.append((stage, word, rest.strip()))
    return found


def dockerignore_excludes(path: str) -> bool:
    """Docker's rule: the last pattern that matches the path or one of its parents decides; ``!`` re-includes."""
    excluded = False
    for raw in (ROOT / ".dockerignore").read_text().splitlines():
        pattern = raw.strip()
        if not pattern or pattern.startswith("#"):
            continue
        negate = pattern.startswith("!")
        pattern = pattern.lstrip("!").rstrip("/")
        regex = re.escape(pattern).replace(r"\*\*/", "(.*/)?").replace(r"\*\*", ".*").replace(r"\*", "[^/]*")
        regex = regex.replace(r"\?", "[^/]")
        parts = path.split("/")
        prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        if any(re.fullmatch(regex, prefix) for prefix in prefixes):
            excluded = not negate
    return excluded


def test_base_images_are_pinned_to_an_exact_version() -> None:
    args = {m.group(1): m.group(2) for m in re.finditer(r"^ARG (\w+_IMAGE)=(\S+)$", DOCKERFILE.read_text(), re.M)}
    assert set(args) == {"PYTHON_IMAGE"}
    for image in args.values():
        _, _, tag = image.partition(":")
        assert "@sha256:" in image or re.match(r"^\d+\.\d+\.\d+", tag), f"{image} is not pinned"
        assert "latest" not in tag


def test_multi_stage_builds_an_operator_and_a_planner_image() -> None:
    stages = {stage for stage, word, _ in instructions() if word == "FROM"}
    assert {"build", "runtime", "operator", "planner"} <= stages


def test_images_run_as_a_non_root_user() -> None:
    users = {stage: rest for stage, word, rest in instructions() if word == "USER"}
    for stage in ("operator", "planner"):
        uid = users[stage].split(":")[0]
        assert uid.isdigit() and int(uid) != 0, f"{stage} runs as {users[stage]}"
    pod = (CHART / "templates" / "deployment.yaml").read_text()
    assert f"runAsUser: {users['operator'].split(':')[0]}" in pod


def test_the_operator_image_has_a_java_runtime_for_local_spark() -> None:
    runs = " ".join(rest for stage, word, rest in instructions() if stage == "runtime" and word == "RUN")
    assert "openjdk-17-jre-headless" in runs


def test_every_copied_source_is_in_the_build_context() -> None:
    sources: list[str] = []
    for _, word, rest in instructions():
        if word == "COPY" and "--from=" not in rest:
            sources += shlex.split(rest)[:-1]
    assert sources, "the Dockerfile copies nothing from the context"
    for source in sources:
        assert (ROOT / source).exists(), f"COPY {source}: no such file"
        assert not dockerignore_excludes(source.rstrip("/")), f"COPY {source}: excluded by .dockerignore"
    assert not dockerignore_excludes("operator/kpo/__main__.py")
    assert not dockerignore_excludes("operator/kpo/planning/spark/job.py")


@pytest.mark.parametrize("path", [".venv/bin/python", ".testbed/state.json", ".git/HEAD", ".kube/cache/x",
                                  "tests/test_helm_image.py", "e2e/conftest.py", "operator/kpo/__pycache__/x.pyc",
                                  ".mypy_cache/x", ".hypothesis/x", "bench/x.py", "helm/kpo/values.yaml"])
def test_dockerignore_keeps_local_state_out_of_the_context(path: str) -> None:
    assert dockerignore_excludes(path)


def test_the_deployment_runs_the_image_entry_point() -> None:
    entry = [rest for stage, word, rest in instructions() if stage == "operator" and word == "ENTRYPOINT"]
    assert len(entry) == 1
    deployment = (CHART / "templates" / "deployment.yaml").read_text()
    command = re.search(r"^\s*command: (\[.*\])$", deployment, re.M)
    assert command is not None
    assert yaml.safe_load(command.group(1)) == json.loads(entry[0]) == ["python", "-m", "kpo"]


def test_the_operator_entry_point_starts_and_knows_the_chart_flags(capsys: pytest.CaptureFixture[str]) -> None:
    from kpo.__main__ import main  # noqa: PLC0415

    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    assert exited.value.code == 0
    help_text = capsys.readouterr().out
    deployment = (CHART / "templates" / "deployment.yaml").read_text()
    flags = set(re.findall(r"^\s*- (--[a-z-]+)", deployment, re.M))
    assert flags == {"--liveness", "--metrics-port", "--namespace", "--verbose"}
    for flag in flags:
        assert flag in help_text, flag


def test_the_planner_entry_point_exists_and_starts(capsys: pytest.CaptureFixture[str]) -> None:
    build = " ".join(rest for stage, word, rest in instructions() if stage == "runtime" and word == "RUN")
    assert "/opt/kpo/planner-job.py" in build and "job.py" in build
    job = ROOT / "operator" / "kpo" / "planning" / "spark" / "job.py"
    assert 'if __name__ == "__main__":' in job.read_text()  # spark-submit runs it as a file
    from kpo.planning.spark.job import main  # noqa: PLC0415

    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    assert exited.value.code == 0
    assert "--input" in capsys.readouterr().out


def test_exposed_ports_are_the_chart_defaults() -> None:
    exposed = {rest for stage, word, rest in instructions() if stage == "operator" and word == "EXPOSE"}
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert exposed == {f"{values['metrics']['port']} {values['probes']['port']}"}


def test_spark_home_matches_the_python_of_the_base_image() -> None:
    text = DOCKERFILE.read_text()
    version = re.search(r"PYTHON_IMAGE=python:(\d+\.\d+)\.", text)
    assert version is not None
    assert f"/opt/kpo/lib/python{version.group(1)}/site-packages/pyspark" in text



def test_the_spark_version_of_a_spark_application_is_the_pyspark_in_the_lock() -> None:
    from kpo.config import SparkApplicationSettings  # noqa: PLC0415

    locked = pinned(ROOT / "requirements.lock")["pyspark"]
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert SparkApplicationSettings().spark_version == locked
    assert values["planner"]["sparkApplication"]["sparkVersion"] == locked


def test_the_planner_entry_point_starts_spark_drivers_and_executors_the_way_spark_asks() -> None:
    script = (ROOT / "docker" / "spark-entrypoint.sh").read_text()
    assert subprocess.run(["bash", "-n", str(ROOT / "docker" / "spark-entrypoint.sh")], check=False).returncode == 0
    # What Spark's Kubernetes scheduler passes: the driver's bind address, the executor's settings (Spark 4's
    # BasicExecutorFeatureStep), and the executor backend class it expects to run.
    for name in ("SPARK_DRIVER_BIND_ADDRESS", "SPARK_DRIVER_URL", "SPARK_EXECUTOR_ID", "SPARK_EXECUTOR_CORES",
                 "SPARK_APPLICATION_ID", "SPARK_EXECUTOR_POD_IP", "SPARK_RESOURCE_PROFILE_ID",
                 "SPARK_EXECUTOR_POD_NAME", "SPARK_EXECUTOR_MEMORY"):
        assert name in script
    assert "org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend" in script
    planner = [rest for stage, word, rest in instructions() if stage == "planner" and word in ("COPY", "ENTRYPOINT")]
    assert "docker/spark-entrypoint.sh /opt/entrypoint.sh" in planner
    assert '["/opt/entrypoint.sh"]' in planner


# The lock files: what make, CI and the images install is exactly what was tested.

LOCK_LINE = re.compile(r"^([A-Za-z0-9_.-]+)==([^\s\\]+)")


def pinned(lock: Path) -> dict[str, str]:
    found: dict[str, str] = {}
    lines = lock.read_text().splitlines()
    for at, line in enumerate(lines):
        match = LOCK_LINE.match(line)
        if match:
            name = re.sub(r"[-_.]+", "-", match.group(1)).lower()
            found[name] = match.group(2)
            assert "--hash=sha256:" in lines[at + 1], f"{lock.name}: {name} has no hash"
    return found


def requirement_names(requirements: list[str]) -> set[str]:
    return {re.sub(r"[-_.]+", "-", re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0]).lower() for r in requirements}


def test_every_dependency_is_pinned_with_hashes_and_the_runtime_lock_agrees_with_the_dev_lock() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    runtime, dev = pinned(ROOT / "requirements.lock"), pinned(ROOT / "requirements-dev.lock")
    assert requirement_names(project["dependencies"]) <= set(runtime)
    assert requirement_names(project["optional-dependencies"]["dev"]) <= set(dev)
    assert {name: dev[name] for name in runtime if name in dev} == runtime, "one version of each package"


def test_make_and_the_image_install_the_locks_with_hashes() -> None:
    makefile = (ROOT / "Makefile").read_text()
    assert "--require-hashes -r requirements-dev.lock" in makefile
    runs = [args for _, word, args in instructions() if word == "RUN"]
    # The locked dependencies first, then kpo itself without letting pip resolve anything else.
    assert "--require-hashes -r requirements.lock" in next(args for args in runs if "pip install" in args)
    assert all("pip install" not in args or "--require-hashes" in args or "--no-deps" in args for args in runs)
    assert not dockerignore_excludes("requirements.lock")
