"""A stack's lock in pulumi's DIY backend (a file folder or a `gs://` bucket): shown, and cleared
only when the user asks (`invoke unlock`).

The engine takes a stack's lock for every update, refresh, destroy and state import: an object
`.pulumi/locks/<org>/<project>/<stack>/<uuid>.json` holding who took it (pid, user, host,
time), deleted when the run ends (pkg/backend/diy/lock.go). A run killed half way leaves it, and
every later run of the stack fails with "the stack is currently locked ... `pulumi cancel`";
that advice fails for a stack this tool keeps in its own backend (a bare `pulumi cancel` does
not know the backend, and asks for Pulumi Cloud's token). So the lock's failure becomes one
line naming who holds it since when, whether that process still runs (when it ran on this
machine), and `invoke unlock`, which clears the lock through the engine's own `pulumi cancel`
(`CancelCurrentUpdate`: every lock file of the stack deleted) with the stack's backend, after
refusing a lock whose process still runs here.
"""

from __future__ import annotations

import json
import os
import re
import socket
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TextIO

from ops.errors import OpsError
from ops.paths import BACKEND_ENV

_LOCKED = "the stack is currently locked"
# `  <url>: created by <user>@<host> (pid <n>) at <RFC 3339 time>` (diy/lock.go checkForLock)
_HOLDER = re.compile(r"^\s*(?P<url>\S+): created by (?P<user>[^@\s]*)@(?P<host>\S*) "
                     r"\(pid (?P<pid>\d+)\) at (?P<since>\S+)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class Lock:
    """One lock file of a stack, as the engine describes it."""

    url: str
    user: str
    host: str
    pid: int
    since: str

    @property
    def here(self) -> bool:
        return self.host == socket.gethostname()

    @property
    def running(self) -> bool | None:
        """Whether the holder still runs: known only for a process of this machine."""
        if not self.here:
            return None
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        try:  # a zombie (killed, not yet reaped by its parent) runs no more
            return Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
        except (OSError, IndexError):
            return True

    @property
    def command(self) -> str | None:
        """What the holder runs, when it runs on this machine: the task (`invoke up -c x.yaml`,
        `ray-gcp scale ...`) the engine was started by, else the engine's own command line."""
        if not self.here:
            return None
        pid, engine = self.pid, None
        for _ in range(8):  # the engine, the task above it, ...
            words = _cmdline(pid)
            if not words:
                break
            engine = engine or words
            task = _task_words(words)
            if task:
                return " ".join(task)
            pid = _parent(pid)
        return " ".join(Path(engine[0]).name if i == 0 else word
                        for i, word in enumerate(engine[:4])) if engine else None

    def describe(self) -> str:
        state = {True: "still running", False: "no longer running: a run killed half way "
                 "left the lock", None: "on another machine"}[self.running]
        command = self.command if self.running else None
        running = f", `{command}`" if command else ""
        return (f"by {self.user}@{self.host} (pid {self.pid}{running}, {state}) since "
                f"{_shown(self.since)}")


def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [word.decode(errors="replace") for word in raw.split(b"\0") if word]


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def _task_words(words: list[str]) -> list[str] | None:
    """`invoke <task> ...` or `ray-gcp <task> ...` out of a process's command line (a python
    running `-m invoke`, or either script)."""
    for index, word in enumerate(words):
        name = Path(word).name
        if name in ("invoke", "inv", "ray-gcp") and (index == 0 or words[index - 1] == "-m"
                                                     or "python" in Path(words[0]).name):
            return ["ray-gcp" if name == "ray-gcp" else "invoke", *words[index + 1:]]
    return None


def _shown(since: str) -> str:
    try:
        return datetime.fromisoformat(since).strftime("%Y-%m-%d %H:%M:%S %z").strip()
    except ValueError:
        return since


def locks_in(text: str) -> list[Lock] | None:
    """The locks an engine failure names; None when it is no lock failure."""
    if _LOCKED not in text:
        return None
    return [Lock(m["url"], m["user"], m["host"], int(m["pid"]), m["since"])
            for m in _HOLDER.finditer(text)]


class StackLocked(OpsError):
    """The engine met the stack's lock: nothing was done."""

    def __init__(self, message: str, locks: list[Lock]) -> None:
        super().__init__(message)
        self.locks = locks


def locked_error(stack: str, operation: str, locks: list[Lock]) -> StackLocked:
    """One line: who holds stack's lock since when, and how to clear it."""
    if not locks:
        return StackLocked(f"stack {stack!r} is locked by another run: wait for it to end, or "
                           f"clear the lock with `invoke unlock -s {stack}` if none runs", locks)
    held = "; ".join(lock.describe() for lock in locks)
    if any(lock.running for lock in locks):
        advice = "wait for that run to end, then run this again"
    else:
        advice = (f"if no run of it is going on, clear the lock with `invoke unlock -s {stack}`"
                  ", then run this again (it settles what the killed run left half done)")
    return StackLocked(f"cannot {operation} stack {stack!r}: it is locked {held}: {advice}",
                       locks)


def unlock(stack: str, out: TextIO) -> None:
    """`invoke unlock`: show the stack's locks, refuse one whose process still runs on this
    machine, else clear them (the engine's `pulumi cancel`, on the stack's backend)."""
    from pulumi import automation as auto

    from ops.stacks.stack import select_stack

    automation_stack = select_stack(stack)
    locks = current_locks(stack)
    if locks is not None and not locks:
        print(f"stack {stack!r} is not locked: nothing to clear", file=out, flush=True)
        return
    for lock in locks or []:
        if lock.running:
            raise OpsError(f"stack {stack!r} is locked {lock.describe()}: that run still "
                           f"goes on; wait for it to end (or stop pid {lock.pid}) first")
    try:
        automation_stack.cancel()
    except auto.CommandError as exc:
        reason = [line for line in str(exc).splitlines() if "error:" in line]
        raise OpsError(f"cannot clear the lock of stack {stack!r}: "
                       f"{reason[-1].strip() if reason else 'pulumi cancel failed'}") from None
    for lock in locks or []:
        print(f"cleared the lock of stack {stack!r} held {lock.describe()}", file=out)
    if locks is None:
        print(f"cleared the locks of stack {stack!r}", file=out)
    print("now run the command again: it settles what a killed run left half done",
          file=out, flush=True)


def current_locks(stack: str) -> list[Lock] | None:
    """The lock files of `stack` in its backend, read without taking anything: a folder
    (`file://`) or a Cloud Storage bucket (`gs://`, through the JSON API, at
    $STORAGE_EMULATOR_HOST when set, as the engine's own client does). None when the backend
    is neither (pulumi's own login) or cannot be read."""
    from ops.stacks.stack import backend_env

    url = backend_env(stack).get(BACKEND_ENV) or os.environ.get(BACKEND_ENV, "")
    try:
        if url.startswith("file://"):
            return _file_locks(Path(os.path.expanduser(url.removeprefix("file://"))), stack)
        if url.startswith("gs://"):
            return _bucket_locks(url, stack)
    except (OSError, ValueError):
        return None
    return None


def _lock(url: str, raw: bytes) -> Lock:
    held = json.loads(raw)
    return Lock(url, str(held.get("username", "")), str(held.get("hostname", "")),
                int(held.get("pid") or 0), str(held.get("timestamp", "")))


def _file_locks(root: Path, stack: str) -> list[Lock]:
    folder = root / ".pulumi" / "locks"
    return [_lock(f"file://{path}", path.read_bytes())
            for path in sorted(folder.glob(f"**/{stack}/*.json"))
            if path.relative_to(folder).parts[-2] == stack]


def _bucket_locks(url: str, stack: str) -> list[Lock]:
    from ops.lifecycle.state_bucket import StateBucket

    bucket = StateBucket.of(url)
    return [_lock(f"gs://{bucket.name}/{name}", bucket.read(name))
            for name in bucket.names(f"{bucket.prefix}.pulumi/locks/")
            if name.endswith(".json") and name.split("/")[-2] == stack]
