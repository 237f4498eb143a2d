# syntax=docker/dockerfile:1
#
# Two images from one build (see README, "Operating kpo"):
#   docker build --target operator -t kpo/operator:0.1.0 .   the operator (python -m kpo), with the JRE that the
#                                                              local Spark planner (PySpark in local mode) needs
#   docker build --target planner  -t kpo/planner:0.1.0  .   the planning job for the SparkApplication backend: the
#                                                              same Python environment, started by the Spark operator
#
# Both stand on the same pinned Python base, so the planner that runs in a SparkApplication is byte for byte the one
# the operator runs locally. Base images are pinned by exact tag; pin them by digest in your own registry mirror.

# The test bed builds on a debootstrapped Debian bookworm with Python 3.11 (testbed/provision.sh node): no image can be
# pulled there. Users keep the public base.
ARG PYTHON_IMAGE=python:3.11.13-slim-bookworm

# --------------------------------------------------------------------------------------------------------- build
# The locked dependencies only: this stage, and the runtime layer that copies it, change when requirements.lock does.
FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
# requirements.lock pins every runtime package, with hashes, to the versions make test ran with.
COPY requirements.lock ./
RUN python -m venv /opt/kpo \
 && /opt/kpo/bin/pip install --require-hashes -r requirements.lock

# ----------------------------------------------------------------------------------------------------- runtime
# Python, the dependencies in /opt/kpo, a Java 17 runtime for Spark, an unprivileged user, and kpo itself last, so a
# change to kpo alone rebuilds one small layer. Nothing is written to the image at run time: the chart mounts an
# emptyDir on /tmp (HOME, Spark's scratch space) and the root filesystem is read-only.
FROM ${PYTHON_IMAGE} AS runtime
# Debian's JRE package wants its man page directory, which slim images leave out.
RUN mkdir -p /usr/share/man/man1 \
 && apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless tini procps \
 && rm -rf /var/lib/apt/lists/* \
 && ln -s "$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")" /usr/lib/jvm/java-17 \
 && groupadd --system --gid 10001 kpo \
 && useradd --system --uid 10001 --gid kpo --home-dir /tmp --no-create-home --shell /usr/sbin/nologin kpo
COPY --from=build /opt/kpo /opt/kpo
ENV PATH=/opt/kpo/bin:$PATH \
    JAVA_HOME=/usr/lib/jvm/java-17 \
    HOME=/tmp \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PYSPARK_PYTHON=/opt/kpo/bin/python \
    PYSPARK_DRIVER_PYTHON=/opt/kpo/bin/python
COPY pyproject.toml README.md /src/
COPY operator /src/operator
RUN PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 /opt/kpo/bin/pip install --no-deps /src \
 && rm -rf /src \
 && ln -s "$(/opt/kpo/bin/python -c 'import kpo.planning.spark, pathlib; print(pathlib.Path(kpo.planning.spark.__file__).parent / "job.py")')" \
          /opt/kpo/planner-job.py

# ---------------------------------------------------------------------------------------------------- operator
FROM runtime AS operator
USER 10001:10001
# 8080: Prometheus metrics; 8081: Kopf's liveness endpoint (/healthz), used by the probes.
EXPOSE 8080 8081
# The Helm chart's Deployment runs exactly this command (a unit test keeps the two equal).
ENTRYPOINT ["python", "-m", "kpo"]

# ----------------------------------------------------------------------------------------------------- planner
# For SparkApplications (sparkoperator.k8s.io/v1beta2): mainApplicationFile local:///opt/kpo/planner-job.py.
# Spark starts driver and executor pods with this image's entry point (kpo's own: docker/spark-entrypoint.sh), and
# SPARK_HOME is the pyspark wheel, so the Spark that plans in a SparkApplication is the one that plans locally.
FROM runtime AS planner
COPY docker/spark-entrypoint.sh /opt/entrypoint.sh
ENV SPARK_HOME=/opt/kpo/lib/python3.11/site-packages/pyspark
WORKDIR /tmp
USER 10001:10001
ENTRYPOINT ["/opt/entrypoint.sh"]
