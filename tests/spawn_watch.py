"""What a test started: the real Ray, sshd or pulumi engine processes this test process spawned
while the test ran, seen through Python's audit events (`subprocess.Popen`, `os.posix_spawn`;
https://docs.python.org/3/library/audit_events.html), so tests/conftest.py can fail a test that
starts one of them without the marker that keeps it out of the fast tier.

Only the test process's own spawns are seen (not what a child starts in turn); a child that
starts a node of a local Ray cluster carries RAY_GCP_LOCAL_CLUSTER in its environment, one
that runs the engine a PULUMI_BACKEND_URL (engine_env, EngineWorkspace) or is the engine.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

RAY_PROGRAMS = ("ray", "gcs_server", "raylet")
LOCAL_CLUSTER_ENV = "RAY_GCP_LOCAL_CLUSTER"  # bootstrap/local_cluster.py's TAG_ENV


def kind_of(argv: Sequence[Any], env: Mapping[Any, Any] | None) -> str | None:
    """`ray`, `sshd` or `engine` for a command line that starts one, else None."""
    words = [os.fsdecode(word) if isinstance(word, bytes) else str(word) for word in argv]
    if not words:
        return None
    program = os.path.basename(words[0])
    if program == "sshd":
        return "sshd"
    if program in RAY_PROGRAMS or any("ray start" in word for word in words):
        return "ray"
    if program.startswith("pulumi") or "tests.engine_driver" in words:
        return "engine"
    names = {os.fsdecode(k) if isinstance(k, bytes) else str(k) for k in (env or {})}
    if LOCAL_CLUSTER_ENV in names:
        return "ray"
    if "PULUMI_BACKEND_URL" in names:
        return "engine"
    return None


class SpawnWatch:
    """An audit hook (installed once: hooks cannot be removed) recording, between `begin` and
    `end`, the first command line of each kind this process spawned."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.watching = False
        self.seen: dict[str, str] = {}

    def begin(self) -> None:
        self.seen, self.watching = {}, True

    def end(self) -> None:
        self.watching = False

    def started(self) -> dict[str, str]:
        """kind -> the first command line of that kind the test spawned."""
        return dict(self.seen)

    def audit(self, event: str, args: tuple[Any, ...]) -> None:
        if not self.watching or os.getpid() != self.pid:
            return
        if event == "subprocess.Popen":
            _, argv, _, env = args
        elif event == "os.posix_spawn":
            _, argv, env = args
        else:
            return
        if isinstance(argv, str | bytes):
            argv = [argv]
        kind = kind_of(list(argv or []), os.environ if env is None else env)
        if kind is not None and kind not in self.seen:
            self.seen[kind] = " ".join(map(str, argv))[:160]
