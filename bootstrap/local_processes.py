"""Find and stop exactly the Ray processes of one local cluster, never anyone else's.

`ray stop` kills every Ray process on the machine. A local cluster instead runs with its own
`RAY_TMPDIR`, so its daemons name that directory on their command line (session, log and
socket paths) and the Ray client server names the cluster's GCS address; and every process it
starts carries its tag in its environment (`RAY_GCP_LOCAL_CLUSTER=<its folder>`). A process is
the cluster's only if it is the caller's own (its real and effective uid), names a marker on
its command line and, given a tag, holds that exact entry in its environment (a `tail -f` of
the cluster's log names the folder too, but was not started by it); their children (Ray
workers, agents), the caller's own too, are found through the process tree. Another user's
process is never looked into nor signalled.
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


def _is_ours(pid: int, uid: int) -> bool:
    """Whether the process's real and effective uids are `uid` (/proc/<pid>/status)."""
    try:
        status = (PROC / str(pid) / "status").read_text()
    except OSError:
        return False
    line = next((line for line in status.splitlines() if line.startswith("Uid:")), "")
    return line.split()[1:3] == [str(uid), str(uid)]


def _holds(pid: int, entry: str) -> bool:
    """Whether the process's environment holds exactly `entry` (`NAME=value`)."""
    try:
        environment = (PROC / str(pid) / "environ").read_bytes()
    except OSError:
        return False
    return entry.encode() in environment.split(b"\0")


def processes_matching(markers: list[str], tag: str | None = None) -> set[int]:
    """The caller's own processes whose command line contains one of `markers` (and, given
    `tag`, whose environment holds that entry), with all their descendants that are the
    caller's own too."""
    own, uid = os.getpid(), os.getuid()
    pids = [pid for pid in _all_pids() if pid != own and _is_ours(pid, uid)]
    found = {
        pid for pid in pids
        if any(marker in _cmdline(pid) for marker in markers)
        and (tag is None or _holds(pid, tag))
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


def stop_processes(markers: list[str], tag: str | None = None,
                   grace_seconds: float = 10.0) -> set[int]:
    """SIGTERM the cluster's processes (processes_matching's), SIGKILL what is left after the
    grace period; return the pids that were stopped (callers can check none of them is
    alive)."""
    stopped: set[int] = set()
    for _ in range(3):  # daemons may fork while being stopped; sweep until none remain
        pids = processes_matching(markers, tag) - stopped
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
        # gone, or (a pid reused meanwhile by another user's process) not ours to signal
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signum)
