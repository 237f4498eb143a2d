"""The test bed's real node: containerd and a kubelet named ``kpo-node``, with kube-scheduler and the workload
controllers, attached to a running test bed by ``testbed/node/node.sh``.

The node is a shell script's job (it sets up a bridge, cgroups and mounts as root); this module only starts and stops
it for a test bed directory and names the images ``provision.sh node`` built, so Python never guesses a tag.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from kpo_testbed.paths import TESTBED_DIR, cache_root

NODE_SCRIPT = TESTBED_DIR / "node" / "node.sh"
NODE_NAME = "kpo-node"
# The node's address, the gateway of its pod bridge: pods on the pod network reach the host (and hostNetwork pods,
# such as the Spark driver, are reached) there.
NODE_IP = "10.244.78.1"


@dataclass(frozen=True)
class NodeImages:
    """The images ``provision.sh node`` built from the committed tree, imported by the node on start."""

    tag: str

    @property
    def operator(self) -> str:
        return f"localhost/kpo/operator:{self.tag}"

    @property
    def planner(self) -> str:
        return f"localhost/kpo/planner:{self.tag}"

    @classmethod
    def built(cls) -> NodeImages:
        tag_file = cache_root() / "images" / "kpo-image-tag"
        if not tag_file.is_file():
            raise RuntimeError("kpo's images are not built; run testbed/provision.sh node (make provision)")
        return cls(tag_file.read_text().strip())


def node_dir(state_dir: Path) -> Path:
    return state_dir / "node"


def is_up(state_dir: Path) -> bool:
    pid_file = node_dir(state_dir) / "kubelet.pid"
    try:
        os.kill(int(pid_file.read_text()), 0)
    except (OSError, ValueError):
        return False
    return True


def _run(state_dir: Path, action: str, timeout: float) -> None:
    env = {**os.environ, "KPO_TESTBED_DIR": str(state_dir)}
    done = subprocess.run(["bash", str(NODE_SCRIPT), action], env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"node.sh {action} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")


def up(state_dir: Path) -> bool:
    """Attach the node to the test bed in ``state_dir``; False when it was already there."""
    if is_up(state_dir):
        return False
    _run(state_dir, "up", timeout=300)
    return True


def down(state_dir: Path) -> None:
    """Stop the node and undo what its pods left on the host (a no-op when no node was started)."""
    if node_dir(state_dir).exists():
        _run(state_dir, "down", timeout=300)
