"""One folder per custom resource: ``spec.py`` (parse and validate), ``lifecycle.py`` (phases and decisions, pure),
``handlers.py`` (the only Kopf wiring for that kind)."""


from pydantic import ValidationError

from kpo.domain.reassignment import Problem


def spec_problems(error: ValidationError) -> list[Problem]:
    """What the API models refused in a spec (the CRD schema should have refused it first), one Problem a field."""
    return [Problem("spec." + ".".join(str(p) for p in e["loc"]), "InvalidSpec", e["msg"]) for e in error.errors()]
