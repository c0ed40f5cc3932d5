"""`rsync-down` as one tar stream over the system's OpenSSH (ops.remote.openssh): OpenSSH's
speed for a large file and one stream for many small ones, where SFTP pays round trips for
every file and paramiko's Python for every byte.

One ssh run per fetch, over OpenSSH's warm master when there is one (the requests are
ops.remote.tar_session's):
1. `list`: everything under the source as GNU find sees it (one answer, however deep);
   `read`: the rsync_filter files in it (a .gitignore, say), when the cluster YAML names any.
2. Here, the listing is walked as the SFTP path walks the node (top down, rsync_exclude and
   the filter files, ops.remote.sync's sync_down), and checked as untrusted data: each name
   one path component, listed once, inside a listed folder. Folders are made, links made
   again when they stay inside their folder (ops.remote.landing), a file the same size and
   mtime as the local one is unchanged, a place held here by a link or a folder is refused.
3. `pack`: each file left is asked for as the walk finds it, and the node's GNU tar sends
   them as one tar, unpacked here meanwhile (ops.remote.tar_unpack, which says how it is
   checked). A file the node could not read (gone, unreadable) is left out with the node's
   word for it.
A node without GNU tar or find raises NoRemoteTar: the caller fetches over SFTP.
Specials (fifos, sockets, devices) are left out by name; SFTP would try to read them.
"""

from __future__ import annotations

import base64
import os
import posixpath
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from model.sync_filter import DirMergeFilters, is_excluded
from ops.errors import OpsError
from ops.remote import landing
from ops.remote.openssh import OpenSsh
from ops.remote.progress import Transfers
from ops.remote.sync_walk import SyncReport, remote_path
from ops.remote.tar_session import Session
from ops.remote.tar_unpack import Unpacker
from ops.remote.untrusted import RefusedEntry, check_entry_name
from ops.stack import Node

KINDS = {"b": "a block device", "c": "a character device", "p": "a fifo", "s": "a socket",
         "D": "a door"}


@dataclass(frozen=True)
class Listed:
    """One entry of the node's listing: find's type letter, mode, size, whole-second mtime,
    path under the start (empty for the start itself) and a link's target."""
    kind: str
    mode: int
    size: int
    mtime: int
    path: str
    target: str


def fetch(openssh: OpenSsh, node: Node, source: str, destination: Path, excludes: list[str],
          filters: list[str], progress: Transfers | None) -> SyncReport:
    """`node`'s `source` (file or folder) -> local `destination`, as ops.remote.sync's
    sync_down fetches it: a folder's contents into `destination`, a file into it when it is
    a folder, else as it."""
    source = remote_path(source)
    start = source if source.startswith("/") else f"./{source}"  # find: `-x` is no option
    report = SyncReport()
    with Session(openssh, node, "fetching from") as session:
        listing = _listing(session, start, report)
        if not listing or listing[0].path:
            raise OpsError(f"remote {source} does not exist: nothing to fetch")
        top = listing[0]
        if top.kind == "d":
            merge = DirMergeFilters(filters)
            children = _children(listing[1:], report)
            texts = _filter_texts(session, start, children, merge) if merge else {}
            with Unpacker(session, start, destination, report, progress) as unpacker:
                _walk(children, texts, destination, excludes, merge, unpacker.add, report)
        elif top.kind == "f":
            target = landing.file_target(destination, posixpath.basename(start))
            with Unpacker(session, posixpath.dirname(start) or ".", target.parent, report,
                          progress) as unpacker:
                _single(source, target, top, unpacker.add, report)
        else:
            report.refused.append(f"{source!r}: it is {KINDS.get(top.kind, 'not a file')}")
            return report
    _never_arrived([*unpacker.said, *session.said()], unpacker.wanted, report)
    return report


def _never_arrived(said: list[str], wanted: dict[str, str], report: SyncReport) -> None:
    """Each name asked for that did not arrive, refused with the word of the tar here or
    on the node for it (`tar: NAME: Cannot open: Permission denied`), when one said it."""
    told = [line.partition(": ")[2] for line in said]  # after tar's name for itself
    for name in wanted:
        prefix = f"{name}: "
        why = next((line[len(prefix):] for line in told if line.startswith(prefix)),
                   "the node could not read it")
        report.refused.append(f"{name!r}: {why}")


def _single(source: str, target: Path, top: Listed, ask: Callable[[str, str], None],
            report: SyncReport) -> None:
    """The one file `source` asked for, to land at `target`, unless it is there already."""
    try:
        if landing.unchanged(target.parent, target.name, top.size, top.mtime):
            report.unchanged += 1
            return
    except RefusedEntry as exc:
        report.refused.append(f"{source!r}: {exc}")
        return
    ask(posixpath.basename(source), target.name)


def _listing(session: Session, start: str, report: SyncReport) -> list[Listed]:
    """The node's find records for `start`, in its order (the start first); a record that is
    not one is refused."""
    records = session.ask_raw("list", start.encode(errors="surrogateescape"))
    listing: list[Listed] = []
    for entry, link in zip(records[::2], records[1::2], strict=False):
        try:
            kind, mode, size, mtime, path = entry.decode(errors="surrogateescape").split(" ", 4)
            listing.append(Listed(kind, int(mode, 8), int(size), int(mtime.split(".")[0]),
                                  path, link.decode(errors="surrogateescape")[1:]))
        except ValueError:
            report.refused.append(f"{entry[:80]!r}: not a listing record")
    return listing


def _walk(children: dict[str, dict[str, Listed]], texts: dict[str, str], destination: Path,
          excludes: list[str], merge: DirMergeFilters, ask: Callable[[str, str], None],
          report: SyncReport) -> None:
    """The listing walked top down as the SFTP path walks the node: folders made, links made
    again, unchanged files counted, each file to fetch `ask`ed for (its path under the
    start, its local path) as it is found."""
    pending = [""]
    while pending:
        relative_dir = pending.pop()
        try:
            here = landing.folder(destination, relative_dir)
        except RefusedEntry as exc:
            report.refused.append(f"{relative_dir!r}: {exc}")
            continue
        try:
            _walk_folder(here, relative_dir, children.get(relative_dir, {}), texts, excludes,
                         merge, ask, report, pending)
        finally:
            os.close(here)


def _walk_folder(here: int, relative_dir: str, entries: dict[str, Listed],
                 texts: dict[str, str], excludes: list[str], merge: DirMergeFilters,
                 ask: Callable[[str, str], None], report: SyncReport,
                 pending: list[str]) -> None:
    """One folder of the listing, made here (the handle `here`: its entries are looked at
    and made through it, with no walk from the destination for each)."""
    if merge:
        merge.load(relative_dir, lambda name: texts.get(posixpath.join(relative_dir, name)))
    for name in sorted(entries):
        entry = entries[name]
        if is_excluded(entry.path, excludes) or merge.excluded(entry.path, entry.kind == "d"):
            continue
        try:
            if entry.kind == "d":
                pending.append(entry.path)
            elif entry.kind == "l":
                landing.link(entry.target, relative_dir, here, name)
            elif entry.kind != "f":
                raise RefusedEntry(f"it is {KINDS.get(entry.kind, 'not a file')}")
            elif landing.unchanged(here, name, entry.size, entry.mtime):
                report.unchanged += 1
            else:
                ask(entry.path, entry.path)
        except RefusedEntry as exc:
            report.refused.append(f"{entry.path!r}: {exc}")


def _children(listing: list[Listed], report: SyncReport) -> dict[str, dict[str, Listed]]:
    """{folder: {name: entry}} of the listing (find lists a folder before what is in it): an
    entry whose name is not one file name, that is not inside a listed folder, or whose name
    is listed twice, is refused."""
    children: dict[str, dict[str, Listed]] = {"": {}}
    for entry in listing:
        parent, _, name = entry.path.rpartition("/")
        try:
            check_entry_name(name)
            if parent not in children:
                raise RefusedEntry("it is not inside a folder the node listed")
            if name in children[parent]:
                raise RefusedEntry("listed twice, the first kept")
        except RefusedEntry as exc:
            report.refused.append(f"{entry.path!r}: {exc}")
            continue
        children[parent][name] = entry
        if entry.kind == "d":
            children[entry.path] = {}
    return children


def _filter_texts(session: Session, start: str, children: dict[str, dict[str, Listed]],
                  merge: DirMergeFilters) -> dict[str, str]:
    """{relative path: text} of every filter file in the listing, read in one request."""
    paths = [entry.path for entries in children.values() for name, entry in entries.items()
             if name in merge.names and entry.kind in ("f", "l")]
    if not paths:
        return {}
    answers = session.ask("read", [posixpath.join(start, path) for path in paths])
    return {path: _decoded(answer) for path, answer in zip(paths, answers, strict=False)}


def _decoded(answer: bytes) -> str:
    """A filter file's text from its base64; what is not base64 reads as no rules."""
    try:
        return base64.b64decode(answer, validate=True).decode(errors="replace")
    except ValueError:
        return ""
