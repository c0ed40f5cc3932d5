"""The process table as Linux's /proc shows it, no library needed: a process's parent and state
(`/proc/PID/stat` is "pid (comm) state ppid ...", and comm may hold spaces or parentheses, so
the fields are read after its last ")"), and every process's children."""

from __future__ import annotations

from pathlib import Path

PROC = Path("/proc")


def parent_and_state(pid: int) -> tuple[int, str]:
    """(parent pid, state letter: "Z" for a zombie); OSError once the process is gone."""
    fields = (PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[1]), fields[0]


def children() -> dict[int, list[int]]:
    """Parent pid -> its children's pids, of every process still listed."""
    found: dict[int, list[int]] = {}
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent, _ = parent_and_state(int(entry.name))
        except (OSError, ValueError, IndexError):
            continue
        found.setdefault(parent, []).append(int(entry.name))
    return found
