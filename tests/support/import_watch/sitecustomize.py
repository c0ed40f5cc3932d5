"""Put on a test's PYTHONPATH, this folder's `sitecustomize` (which Python imports at every
start, `site` docs) makes every Python process the test starts, however deep (invoke, the plan
interpreter, the Pulumi program, the dynamic providers' plugin), append a line to the file
RAY_GCP_IMPORT_WATCH_LOG names when it imports a module RAY_GCP_IMPORT_WATCH names
(comma-separated): its pid, the module and its command line. The import itself goes on."""

from __future__ import annotations

import os
import sys

_WATCHED = tuple(filter(None, os.environ.get("RAY_GCP_IMPORT_WATCH", "").split(",")))
_LOG = os.environ.get("RAY_GCP_IMPORT_WATCH_LOG", "")


class _Watch:
    """A meta path finder that finds nothing: it only notes the watched names asked for."""

    @staticmethod
    def find_spec(name: str, path: object = None, target: object = None) -> None:
        if name in _WATCHED:
            with open(_LOG, "a") as log:
                log.write(f"{os.getpid()} {name} {' '.join(sys.argv)[:300]}\n")


if _WATCHED and _LOG:
    sys.meta_path.insert(0, _Watch())
