"""The operator's own configuration: Kafka connections and defaults.

It comes from a YAML file (``KPO_CONFIG``, rendered by the Helm chart from its values) or, for a quick local run,
from ``KPO_BOOTSTRAP_SERVERS`` alone, which defines the default cluster. Credentials are never in this file: SASL
passwords and TLS material are named as keys of Kubernetes Secrets, read by the operator at connection time, so the
chart can grant it exactly those Secrets and nothing else.
"""

from __future__ import annotations

import os
from enum import StrEnum
from pathlib import Path
from typing import Any, Self

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

from kpo.api.partition_reassignment import PartitionReassignmentSpec
from kpo.domain.lease import LeaseTiming
from kpo.domain.spark_application import NAMESPACE_CONF, spark_conf_refusal

DEFAULT_CLUSTER = "default"


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)


class SecretKeyRef(_Model):
    name: str = Field(description="Secret name, in the operator's namespace unless `namespace` is given.")
    key: str = Field(description="Key in the Secret's data.")
    namespace: str | None = None


class SecurityProtocol(StrEnum):
    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"


class SaslMechanism(StrEnum):
    PLAIN = "PLAIN"
    SCRAM_SHA_256 = "SCRAM-SHA-256"
    SCRAM_SHA_512 = "SCRAM-SHA-512"


class SaslConfig(_Model):
    mechanism: SaslMechanism = SaslMechanism.SCRAM_SHA_512
    username: str | None = None
    username_secret: SecretKeyRef | None = None
    password_secret: SecretKeyRef

    @model_validator(mode="after")
    def _one_username(self) -> Self:
        if (self.username is None) == (self.username_secret is None):
            raise ValueError("give exactly one of sasl.username and sasl.usernameSecret")
        return self


class TlsConfig(_Model):
    ca_secret: SecretKeyRef | None = None
    cert_secret: SecretKeyRef | None = None
    key_secret: SecretKeyRef | None = None
    verify_hostname: bool = True


class LoginBackoff(_Model):
    """How long the operator waits before trying again a login Kafka refused (a wrong password): doubled per refusal
    from ``initialSeconds`` up to ``maxSeconds``, one attempt per step for all resources of the cluster."""

    initial_seconds: float = Field(default=5.0, gt=0)
    max_seconds: float = Field(default=300.0, gt=0)

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if self.max_seconds < self.initial_seconds:
            raise ValueError("loginBackoff.maxSeconds must be at least loginBackoff.initialSeconds")
        return self


class KafkaConnection(_Model):
    bootstrap_servers: str = Field(min_length=1)
    security_protocol: SecurityProtocol = SecurityProtocol.PLAINTEXT
    sasl: SaslConfig | None = None
    tls: TlsConfig | None = None
    # One request, not one tick: with the status meant to lag Kafka by at most a poll interval plus request time, a
    # dead node must cost seconds, not half a minute (librdkafka and kafka-python both default to 30 s).
    request_timeout_seconds: float = Field(default=10.0, gt=0)
    login_backoff: LoginBackoff = LoginBackoff()

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        uses_sasl = self.security_protocol in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)
        if uses_sasl and self.sasl is None:
            raise ValueError(f"securityProtocol {self.security_protocol} needs a sasl section")
        if not uses_sasl and self.sasl is not None:
            raise ValueError(f"a sasl section needs securityProtocol SASL_PLAINTEXT or SASL_SSL, "
                             f"not {self.security_protocol}")
        return self


class ExecutionDefaults(_Model):
    max_moves: int = Field(default=50, ge=1, description="Cluster-wide in-flight moves, all CRs together.")
    max_moves_per_broker: int = Field(default=5, ge=1, description="In-flight moves touching one broker.")
    max_moves_per_broker_direction: int = Field(
        default=2, ge=1,
        description="In-flight moves copying into one broker, and separately out of it (the leader serving the copy).")


class RefillConfig(_Model):
    """Refill between polls (:mod:`kpo.domain.refill`): a PartitionReassignment's tick that leaves moves of its own in
    flight and moves waiting for a slot keeps looking at Kafka until about the next poll, and refills a slot as soon
    as a move has ended, under the same limits."""

    first_probe_seconds: float = Field(
        default=0.25, ge=0, description="Seconds from a pass to the first look; 0 turns refill between polls off.")
    probe_growth: float = Field(default=1.5, ge=1, description="Each look that finds no move ended waits this much "
                                                               "longer than the previous one.")
    # Each watching tick holds one of Kopf's worker threads (8) for up to a poll interval: keep room for the others.
    max_watching_ticks: int = Field(default=4, ge=1, description="Ticks that may watch at the same time.")


class BalanceScoreConfig(_Model):
    """The cluster balance score (:mod:`kpo.background.balance_sampler`): every configured cluster is sampled with
    DescribeCluster, DescribeTopics and DescribeLogDirs every ``intervalSeconds`` and exported as the
    ``kpo_cluster_*`` gauges; 0 turns sampling off."""

    interval_seconds: float = Field(default=60.0, ge=0, description="Seconds between two samples of a cluster; 0: off.")
    topics_per_request: int = Field(default=200, ge=1, description="Topics per DescribeTopics and DescribeLogDirs "
                                    "request of a sample (the operator's other Kafka calls go in between).")


class AutoProposeCluster(_Model):
    """Auto-propose for one cluster (:mod:`kpo.domain.auto_propose`): a broker that registers and holds no replica
    gets a PartitionReassignment with an ``AddBrokers`` plan in ``namespace``, waiting at ``Proposed`` unless
    ``approval`` is ``Automatic``."""

    namespace: str = Field(min_length=1, description="Where the proposals are created (a namespace kpo watches).")
    approval: str = Field(default="Manual", pattern="^(Manual|Automatic)$",
                          description="Manual: the proposal waits for spec.approval.proposalId. Automatic: it runs.")
    settle_seconds: float = Field(default=60.0, ge=0, description="How long a broker must be registered and empty "
                                  "before it is proposed (brokers of one scale-out are proposed together).")
    ignore_brokers: frozenset[int] = Field(default=frozenset(), description="Brokers never proposed.")
    remove_dead_after_seconds: float = Field(
        default=0.0, ge=0, description="A broker that holds replicas but has not been alive for this long gets a "
        "RemoveBrokers proposal (Cruise Control's broker-failure self-healing); 0: off.")
    plan: dict[str, Any] = Field(default_factory=dict, description="Further spec.plan fields of each proposal "
                                 "(topics, topicPattern, excludeTopicPattern, tolerance, ...); goal and brokers are "
                                 "kpo's.")
    execution: dict[str, Any] = Field(default_factory=dict, description="spec.execution of each proposal.")

    @model_validator(mode="after")
    def _template_is_a_spec(self) -> Self:
        if {"goal", "brokers"} & set(self.plan):
            raise ValueError("autoPropose plan must not set goal or brokers: kpo sets AddBrokers and the newcomers")
        PartitionReassignmentSpec.model_validate({
            "plan": {**self.plan, "goal": "AddBrokers", "brokers": [0]}, "execution": self.execution,
            "approval": {"mode": self.approval}})
        return self


class AutoProposeConfig(_Model):
    interval_seconds: float = Field(default=30.0, gt=0, description="Seconds between two looks at each cluster.")
    topics_per_request: int = Field(default=200, ge=1)
    clusters: dict[str, AutoProposeCluster] = Field(default_factory=dict,
                                                    description="The clusters watched, by name; none by default.")


class ResourcesSpec(_Model):
    cores: int = Field(default=1, ge=1)
    memory: str = "1g"
    instances: int = Field(default=1, ge=1)
    # The pod's CPU request (spark.kubernetes.{driver,executor}.request.cores, e.g. "100m"); default: ``cores``.
    core_request: str | None = None


class SparkApplicationSettings(_Model):
    """How the operator writes a SparkApplication (sparkoperator.k8s.io/v1beta2) for a plan."""

    namespace: str = Field(default="", description="Where SparkApplications are created; empty: the CR's namespace.")
    image: str = "kpo/planner:0.1.0"
    image_pull_policy: str = "IfNotPresent"
    spark_version: str = "4.3.0"  # the pyspark wheel in requirements.lock (a unit test keeps them equal)
    main_application_file: str = "local:///opt/kpo/planner-job.py"
    service_account: str = "kpo-planner"
    driver: ResourcesSpec = ResourcesSpec()
    executor: ResourcesSpec = ResourcesSpec(instances=2, memory="2g")
    spark_conf: dict[str, str] = Field(default_factory=dict)
    # A plan whose SparkApplication has not finished after this long fails (and the application is deleted), as the
    # local backend's job does: a state the Spark Operator never leaves must not keep a resource Planning for ever.
    timeout_seconds: float = Field(default=1800.0, gt=0)

    @model_validator(mode="after")
    def _no_conf_the_spark_operator_manages(self) -> Self:
        # Refused here, at start-up, rather than by the Spark Operator's webhook at every plan.
        if refusal := spark_conf_refusal({k: v for k, v in self.spark_conf.items() if k != NAMESPACE_CONF}, ""):
            raise ValueError(f"planner.sparkApplication.{refusal}")
        return self


class LocalPlannerSettings(_Model):
    master: str = "local[*]"
    driver_memory: str = "1g"
    timeout_seconds: float = Field(default=1800.0, gt=0)
    spark_conf: dict[str, str] = Field(default_factory=dict)


class PlannerConfig(_Model):
    """Where generated plans are computed: ``local`` (spark-submit in local mode, supervised by the operator) or
    ``sparkApplication``. ``workDir`` holds each plan's input snapshot and output; for SparkApplications it must be
    storage the driver reads and writes too (a shared volume, or an object-store URI)."""

    backend: str = Field(default="local", pattern="^(local|sparkApplication)$")
    work_dir: str = "/tmp/kpo-plans"
    local: LocalPlannerSettings = LocalPlannerSettings()
    spark_application: SparkApplicationSettings = SparkApplicationSettings()


class LeaderElectionConfig(_Model):
    """Leader election (:mod:`kpo.leadership`): of the replicas, only the one holding the Lease ``leaseName`` in the
    operator's namespace acts. Off for a single process (``make operator``, the e2e suite's operator); the Helm chart
    turns it on."""

    enabled: bool = False
    lease_name: str = Field(default="kpo-leader", pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$", max_length=253)
    lease_duration_seconds: float = Field(default=10.0, gt=0, description="A standby takes a Lease not renewed "
                                          "for this long (by its own clock).")
    renew_deadline_seconds: float = Field(default=6.0, gt=0, description="A leader whose renewals fail this long "
                                          "stops at once (the process exits).")
    retry_period_seconds: float = Field(default=2.0, gt=0, description="Between two renewals, and two attempts of "
                                        "a standby.")

    @model_validator(mode="after")
    def _timing_is_safe(self) -> Self:
        self.timing()
        return self

    def timing(self) -> LeaseTiming:
        return LeaseTiming(lease_duration=self.lease_duration_seconds, renew_deadline=self.renew_deadline_seconds,
                           retry_period=self.retry_period_seconds)


class OperatorConfig(_Model):
    clusters: dict[str, KafkaConnection] = Field(default_factory=dict)
    default_cluster: str = DEFAULT_CLUSTER
    poll_interval_seconds: float = Field(default=2.0, gt=0)
    execution: ExecutionDefaults = ExecutionDefaults()
    refill: RefillConfig = RefillConfig()
    balance_score: BalanceScoreConfig = BalanceScoreConfig()
    auto_propose: AutoProposeConfig = AutoProposeConfig()
    namespace: str = Field(default="default", description="The operator's own namespace (Secrets are read here).")
    metrics_port: int = 8080
    planner: PlannerConfig = PlannerConfig()
    leader_election: LeaderElectionConfig = LeaderElectionConfig()

    @model_validator(mode="after")
    def _auto_propose_known_clusters(self) -> Self:
        unknown = sorted(set(self.auto_propose.clusters) - set(self.clusters))
        if unknown:
            raise ValueError(f"autoPropose.clusters names no configured cluster: {', '.join(unknown)} "
                             f"(known: {', '.join(sorted(self.clusters)) or 'none'})")
        return self

    def connection(self, cluster_ref: str | None) -> KafkaConnection:
        name = cluster_ref or self.default_cluster
        try:
            return self.clusters[name]
        except KeyError:
            known = ", ".join(sorted(self.clusters)) or "none"
            raise KeyError(f"no Kafka cluster named {name!r} in the operator's configuration (known: {known})") \
                from None

    @classmethod
    def load(cls, environ: dict[str, str] | None = None) -> OperatorConfig:
        env = dict(os.environ if environ is None else environ)
        data: dict[str, object] = {}
        if env.get("KPO_CONFIG"):
            loaded = yaml.safe_load(Path(env["KPO_CONFIG"]).read_text()) or {}
            if not isinstance(loaded, dict):
                raise ValueError(f"{env['KPO_CONFIG']} must hold a mapping")
            data.update(loaded)
        clusters = dict(data.get("clusters", {}) or {})  # type: ignore[call-overload]
        if env.get("KPO_BOOTSTRAP_SERVERS") and DEFAULT_CLUSTER not in clusters:
            clusters[DEFAULT_CLUSTER] = {"bootstrapServers": env["KPO_BOOTSTRAP_SERVERS"]}
        data["clusters"] = clusters
        if env.get("KPO_PLANNER_CONFIG"):
            planner = yaml.safe_load(Path(env["KPO_PLANNER_CONFIG"]).read_text()) or {}
            if not isinstance(planner, dict):
                raise ValueError(f"{env['KPO_PLANNER_CONFIG']} must hold a mapping")
            data["planner"] = planner
        if env.get("KPO_NAMESPACE"):
            data["namespace"] = env["KPO_NAMESPACE"]
        if env.get("KPO_POLL_INTERVAL"):
            data["pollIntervalSeconds"] = float(env["KPO_POLL_INTERVAL"])
        if env.get("KPO_LEADER_ELECTION"):
            election = dict(data.get("leaderElection", {}) or {})  # type: ignore[call-overload]
            election["enabled"] = env["KPO_LEADER_ELECTION"].strip().lower() in ("1", "true", "yes", "on")
            data["leaderElection"] = election
        return cls.model_validate(data)
