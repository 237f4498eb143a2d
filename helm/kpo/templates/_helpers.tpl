{{/* Names and labels shared by every template. */}}

{{- define "kpo.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "kpo.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The leader-election Lease, in the release namespace. */}}
{{- define "kpo.leaseName" -}}
{{- .Values.leaderElection.leaseName | default (printf "%s-leader" (include "kpo.fullname" . | trunc 56 | trimSuffix "-")) -}}
{{- end -}}

{{- define "kpo.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kpo.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "kpo.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "kpo.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: kpo
{{- end -}}

{{- define "kpo.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "kpo.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* repository:tag, or repository@digest when a digest is given. Argument: dict "image" <values> "chart" .Chart */}}
{{- define "kpo.imageRef" -}}
{{- if .image.digest -}}
{{- printf "%s@%s" .image.repository .image.digest -}}
{{- else -}}
{{- printf "%s:%s" .image.repository (default .chart.AppVersion .image.tag) -}}
{{- end -}}
{{- end -}}

{{- define "kpo.sparkNamespace" -}}
{{- default .Release.Namespace .Values.planner.sparkApplication.namespace -}}
{{- end -}}

{{- define "kpo.sparkServiceAccountName" -}}
{{- default (printf "%s-spark" (include "kpo.fullname" .)) .Values.planner.sparkApplication.serviceAccount.name -}}
{{- end -}}

{{/*
The Secrets the Kafka connections name, as JSON: {"<namespace>": ["<name>", ...]}. A reference without a namespace
is read in the release namespace, which is the operator's own. Only these get a `get` rule (resourceNames).
*/}}
{{- define "kpo.secretNames" -}}
{{- $byNamespace := dict -}}
{{- range $cluster, $connection := .Values.kafka.clusters -}}
{{- $refs := list -}}
{{- with $connection.sasl -}}
{{- $refs = append $refs .passwordSecret -}}
{{- with .usernameSecret }}{{ $refs = append $refs . }}{{ end -}}
{{- end -}}
{{- with $connection.tls -}}
{{- range $field := list "caSecret" "certSecret" "keySecret" -}}
{{- with (index $connection.tls $field) }}{{ $refs = append $refs . }}{{ end -}}
{{- end -}}
{{- end -}}
{{- range $ref := $refs -}}
{{- if $ref -}}
{{- $namespace := default $.Release.Namespace $ref.namespace -}}
{{- $names := get $byNamespace $namespace | default list -}}
{{- if not (has $ref.name $names) -}}
{{- $_ := set $byNamespace $namespace (append $names $ref.name | sortAlpha) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toJson $byNamespace -}}
{{- end -}}

{{/* The operator's config file (KPO_CONFIG): the shape of kpo.config.OperatorConfig. */}}
{{- define "kpo.operatorConfig" -}}
clusters:
{{ toYaml .Values.kafka.clusters | indent 2 }}
defaultCluster: {{ .Values.kafka.defaultCluster | quote }}
pollIntervalSeconds: {{ .Values.operator.pollIntervalSeconds }}
execution:
  maxMoves: {{ .Values.operator.execution.maxMoves }}
  maxMovesPerBroker: {{ .Values.operator.execution.maxMovesPerBroker }}
  maxMovesPerBrokerDirection: {{ .Values.operator.execution.maxMovesPerBrokerDirection }}
refill:
  firstProbeSeconds: {{ .Values.operator.refill.firstProbeSeconds }}
  probeGrowth: {{ .Values.operator.refill.probeGrowth }}
  maxWatchingTicks: {{ .Values.operator.refill.maxWatchingTicks }}
namespace: {{ .Release.Namespace | quote }}
metricsPort: {{ .Values.metrics.port }}
balanceScore:
  intervalSeconds: {{ .Values.metrics.balanceScore.intervalSeconds }}
  topicsPerRequest: {{ .Values.metrics.balanceScore.topicsPerRequest }}
{{- with .Values.leaderElection }}
leaderElection:
  enabled: {{ .enabled }}
  leaseName: {{ include "kpo.leaseName" $ | quote }}
  leaseDurationSeconds: {{ .leaseDurationSeconds }}
  renewDeadlineSeconds: {{ .renewDeadlineSeconds }}
  retryPeriodSeconds: {{ .retryPeriodSeconds }}
{{- end }}
{{- with .Values.autoPropose }}
{{- if .clusters }}
autoPropose:
  intervalSeconds: {{ .intervalSeconds }}
  topicsPerRequest: {{ .topicsPerRequest }}
  clusters:
{{ toYaml .clusters | indent 4 }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The planner's settings (KPO_PLANNER_CONFIG). */}}
{{- define "kpo.plannerConfig" -}}
{{- $spark := .Values.planner.sparkApplication -}}
backend: {{ .Values.planner.backend }}
workDir: {{ .Values.planner.workDir | quote }}
{{- if eq .Values.planner.backend "sparkApplication" }}
sparkApplication:
  namespace: {{ include "kpo.sparkNamespace" . | quote }}
  image: {{ include "kpo.imageRef" (dict "image" $spark.image "chart" .Chart) | quote }}
  imagePullPolicy: {{ $spark.image.pullPolicy }}
  sparkVersion: {{ $spark.sparkVersion | quote }}
  mainApplicationFile: local:///opt/kpo/planner-job.py
  serviceAccount: {{ include "kpo.sparkServiceAccountName" . | quote }}
  driver:
{{ toYaml $spark.driver | indent 4 }}
  executor:
{{ toYaml $spark.executor | indent 4 }}
  sparkConf:
{{ toYaml $spark.sparkConf | indent 4 }}
  timeoutSeconds: {{ $spark.timeoutSeconds }}
{{- end }}
{{- end -}}

{{/*
The throttle record ConfigMap of a Kafka cluster, as kpo.k8s.throttle_record.record_name names it: the cluster's name
where it is a DNS label, else a slug of it and the first 8 hex digits of its SHA-256.
*/}}
{{- define "kpo.throttleRecordName" -}}
{{- $slug := regexReplaceAll "[^a-z0-9-]+" (lower .) "-" | trimAll "-" | trunc 40 -}}
{{- if eq $slug . -}}
kpo-throttles-{{ $slug }}
{{- else if $slug -}}
kpo-throttles-{{ $slug }}-{{ sha256sum . | trunc 8 }}
{{- else -}}
kpo-throttles-{{ sha256sum . | trunc 8 }}
{{- end -}}
{{- end }}
