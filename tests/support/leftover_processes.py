"""Which processes a test session left running: read from /proc (Linux), no library needed.

A process is the session's when it descends from the pytest process, or when its command line
or working directory lies under the session's base temp folder (daemons that detach with
setsid, such as a head's watchers and autostop daemon, are reparented to init but still run
from there). Zombies are already gone.
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.support.proc_table import PROC, parent_and_state


def _descends_from(pid: int, ancestor: int) -> bool:
    seen = set()
    while pid > 1 and pid not in seen:
        seen.add(pid)
        try:
            pid, _ = parent_and_state(pid)
        except (OSError, ValueError, IndexError):
            return False
        if pid == ancestor:
            return True
    return False


def leftover_processes(basetemp: Path) -> dict[int, str]:
    """pid -> command line of every live process of this session but pytest itself."""
    if not PROC.is_dir():
        return {}
    me, marker = os.getpid(), str(basetemp)
    found = {}
    for entry in PROC.iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        pid = int(entry.name)
        try:
            if parent_and_state(pid)[1] == "Z":
                continue
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(
                errors="replace").strip()
            cwd = os.readlink(entry / "cwd")
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile, or not ours to read
        if marker in command or cwd.startswith(marker) or _descends_from(pid, me):
            found[pid] = command
    return found
