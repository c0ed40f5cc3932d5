"""The outputs keeper: a small per-user background process holding the stack outputs the tasks
read last, in memory only, so a day-two task on an unchanged stack needs no pulumi CLI run
(ops.stacks.kept_outputs is the task's side and says when an answer may be used).

It listens on `keeper.sock` in the state folder's `.outputs-keeper/` (ops.paths.keeper_dir:
0700, ours), mode 0600 from its creation; a connection from another uid is closed unanswered
(SO_PEERCRED). Each connection is one request, a JSON line, answered with one JSON line:
- `{"get": slot, "key": key}`: `{"outputs": {...}}` when the outputs filed in `slot` were
  filed under `key`, else `{}`;
- `{"put": slot, "key": key, "outputs": {...}}`: `{"ok": true}`; it replaces what `slot`
  held (one slot per stack, project and backend: what it holds stays bounded);
- `{"stop": true}`: `{"bye": true}`, then it exits.
It exits when no request came for `idle_seconds`, or when another keeper already serves the
folder (a lock file beside the socket). Its first outputs reach it on stdin; nothing it holds
is written anywhere (no output streams; ops.stacks.background makes it undumpable, with a minimal
environment).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
from typing import Any

from ops.stacks.background import accept_own, main_with_settings, only_one, serving

SOCKET_NAME = "keeper.sock"
LOCK_NAME = "keeper.lock"
MAX_REQUEST = 64 << 20
REQUEST_TIMEOUT_S = 10.0


class Keeper:
    """Answers requests on `listener` until idle for `idle_seconds` or stopped."""

    def __init__(self, listener: socket.socket, idle_seconds: float) -> None:
        self.listener = listener
        self.idle_seconds = idle_seconds
        self.owner_uid = os.getuid()
        self.slots: dict[str, tuple[str, dict[str, Any]]] = {}
        self.last_active = time.monotonic()
        self.stopping = False
        self.lock = threading.Lock()

    def serve(self) -> None:
        self.listener.settimeout(1.0)
        while not self.stopping:
            with self.lock:
                if time.monotonic() - self.last_active > self.idle_seconds:
                    return
            connection = accept_own(self.listener, self.owner_uid)
            if connection is None:
                continue
            threading.Thread(target=self._handle, args=(connection,), daemon=True).start()

    def _handle(self, connection: socket.socket) -> None:
        with contextlib.suppress(OSError, ValueError, TypeError, KeyError), connection:
            connection.settimeout(REQUEST_TIMEOUT_S)
            request = json.loads(connection.makefile("rb").readline(MAX_REQUEST))
            connection.sendall(json.dumps(self.answer(request)).encode() + b"\n")
        with self.lock:
            self.last_active = time.monotonic()

    def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            if "get" in request:
                key, outputs = self.slots.get(str(request["get"]), ("", {}))
                return {"outputs": outputs} if key and key == request.get("key") else {}
            if "put" in request:
                self.slots[str(request["put"])] = (str(request["key"]), dict(request["outputs"]))
                return {"ok": True}
            if "stop" in request:
                self.stopping = True
                return {"bye": True}
        return {}


def serve_folder(settings: dict[str, Any]) -> None:
    """Keep the outputs `settings` brings, and serve the folder's socket until idle."""
    os.chdir(settings["folder"])  # bind by name: a full path can pass the 108-byte limit
    if not only_one(LOCK_NAME):
        return  # another keeper serves this folder
    with serving(SOCKET_NAME) as listener:
        keeper = Keeper(listener, float(settings["idle_seconds"]))
        keeper.answer({"put": settings["slot"], "key": settings["key"],
                       "outputs": settings["outputs"]})
        keeper.serve()


if __name__ == "__main__":
    main_with_settings(serve_folder)
