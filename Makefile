# kpo — the two commands that matter: `make demo` and `make test`. Both do their own set-up.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
TESTBED := PYTHONPATH=testbed $(PY) -m kpo_testbed
STAMP := $(VENV)/.installed

.PHONY: help
help:
	@echo "make demo          local test bed + operator + example reassignment with live progress"
	@echo "make test          lint, unit tests, end-to-end tests on the real test bed (CI runs this)"
	@echo "make provision     build/fetch Kafka, etcd, kube-apiserver, kube-controller-manager, kubectl, helm (cached)"
	@echo "make provision-prometheus  prometheus and promtool, for the alert-rule tests and e2e (cached)"
	@echo "make provision-argocd  argocd-health: the Argo CD health check in Argo CD's own Lua VM, for e2e (cached)"
	@echo "make provision-flux  Flux source-controller and kustomize-controller, for e2e/test_flux.py (cached)"
	@echo "make provision-node  containerd, kubelet, kube-scheduler and kpo's images for the test bed's node (cached)"
	@echo "make testbed-up    start the test bed in the background; then: . .testbed/env"
	@echo "make testbed-down  stop every process the test bed started (and the demo's operator), remove its data"
	@echo "make operator      install the CRDs and run the operator in the foreground against .testbed/env"
	@echo "make lint unit e2e the parts of make test"
	@echo "make bench-exec    execution simulator: kpo's scheduler vs all-at-once vs batches with a barrier"
	@echo "make bench-concurrency  500 PartitionReassignments at once on the test bed (BENCH_RESOURCES=500)"
	@echo "make bench         planner bench: kpo's plan vs Kafka's placer (BENCH_SCENARIOS=small for a quick run)"
	@echo "make crds          regenerate crds/ from the pydantic models in operator/kpo/api (crds-check: verify)"
	@echo "make lock          regenerate requirements.lock / requirements-dev.lock (pinned, with hashes) from pyproject.toml"

# requirements-dev.lock pins every package (with hashes) to the versions tested; make lock regenerates it.
$(STAMP): pyproject.toml requirements-dev.lock
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "kpo needs Python >= 3.11; found " + sys.version.split()[0])'
	@command -v java >/dev/null || { echo "java is missing: install a JDK 17 (apt-get install openjdk-17-jdk-headless)"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q --require-hashes -r requirements-dev.lock \
	  || { echo "pip could not install kpo's pinned dependencies: PyPI must be reachable"; exit 1; }
	$(PY) -m pip install -q --no-deps -e .
	touch $@

.PHONY: venv
venv: $(STAMP)

# Regenerate the lock files after a change to the dependencies in pyproject.toml (needs PyPI).
.PHONY: lock
lock:
	$(PYTHON) -m venv .lock-tools && .lock-tools/bin/pip install -q pip-tools
	.lock-tools/bin/pip-compile -q --generate-hashes --allow-unsafe --strip-extras --no-emit-find-links \
	  --output-file requirements.lock pyproject.toml
	.lock-tools/bin/pip-compile -q --generate-hashes --allow-unsafe --strip-extras --no-emit-find-links \
	  --extra dev --output-file requirements-dev.lock pyproject.toml

.PHONY: provision
provision:
	@bash testbed/provision.sh base >/dev/null

# prometheus and promtool (Go module proxy): the alert rules' promtool tests (tests/test_alert_rules.py, required under
# CI=true) and the real Prometheus of e2e/test_prometheus.py. First build about 9.4 CPU-minutes; cached after.
.PHONY: provision-prometheus
provision-prometheus:
	@bash testbed/provision.sh prometheus >/dev/null

# argocd-health (Go module proxy): kpo's Argo CD health check (helm/kpo/files/argocd-health.lua) evaluated by argo-cd's
# own util/lua on the statuses the operator writes in e2e (e2e/argocd_support.py). First build about 6.2 CPU-minutes;
# cached after.
.PHONY: provision-argocd
provision-argocd:
	@bash testbed/provision.sh argocd >/dev/null

# Flux's source-controller and kustomize-controller (Go module proxy) and their CRDs: e2e/test_flux.py delivers kpo's
# resources from git through them. First build about 11 CPU-minutes (14 min wall on 2
# busy cores, 1.9 GB peak); cached after.
.PHONY: provision-flux
provision-flux:
	@bash testbed/provision.sh flux >/dev/null

# The real node's binaries, the pause and base images, and kpo's operator and planner images built from the
# committed tree (HEAD): the e2e tests run them as pods. Needs root; installs missing Debian packages.
.PHONY: provision-node
provision-node:
	@bash testbed/provision.sh node >/dev/null

.PHONY: testbed-up
testbed-up: venv provision
	$(TESTBED) up

.PHONY: testbed-down
testbed-down:
	@if [ -x $(PY) ]; then PYTHONPATH=testbed $(PY) demo/demo.py --stop-operator; $(TESTBED) down; \
	 else echo "no virtualenv, so no test bed was started"; fi

.PHONY: install-crds
install-crds: testbed-up
	. .testbed/env && kubectl apply --server-side --force-conflicts -f crds/

.PHONY: operator
operator: install-crds
	. .testbed/env && $(PY) -m kpo

.PHONY: demo
demo: testbed-up
	PYTHONPATH=testbed $(PY) demo/demo.py

.PHONY: testbed-status
testbed-status: venv
	$(TESTBED) status

.PHONY: bench-exec
bench-exec: venv
	$(PY) -m bench.execution_sim

# 500 PartitionReassignments applied at once (issue 25): on the test bed of `make testbed-up` when it is healthy, else on
# a private one; appends its row to bench/concurrency/RESULTS.md.
BENCH_RESOURCES ?= 500
.PHONY: bench-concurrency
bench-concurrency: venv provision
	PYTHONPATH=testbed $(PY) -m bench.concurrency.run --resources $(BENCH_RESOURCES)

# BENCH_SCENARIOS: small (two quick scenarios), all (the 3M-replica case last), or names separated by commas.
BENCH_SCENARIOS ?= all
.PHONY: bench
bench: venv provision
	$(PY) -m bench.planner.run --scenarios $(BENCH_SCENARIOS) --results bench/planner/RESULTS.md

# The disk plans (issue 30): RemoveDisks and RebalanceDisks against the lower bound and a greedy.
.PHONY: bench-disks
bench-disks: venv
	$(PY) -m bench.planner.disks --results bench/planner/RESULTS.md

.PHONY: bench-relieve
bench-relieve: venv
	$(PY) -m bench.planner.relieve --results bench/planner/RESULTS.md

.PHONY: crds
crds: venv
	$(PY) -m kpo.api crds
	$(PY) -m kpo.api helm/kpo/crds

.PHONY: crds-check
crds-check: venv
	$(PY) -m kpo.api --check crds
	$(PY) -m kpo.api --check helm/kpo/crds

.PHONY: lint
lint: venv
	$(VENV)/bin/ruff check operator tests e2e testbed demo bench
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

.PHONY: unit
unit: venv
	$(PY) -m pytest tests -q --durations=15

# The e2e suite mostly waits (on Kafka, the API server, throttled moves): E2E_WORKERS pytest-xdist workers, each on a
# test bed of its own, share the machine's cores; whole modules go to a worker, the node's modules all to one
# (e2e/conftest.py's scheduler). Default 2: `make test` took 30 min with two workers against 43 with one process
# (docs/testing.md). E2E_WORKERS=0 runs one process, reusing `make testbed-up`'s bed when one runs.
E2E_WORKERS ?= 2
E2E_ARGS = -q --durations=30 -n $(E2E_WORKERS) --dist loadscope

.PHONY: e2e
e2e: venv provision provision-prometheus provision-argocd provision-flux provision-node
	$(PY) -m pytest e2e $(E2E_ARGS)

# The unit suite is CPU-bound (the planner's Spark tests), the e2e suite mostly waits: on Kafka, the API server and
# the throttled moves it watches. `make test` runs them side by side, the unit suite niced so the test bed's
# processes come first, its output printed after the e2e suite's; either failing fails the target.
UNIT_LOG := build/unit.log
.PHONY: test
test: venv provision provision-prometheus provision-argocd provision-flux provision-node lint
	@mkdir -p build; rm -f $(UNIT_LOG) build/unit.rc
	@( rc=0; nice -n 10 $(PY) -m pytest tests -q --durations=15 -p no:cacheprovider --basetemp=build/unit-tmp \
	   > $(UNIT_LOG) 2>&1 || rc=$$?; echo $$rc > build/unit.rc ) & \
	e2e=0; $(PY) -m pytest e2e $(E2E_ARGS) || e2e=$$?; wait; \
	echo "===== unit tests (ran beside the e2e suite) ====="; cat $(UNIT_LOG); \
	echo "unit exit $$(cat build/unit.rc), e2e exit $$e2e"; test "$$(cat build/unit.rc)" = 0 && test $$e2e = 0
