"""Kubernetes I/O other than Kopf wiring: ConfigMaps kpo owns, Secrets it is allowed to read."""
