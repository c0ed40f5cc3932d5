"""The small per-user background processes the tasks keep (ops.remote.warm_daemon's warm SSH
connections, ops.stacks.outputs_keeper's stack outputs): how long they outlive their last request
($RAY_GCP_SSH_PERSIST), their unix sockets (0600 from their creation, in a 0700 folder of
ours, reached through the folder's descriptor), who may ask (SO_PEERCRED: only our uid), and
starting one detached, its settings (secrets among them) over stdin, never argv or disk.

They hold the stack's private key, the Ray token and the outputs, so each starts with a
minimal environment (`minimal_environment`: where things are, the locale, our own RAY_GCP_
settings, gcloud's and the proxy's; never PULUMI_CONFIG_PASSPHRASE or any other secret the
task's shell holds), and its first act (`main_with_settings`) is to make itself undumpable:
no core file (RLIMIT_CORE 0) and, on Linux, PR_SET_DUMPABLE 0 (no core, no ptrace or
/proc/<pid>/mem by another process of the user, /proc/<pid>/environ root's only).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import struct
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ops.errors import OpsError

KEPT_ENV = frozenset({
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "TZ", "TMPDIR", "XDG_RUNTIME_DIR",
    "GOOGLE_APPLICATION_CREDENTIALS",  # a path: gcloud's IAP tunnel (a ProxyCommand) reads it
    "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE",
    "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
})
KEPT_ENV_PREFIXES = ("LC_", "RAY_GCP_", "CLOUDSDK_")  # the locale; ours; gcloud's settings
PR_SET_DUMPABLE = 4  # <linux/prctl.h>
PERSIST_ENV = "RAY_GCP_SSH_PERSIST"
DEFAULT_IDLE_SECONDS = 600.0  # what OpenSSH users often give ControlPersist
PROJECT_ROOT = Path(__file__).resolve().parents[2]


def idle_seconds() -> float:
    """How long a background process outlives its last request ($RAY_GCP_SSH_PERSIST; 0: none
    is kept)."""
    try:
        return max(0.0, float(os.environ.get(PERSIST_ENV, DEFAULT_IDLE_SECONDS)))
    except ValueError:
        raise OpsError(f"{PERSIST_ENV}={os.environ[PERSIST_ENV]!r} is not a number of "
                       "seconds: set it to e.g. 600, or 0 for no warm connections and no kept "
                       "outputs") from None


def peer_uid(connection: socket.socket) -> int:
    """The uid of the process at the other end of a unix socket (SO_PEERCRED)."""
    credentials = connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                        struct.calcsize("3i"))
    return struct.unpack("3i", credentials)[1]


def connect_socket(path: Path) -> socket.socket | None:
    """A connection to the process listening at `path`, or None when there is none (no file,
    or a socket nobody listens on: a process that died)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    try:
        directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        sock.close()
        return None
    try:
        # Through the folder's descriptor: a state folder deep in /tmp passes 108 bytes.
        sock.connect(f"/proc/self/fd/{directory}/{path.name}")
        return sock
    except OSError:
        sock.close()
        return None
    finally:
        os.close(directory)


def accept_own(listener: socket.socket, owner_uid: int) -> socket.socket | None:
    """The next connection to `listener` (whose timeout paces the caller's loop) from
    `owner_uid`; None after the timeout, or for another user's, closed unanswered."""
    try:
        connection, _ = listener.accept()
    except TimeoutError:
        return None
    if peer_uid(connection) != owner_uid:
        connection.close()  # another user: no answer at all
        return None
    return connection


def request_line(path: Path, request: dict[str, Any], limit: int = -1) -> bytes | None:
    """Send `request` as one JSON line to the process at `path`, and read its one-line
    answer (at most `limit` bytes); None when no process answers."""
    sock = connect_socket(path)
    if sock is None:
        return None
    with sock:
        try:
            sock.sendall(json.dumps(request).encode() + b"\n")
            return sock.makefile("rb").readline(limit)
        except OSError:
            return None


def only_one(lock_name: str) -> bool:
    """Whether this process is the only one serving the working folder's `lock_name`: an
    exclusive lock held (its descriptor left open) until the process ends."""
    lock = os.open(lock_name, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(lock)
        return False
    return True


@contextlib.contextmanager
def serving(name: str) -> Iterator[socket.socket]:
    """`listen_private(name)` in place of any socket a dead process left there, removed
    again when the block ends."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(name)
    listener = listen_private(name)
    try:
        yield listener
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name)
        listener.close()


def minimal_environment(environ: dict[str, str] | None = None) -> dict[str, str]:
    """What of `environ` (the task's) a background process starts with: KEPT_ENV and the
    KEPT_ENV_PREFIXES names, nothing else."""
    environ = dict(os.environ if environ is None else environ)
    return {name: value for name, value in environ.items()
            if name in KEPT_ENV or name.startswith(KEPT_ENV_PREFIXES)}


def undumpable() -> None:
    """No core file of this process, and (Linux) not dumpable: nothing it holds can be read
    from a core or by another process of the user (ptrace, /proc/<pid>/mem)."""
    import resource

    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if sys.platform.startswith("linux"):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")


def main_with_settings(serve: Callable[[dict[str, Any]], None]) -> None:
    """A background process's main: made undumpable before it reads anything, then its
    settings from stdin, then `serve(settings)`; any failure ends it quietly (the task that
    started it does without it), a failure to be made undumpable before anything is read."""
    try:
        undumpable()
    except OSError:
        return
    settings = json.loads(sys.stdin.read())
    sys.stdin.close()
    with contextlib.suppress(Exception):
        serve(settings)


def listen_private(name: str) -> socket.socket:
    """A unix socket listening at `name` in the working folder (bound by name: a full path can
    pass the 108-byte limit), 0600 from its creation: no window for another user."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    old_mask = os.umask(0o177)
    try:
        listener.bind(name)
    finally:
        os.umask(old_mask)
    listener.listen(16)
    return listener


def start_detached(module: str, settings: dict[str, Any]) -> None:
    """Run `python -m module` in the background, in a session of its own, with a minimal
    environment, `settings` as JSON on its stdin (a pipe made large enough to hold them, up
    to the system's 1 MiB default limit); it outlives the task and is never waited for."""
    process = subprocess.Popen(
        [sys.executable, "-m", module], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, start_new_session=True, cwd=PROJECT_ROOT, close_fds=True,
        env=minimal_environment(),
    )
    data = json.dumps(settings).encode()
    with contextlib.suppress(OSError):  # room for it all: the task does not wait on the reader
        fcntl.fcntl(process.stdin.fileno(), fcntl.F_SETPIPE_SZ, len(data))
    try:
        process.stdin.write(data)
        process.stdin.close()
    except OSError:
        process.kill()
    # It runs on alone in its own session, reparented when this task ends: not ours to wait
    # for (so Popen does not warn of a child left running).
    process.returncode = 0
