"""One folder per custom resource, each with the same five modules (docs/contributing.md says how to add one):

- ``spec.py``: the spec, through the API models, as the values the life cycle decides on;
- ``lifecycle.py``: phases, transitions and decisions — pure, no I/O (an import-linter contract keeps it so);
- ``status.py``: the status both ways — what the life cycle remembers, read back, and the fields a decision writes;
- ``reconciler.py``: one tick's I/O around the life cycle (observe, decide, act), through the KafkaAdmin Protocol;
- ``handlers.py``: the kind as the shell sees it (a :class:`~kpo.resources.shell.Kind`) and nothing else.

What every kind shares is here once: :mod:`kpo.resources.outcomes` (how a tick ends) and
:mod:`kpo.resources.shell` (the Kopf wiring).
"""
