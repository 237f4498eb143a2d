#!/usr/bin/env bash
# kpo's own entry point for Spark-on-Kubernetes pods (the planner image), written for the pyspark wheel in /opt/kpo.
#
# Spark's Kubernetes scheduler starts the driver pod with the arguments `driver --properties-file ... --class ...
# <main> <args>` and each executor pod with `executor` and its settings in SPARK_* variables; this script turns
# those into the two commands Spark's own image would run. It exists because the official `spark` image cannot be had
# everywhere kpo is built, and because the pyspark wheel (the Spark the operator plans with) ships no entry point.
set -euo pipefail

: "${SPARK_HOME:?SPARK_HOME must point at the pyspark wheel}"
SPARK_CLASSPATH="${SPARK_CLASSPATH:+$SPARK_CLASSPATH:}$SPARK_HOME/jars/*"

# Java options Spark hands to executors as SPARK_JAVA_OPT_0, SPARK_JAVA_OPT_1, ... in that order.
executor_java_opts=()
while IFS='=' read -r name value; do
  executor_java_opts+=("$value")
done < <(env | grep '^SPARK_JAVA_OPT_' | sort -t_ -k4 -n || true)

case "${1:-}" in
  driver)
    shift
    # The driver advertises its pod IP rather than the headless Service Spark makes for it: executors then reach it
    # without cluster DNS, and pod IPs are routable between pods in every Kubernetes network model.
    exec "$SPARK_HOME/bin/spark-submit" \
      --conf "spark.driver.bindAddress=${SPARK_DRIVER_BIND_ADDRESS:?}" \
      --conf "spark.driver.host=$SPARK_DRIVER_BIND_ADDRESS" \
      --conf "spark.executorEnv.SPARK_DRIVER_POD_IP=$SPARK_DRIVER_BIND_ADDRESS" \
      --deploy-mode client "$@"
    ;;
  executor)
    shift
    exec "${JAVA_HOME:?}/bin/java" "${executor_java_opts[@]}" \
      -Xms"${SPARK_EXECUTOR_MEMORY:?}" -Xmx"$SPARK_EXECUTOR_MEMORY" \
      -cp "$SPARK_CLASSPATH" \
      org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend \
      --driver-url "${SPARK_DRIVER_URL:?}" \
      --executor-id "${SPARK_EXECUTOR_ID:?}" \
      --cores "${SPARK_EXECUTOR_CORES:?}" \
      --app-id "${SPARK_APPLICATION_ID:?}" \
      --hostname "${SPARK_EXECUTOR_POD_IP:?}" \
      --resourceProfileId "${SPARK_RESOURCE_PROFILE_ID:-0}" \
      --podName "${SPARK_EXECUTOR_POD_NAME:?}" \
      "$@"
    ;;
  *)
    exec "$@"
    ;;
esac
