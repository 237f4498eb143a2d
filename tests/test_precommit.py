"""The pre-commit hooks run exactly what ``make lint`` runs, so a commit that passes them passes CI's lint."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def _lint_commands() -> list[str]:
    makefile = (ROOT / "Makefile").read_text()
    recipe = re.search(r"^lint: .*\n((?:\t.*\n)+)", makefile, re.MULTILINE)
    assert recipe, "no lint target in the Makefile"
    return [line.strip().replace("$(VENV)", ".venv") for line in recipe.group(1).splitlines()]


def test_every_lint_command_is_a_pre_commit_hook() -> None:
    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())
    entries = [hook["entry"] for repo in config["repos"] for hook in repo["hooks"]]
    assert _lint_commands(), "make lint runs nothing?"
    for command in _lint_commands():
        assert command in entries, f"make lint runs {command!r}, the pre-commit hooks do not"
    assert all(not hook.get("pass_filenames", True) for repo in config["repos"] for hook in repo["hooks"]), \
        "each hook checks the whole tree, as make lint does"
