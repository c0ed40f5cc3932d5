"""Find and stop exactly the Ray processes of one local cluster, never anyone else's.

`ray stop` kills every Ray process on the machine. A local cluster instead runs with its own
`RAY_TMPDIR`, so its daemons name that directory on their command line (session, log and
socket paths) and the Ray client server names the cluster's GCS address; their children (Ray
workers, agents) are found through the process tree.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import time
from pathlib import Path

PROC = Path("/proc")


def _cmdline(pid: int) -> str:
    try:
        return (PROC / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(
            "utf-8", "replace"
        )
    except OSError:
        return ""


def _parent(pid: int) -> int | None:
    try:
        stat = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces or ')': fields follow the last ')'.
    return int(stat.rsplit(")", 1)[1].split()[1])


def _all_pids() -> list[int]:
    return [int(entry.name) for entry in PROC.iterdir() if entry.name.isdigit()]


def processes_matching(markers: list[str]) -> set[int]:
    """Processes whose command line contains one of `markers`, with all their descendants."""
    own = os.getpid()
    pids = _all_pids()
    found = {
        pid for pid in pids
        if pid != own and any(marker in _cmdline(pid) for marker in markers)
    }
    parents = {pid: _parent(pid) for pid in pids}
    grew = True
    while grew:
        children = {pid for pid, parent in parents.items() if parent in found} - found
        found |= children
        grew = bool(children)
    return found


def _alive(pid: int) -> bool:
    try:
        state = (PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def become_subreaper() -> None:
    """Ray daemonizes its processes; as their subreaper we can reap them when stopped, so
    no zombie outlives the cluster (best effort: Linux only)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


_PR_SET_CHILD_SUBREAPER = 36


def stop_processes(markers: list[str], grace_seconds: float = 10.0) -> set[int]:
    """SIGTERM the cluster's processes, SIGKILL what is left after the grace period; return
    the pids that were stopped (callers can check none of them is alive)."""
    stopped: set[int] = set()
    for _ in range(3):  # daemons may fork while being stopped; sweep until none remain
        pids = processes_matching(markers) - stopped
        if not pids:
            break
        _signal(pids, signal.SIGTERM)
        deadline = time.monotonic() + grace_seconds
        while time.monotonic() < deadline and any(_alive(pid) for pid in pids):
            time.sleep(0.2)
        _signal({pid for pid in pids if _alive(pid)}, signal.SIGKILL)
        stopped |= pids
    deadline = time.monotonic() + grace_seconds
    while time.monotonic() < deadline and any(_alive(pid) for pid in stopped):
        time.sleep(0.1)
    _reap(stopped)
    return stopped


def any_alive(pids: set[int]) -> bool:
    return any(_alive(pid) for pid in pids)


def _reap(pids: set[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ChildProcessError):  # not our child: its parent reaps it
            os.waitpid(pid, os.WNOHANG)


def _signal(pids: set[int], signum: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)
