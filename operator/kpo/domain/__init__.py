"""The pure core of kpo: models, diffs, validation, scheduling and key-remap maths.

Nothing in this layer performs I/O or imports a Kubernetes, Kafka or Spark client (an import-linter contract checks
it), so every decision kpo takes can be unit-tested with plain values.
"""
