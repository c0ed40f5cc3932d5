"""Where pulumi's file backend keeps a stack's checkpoint, and the identity of that state: what
the outputs keeper (ops.stacks.outputs_keeper) files a stack's outputs under.

As the engine's diy backend has it (pkg/backend/diy of v3.276.0, the engine `.ci/engine`
builds): the URL is $PULUMI_BACKEND_URL, which the CLI takes before Pulumi.yaml's `backend`
and `pulumi login`'s (pkg/workspace/creds.go); the backend's root is the `file://` URL's path
(`~` is the home folder, a relative path is taken from the CLI's working folder, the query is
no part of it). `.pulumi/meta.yaml` says the layout: version 1 is the project layout,
`.pulumi/stacks/<project>/<stack>.json` (the project from Pulumi.yaml); the legacy layout
(`.pulumi/stacks/<stack>.json`, meta version 0 or none) this engine refuses, so it is left to
the CLI here. The checkpoint is `<stack>.json`, or `.json.gz` / `.json.zst` when the backend
compresses (PULUMI_DIY_BACKEND_GZIP, PULUMI_DIY_BACKEND_ZSTD): the backend reads whichever of
the three was modified last. Every write (`up`, `refresh`, `destroy`, `import`, `stack
import`...) goes to a temporary file beside it renamed into place (gocloud's fileblob), after
the old one is copied to `<file>.bak`; `stack rm` copies it to `.bak` and deletes it. The
`.bak` copies, `.pulumi/backups/` and `.pulumi/history/` are never read for outputs.

So a stack's state is identified by (device, inode, size, mtime_ns, ctime_ns, sha256 of the
bytes) of each of the three candidates and of meta.yaml: each write puts a new file in place (a
new inode, or a freed one reused, and new times, which a coarse clock may not tell apart from
the last write's: the digest does), a deleted file shows as missing. Any other backend (s3://, gs://,
azblob://, Pulumi Cloud, the one `pulumi login` chose) offers no such cheap check: None, and
the CLI reads the outputs.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

FILE_PREFIX = "file://"
COMPRESSED = ("", ".gz", ".zst")
PLAIN_NAME = re.compile(r"[A-Za-z0-9._-]+")
"""Stack and project names fileblob stores as they are (others it escapes: left to the CLI)."""
PROJECT_LAYOUT = re.compile(r"version:\s*1\s*")


def digest(parts: list[Any]) -> str:
    """The SHA-256 of `parts` as JSON: one key for several values."""
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()


def backend_root(url: str | None, cwd: Path) -> Path | None:
    """The folder a `file://` backend URL keeps its state in, for a CLI run in `cwd`; None for
    any other backend."""
    if not url or not url.startswith(FILE_PREFIX):
        return None
    path = url[len(FILE_PREFIX):].split("?", 1)[0]
    if path == "~" or path.startswith("~/"):
        path = str(Path.home()) + path[1:]
    return Path(os.path.normpath(cwd / path))


def checkpoint_files(root: Path, project: str, stack: str) -> tuple[Path, ...]:
    """The files the backend at `root` may read stack `project/<stack>`'s checkpoint from."""
    plain = root / ".pulumi" / "stacks" / project / f"{stack}.json"
    return tuple(plain.with_name(plain.name + suffix) for suffix in COMPRESSED)


def _identity(path: Path) -> list[int | str] | None:
    """The file's place, size, times and content digest, read through one descriptor (a file
    renamed over it meanwhile is not mixed in); None when there is none."""
    try:
        with open(path, "rb") as handle:
            info = os.fstat(handle.fileno())
            content = hashlib.file_digest(handle, "sha256").hexdigest()
    except FileNotFoundError:
        return None
    return [info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns, content]


def state_identity(url: str | None, project: str, stack: str, cwd: Path) -> str | None:
    """A digest that changes whenever the backend at `url` (for a CLI run in `cwd`) writes or
    removes stack `stack`'s checkpoint; None when it cannot be told cheaply (not a file
    backend, not the project layout, a name fileblob would escape, no checkpoint yet)."""
    root = backend_root(url, cwd)
    if root is None or not (PLAIN_NAME.fullmatch(project) and PLAIN_NAME.fullmatch(stack)):
        return None
    meta = root / ".pulumi" / "meta.yaml"
    try:
        if not PROJECT_LAYOUT.fullmatch(meta.read_text()):
            return None
    except (OSError, UnicodeDecodeError):
        return None
    candidates = checkpoint_files(root, project, stack)
    identities = [_identity(path) for path in candidates]
    if not any(identities):
        return None
    parts = [str(meta), _identity(meta), *zip(map(str, candidates), identities, strict=True)]
    return digest(parts)
