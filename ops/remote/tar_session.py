"""One ssh run on a node for a sync over the system's OpenSSH (ops.remote.openssh): a small
sh loop there (SCRIPT) that answers requests, and this side of it (Session). `rsync-up`
(ops.remote.tar_stream) asks `stat`, `sum` and ends with `send`; `rsync-down`
(ops.remote.tar_fetch) asks `list`, `read` and ends with `pack`.

Each request is a line `VERB BYTES` and that many bytes (NUL-separated paths, or a folder);
each answer but the last ends with a record `Z` (no record of any answer starts so):
- `stat`: `mode(hex) size mtime path` of each path there (GNU stat, links not followed);
- `sum`: `sha256sum -z` records of the paths;
- `list`: every entry under a folder (or the file) as GNU find sees it, the start followed
  if it is a link: `type mode(octal) size mtime path` then `L` + a link's target;
- `read`: each path's first FILTER_CAP bytes, base64, in the order asked (empty when unreadable);
- `send` (last): a tar on stdin unpacked in the folder by GNU tar, owned by whoever logs in,
  folders already there keeping their modes and times;
- `pack` (last): in the folder, the NUL-separated names that follow to the end of stdin (sent
  as they are found) as one GNU tar on stdout, each as it is read, a link sent as what it
  names, a file hard-linked to another sent whole (as the files they are: only files are
  taken here); tar's status is the run's (1 or 2: some could not be read).

A node without GNU tar (or, for `list`, GNU find) ends the run with NO_TOOLS_STATUS and
NoRemoteTar is raised: the caller serves that node over SFTP. The node's key is checked by
ssh against exactly its pin, before anything is asked.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
from typing import IO

from ops.errors import OpsError
from ops.remote.openssh import OpenSsh
from ops.remote.untrusted import FILTER_CAP, CappedTail, drain_in_background
from ops.stacks.stack import Node

NO_TOOLS = "ray-gcp: no GNU tar or find on the node"
NO_TOOLS_STATUS = 3
STDERR_LINES = 5  # enough to say why the node refused
STDERR_CAP = 8192  # bytes of the node's stderr kept to say it from
STAT_FORMAT = "%f %s %Y %n\\0"  # raw mode (hex), size, mtime (s), the path as asked
LIST_FORMAT = "%y %m %s %T@ %P\\0L%l\\0"  # type, mode, size, mtime, path; L + link target
ANSWER_END = b"Z\n"
_REFUSE = f"echo '{NO_TOOLS}' >&2; exit {NO_TOOLS_STATUS}"
SCRIPT = f"""case $(tar --version 2>/dev/null) in
  *"GNU tar"*) ;;
  *) {_REFUSE} ;;
esac
while read -r verb size; do
  case $verb in
  stat) head -c "$size" | xargs -0r stat --printf '{STAT_FORMAT}' -- 2>/dev/null ;;
  sum) head -c "$size" | xargs -0r sha256sum -z -- 2>/dev/null ;;
  list) start=$(head -c "$size"; echo x); start=${{start%x}}
    case $(find --version 2>/dev/null) in
      *"GNU findutils"*) ;;
      *) {_REFUSE} ;;
    esac
    find -H "$start" -printf '{LIST_FORMAT}' 2>/dev/null ;;
  read) head -c "$size" | xargs -0r sh -c 'for f; do
      head -c {FILTER_CAP} -- "$f" 2>/dev/null | base64 -w0; printf "\\0"; done' sh ;;
  send) folder=$(head -c "$size"; echo x); folder=${{folder%x}}
    mkdir -p -- "$folder" && cd -- "$folder" &&
    exec tar -x -p --no-same-owner --no-overwrite-dir -f -
    exit 1 ;;
  pack) folder=$(head -c "$size"; echo x); folder=${{folder%x}}
    exec tar -c -f - -C "$folder" --format=gnu --dereference --hard-dereference \\
      --no-recursion --null --verbatim-files-from -T -
    exit 1 ;;
  *) exit 0 ;;
  esac
  printf 'Z\\n'
done"""


class NoRemoteTar(OpsError):
    """The node has no GNU tar (or find) to serve the stream with."""


class NodeEnded(Exception):
    """The node's side ended before its answer; its status and stderr say why."""


class Session:
    """SCRIPT running on one node (its pin checked, its warm master used), and the requests
    to it. Leaving the block ends it and raises what the node said if it failed with a
    status other than those in `accepted`."""

    def __init__(self, openssh: OpenSsh, node: Node, doing: str) -> None:
        host, options = openssh.target(node)
        self.node = node
        self.doing = doing  # "sending to", "fetching from": how a failure is worded
        self.accepted = {0}
        self.status: int | None = None
        self.process = subprocess.Popen([openssh.ssh, *options, host, SCRIPT],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE)
        self.errors = CappedTail(STDERR_CAP)
        self.stderr = drain_in_background(self.process.stderr.read1, self.errors.write)

    @property
    def stdin(self) -> IO[bytes]:
        return self.process.stdin

    @property
    def stdout(self) -> IO[bytes]:
        return self.process.stdout

    def __enter__(self) -> Session:
        return self

    def __exit__(self, kind: type[BaseException] | None, *rest: object) -> None:
        ours = kind is not None and not issubclass(kind, NodeEnded)
        if ours:  # refused here (a file that cannot be sent): the node gets nothing more
            self.process.kill()
        with contextlib.suppress(BrokenPipeError):
            self.process.stdin.close()
        self.status = self.process.wait()
        self.stderr.join()
        self.process.stdout.close()
        if not ours and (self.status not in self.accepted or kind is not None):
            self._fail(self.status)

    def said(self) -> list[str]:
        """The node's last lines on stderr, blank ones left out."""
        return self.errors.lines()

    def ask(self, verb: str, paths: list[str]) -> list[bytes]:
        """The NUL-separated records the node answers `verb` on `paths` with. The paths
        are written by a thread while the answer is read: neither side waits on a full
        pipe."""
        payload = b"".join(path.encode(errors="surrogateescape") + b"\0" for path in paths)
        return self.ask_raw(verb, payload)

    def ask_raw(self, verb: str, payload: bytes) -> list[bytes]:
        """The records the node answers `verb` with, `payload` sent as it is."""
        writer = threading.Thread(target=self._request_quietly, args=(verb, payload))
        writer.start()
        answer = bytearray()
        while not (answer == ANSWER_END or answer.endswith(b"\0" + ANSWER_END)):
            chunk = os.read(self.process.stdout.fileno(), 1 << 16)
            if not chunk:
                writer.join()
                raise NodeEnded
            answer += chunk
        writer.join()
        return bytes(answer[:-len(ANSWER_END)]).split(b"\0")[:-1]

    def request(self, verb: str, payload: bytes) -> None:
        """A request whose answer is not read here (`send`, `pack`)."""
        try:
            self.process.stdin.write(f"{verb} {len(payload)}\n".encode() + payload)
            self.process.stdin.flush()
        except BrokenPipeError:
            raise NodeEnded from None

    def _request_quietly(self, verb: str, payload: bytes) -> None:
        with contextlib.suppress(NodeEnded):  # the reader sees the end and says so
            self.request(verb, payload)

    def _fail(self, status: int) -> None:
        said = self.said()
        if status == NO_TOOLS_STATUS and any(NO_TOOLS in line for line in said):
            raise NoRemoteTar(f"{self.node.name} has no GNU tar or find")
        hint = (" (the node's host key is not the one pinned: refusing to transfer)"
                if any("Host key verification failed" in line for line in said) else "")
        raise OpsError(f"{self.doing} {self.node.name} failed (exit {status}){hint}: "
                       f"{' / '.join(said[-STDERR_LINES:]) or 'no message'}")

