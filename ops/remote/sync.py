"""rsync-like SFTP sync: honours `rsync_exclude` and `rsync_filter` (per-directory filter
files such as .gitignore, see model/sync_filter.py), sends only files whose size or mtime
changed.

A directory source syncs its contents into the destination (rsync's `src/` form). Times are
copied to the other side, so the next run's size+mtime check skips unchanged files. Files and
bytes are counted as they move (progress.py draws them on a terminal).

What `sync_down` reads from a node is untrusted (untrusted.py): every listed name must be
one path component, listed once; where it lands is ops.remote.landing's (a file only at its
own place, never through a link or over a folder; a link only when it points down inside its
own folder; no setuid/setgid/sticky, nothing chowned). An entry that breaks a rule is named
in `SyncReport.refused` and the rest goes on.

The tar streams over OpenSSH (ops.remote.tar_stream up, ops.remote.tar_fetch down) go first
when ssh is installed; this module chooses, and serves SFTP when they cannot.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import shlex
import stat
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from model.sync_filter import DirMergeFilters, is_excluded
from ops.errors import OpsError
from ops.remote import landing
from ops.remote.eof import send_eof
from ops.remote.fanout import NodeOutcome, check_parallel, every_node, fan_out, fan_out_status
from ops.remote.progress import ProgressBar, TransferCount, Transfers
from ops.remote.ssh import Connector
from ops.remote.sync_walk import SyncReport, remote_path, same_content, walk_filtered
from ops.remote.untrusted import (
    FILTER_CAP,
    CappedTail,
    RefusedEntry,
    check_entry_name,
    drain,
    sftp_answers,
)
from ops.stacks.stack import Node

if TYPE_CHECKING:  # paramiko comes with the connection: the tar stream over OpenSSH needs none
    import paramiko

    from ops.remote.openssh import OpenSsh


def _same(size_a: int, mtime_a: float, size_b: int | None, mtime_b: float | None) -> bool:
    return size_b is not None and size_a == size_b and int(mtime_a) == int(mtime_b or 0)


def _remote_makedirs(sftp: paramiko.SFTPClient, path: str) -> None:
    if path in ("", ".", "/"):
        return
    try:
        if stat.S_ISDIR(sftp.stat(path).st_mode or 0):
            return
        raise OpsError(f"remote {path} exists and is not a directory")
    except FileNotFoundError:
        _remote_makedirs(sftp, posixpath.dirname(path.rstrip("/")))
        sftp.mkdir(path)


def _remote_listing(sftp: paramiko.SFTPClient, path: str) -> dict[str, paramiko.SFTPAttributes]:
    try:
        return {attr.filename: attr for attr in sftp.listdir_attr(path)}
    except FileNotFoundError:
        return {}


def _byte_counter(progress: Transfers | None) -> Callable[[int, int], None] | None:
    """paramiko's transfer callback (bytes so far, size) -> `progress.add_bytes` of the new."""
    if progress is None:
        return None
    moved = 0

    def count(so_far: int, _size: int) -> None:
        nonlocal moved
        progress.add_bytes(so_far - moved)
        moved = so_far

    return count


def _put(sftp: paramiko.SFTPClient, local: Path, remote: str, st: os.stat_result,
         progress: Transfers | None, there: paramiko.SFTPAttributes | None) -> None:
    """`local` -> `remote`; a link there (`there`, as the node listed it) is replaced, not
    written through, as the tar stream does."""
    if there is not None and stat.S_ISLNK(there.st_mode or 0):
        sftp.remove(remote)
    sftp.put(str(local), remote, callback=_byte_counter(progress))
    sftp.utime(remote, (st.st_atime, st.st_mtime))
    sftp.chmod(remote, stat.S_IMODE(st.st_mode))


def _read_remote(sftp: paramiko.SFTPClient, directory: str, names: set[str]):
    def read(name: str) -> str | None:
        if name not in names:
            return None
        try:
            with sftp.open(posixpath.join(directory, name)) as remote_file:
                return remote_file.read(FILTER_CAP).decode(errors="replace")
        except OSError:  # a directory of that name, or unreadable: no rules, as rsync
            return None

    return read


@sftp_answers("sending over SFTP")
def sync_up(
    sftp: paramiko.SFTPClient,
    source: Path,
    destination: str,
    excludes: Iterable[str] = (),
    filters: Iterable[str] = (),
    progress: Transfers | None = None,
    checksum_client: Any | None = None,
    copy_links: bool = False,
) -> SyncReport:
    """Local `source` (file or directory) -> remote `destination`.

    `excludes` are rsync_exclude patterns; `filters` are rsync_filter file names (.gitignore);
    `progress` hears of every byte and file sent. Given `checksum_client` (the node's client),
    a file of the same size is compared by SHA-256 (hashed on the node in one exec per
    folder), not by mtime, as rsync's --checksum. A link under `source` that leads outside it
    is left out (named in the report's `refused`) unless `copy_links`.
    """
    excludes = list(excludes)
    merge = DirMergeFilters(filters)
    destination = remote_path(destination)
    report = SyncReport()
    if not source.exists():
        raise OpsError(f"{source} does not exist: nothing to send")
    if source.is_file():
        target = destination
        if destination.endswith("/") or _is_remote_dir(sftp, destination):
            target = posixpath.join(destination, source.name)
        _remote_makedirs(sftp, posixpath.dirname(target))
        st = source.stat()
        try:
            remote = sftp.lstat(target)
        except FileNotFoundError:
            remote = None
        regular = remote if remote is not None and stat.S_ISREG(remote.st_mode or 0) else None
        remote_size = regular.st_size if regular else None
        remote_mtime = regular.st_mtime if regular else None
        if checksum_client is not None and remote_size == st.st_size:
            same = bool(_same_content(checksum_client, posixpath.dirname(target),
                                      {posixpath.basename(target): source}))
        else:
            same = _same(st.st_size, st.st_mtime, remote_size, remote_mtime)
        if same:
            report.unchanged += 1
        else:
            _put(sftp, source, target, st, progress, remote)
            _sent(report, source.name, progress)
        return report
    _remote_makedirs(sftp, destination.rstrip("/") or ".")
    for relative_dir, directory, subdirs, files in walk_filtered(
            source, excludes, merge, None if copy_links else report.refused):
        remote_dir = posixpath.join(destination, relative_dir) if relative_dir else destination
        listing = _remote_listing(sftp, remote_dir)
        for name in subdirs:
            if name not in listing:
                sftp.mkdir(posixpath.join(remote_dir, name))
        same_size = {name: directory / name for name in files
                     if checksum_client is not None and name in listing
                     and listing[name].st_size == (directory / name).stat().st_size}
        same_content = _same_content(checksum_client, remote_dir, same_size) \
            if same_size else set()
        for name in files:
            relative = posixpath.join(relative_dir, name)
            local = directory / name
            st = local.stat()
            attr = listing.get(name)
            if name in same_size:
                unchanged = name in same_content
            else:
                unchanged = attr is not None and _same(st.st_size, st.st_mtime, attr.st_size,
                                                       attr.st_mtime)
            if unchanged:
                report.unchanged += 1
                continue
            _put(sftp, local, posixpath.join(remote_dir, name), st, progress, attr)
            _sent(report, relative, progress)
    return report


def _same_content(client: Any, remote_dir: str, files: dict[str, Path]) -> set[str]:
    """The names among `files` ({name in `remote_dir`: local path}) whose copy on the node
    has the same SHA-256, hashed there in one exec; a file it cannot read counts as changed."""
    channel = client.get_transport().open_session()
    try:
        channel.exec_command(f"cd {shlex.quote(remote_dir or '.')} && "
                             "xargs -0 sha256sum -z -- 2>/dev/null")
        channel.sendall(b"".join(name.encode() + b"\0" for name in files))
        send_eof(channel)
        output = CappedTail(len(files) * (len(max(files, key=len)) + 80))
        drain(channel.recv, output.write)
        channel.recv_exit_status()
    finally:
        channel.close()
    return same_content(files, bytes(output.kept).split(b"\0"))


def _sent(report: SyncReport, relative: str, progress: Transfers | None) -> None:
    report.sent.append(relative)
    if progress is not None:
        progress.add_file(relative)


def _is_remote_dir(sftp: paramiko.SFTPClient, path: str) -> bool:
    try:
        return stat.S_ISDIR(sftp.stat(path).st_mode or 0)
    except FileNotFoundError:
        return False


def _get(sftp: paramiko.SFTPClient, remote: str, root: Path, relative: str,
         attr: paramiko.SFTPAttributes, progress: Transfers | None = None) -> None:
    """Fetch into `relative` under `root` itself, as ops.remote.landing writes it."""
    with landing.landed_file(root, relative, attr.st_mode, attr.st_mtime or 0,
                             attr.st_atime) as sink:
        sftp.getfo(remote, sink, callback=_byte_counter(progress))


def _listing(
    sftp: paramiko.SFTPClient, remote_dir: str, relative_dir: str, report: SyncReport
) -> list[paramiko.SFTPAttributes]:
    """A remote folder's entries that are file names, each listed once; the others refused."""
    entries: dict[str, paramiko.SFTPAttributes] = {}
    for attr in sftp.listdir_attr(remote_dir):
        shown = posixpath.join(relative_dir, attr.filename)
        try:
            check_entry_name(attr.filename)
        except RefusedEntry as exc:
            report.refused.append(f"{shown!r}: {exc}")
            continue
        if attr.filename in entries:
            report.refused.append(f"{shown!r}: listed twice, the first kept")
            continue
        entries[attr.filename] = attr
    return sorted(entries.values(), key=lambda a: a.filename)


@sftp_answers("fetching over SFTP")
def sync_down(
    sftp: paramiko.SFTPClient,
    source: str,
    destination: Path,
    excludes: Iterable[str] = (),
    filters: Iterable[str] = (),
    progress: Transfers | None = None,
) -> SyncReport:
    """Remote `source` (file or directory) -> local `destination`; filter files read remotely;
    `progress` hears of every byte and file fetched."""
    excludes = list(excludes)
    merge = DirMergeFilters(filters)
    source = remote_path(source)
    report = SyncReport()
    try:
        top = sftp.stat(source)
    except FileNotFoundError:
        raise OpsError(f"remote {source} does not exist: nothing to fetch") from None
    if not stat.S_ISDIR(top.st_mode or 0):
        target = landing.file_target(destination, posixpath.basename(source))
        try:
            if landing.unchanged(target.parent, target.name, top.st_size or 0,
                                 top.st_mtime or 0):
                report.unchanged += 1
            else:
                _get(sftp, source, target.parent, target.name, top, progress)
                _sent(report, posixpath.basename(source), progress)
        except RefusedEntry as exc:
            report.refused.append(f"{source!r}: {exc}")
        return report
    pending = [""]
    while pending:
        relative_dir = pending.pop()
        remote_dir = posixpath.join(source, relative_dir) if relative_dir else source
        try:
            os.close(landing.folder(destination, relative_dir))
        except RefusedEntry as exc:
            report.refused.append(f"{relative_dir!r}: {exc}")
            continue
        entries = _listing(sftp, remote_dir, relative_dir, report)
        if merge:
            names = {attr.filename for attr in entries}
            merge.load(relative_dir, _read_remote(sftp, remote_dir, names))
        for attr in entries:
            relative = posixpath.join(relative_dir, attr.filename)
            is_dir = stat.S_ISDIR(attr.st_mode or 0)
            if is_excluded(relative, excludes) or merge.excluded(relative, is_dir):
                continue
            if is_dir:
                pending.append(relative)
                continue
            try:
                _fetch_entry(sftp, remote_dir, relative_dir, destination, attr, report, progress)
            except RefusedEntry as exc:
                report.refused.append(f"{relative!r}: {exc}")
    return report


def _fetch_entry(
    sftp: paramiko.SFTPClient,
    remote_dir: str,
    relative_dir: str,
    destination: Path,
    attr: paramiko.SFTPAttributes,
    report: SyncReport,
    progress: Transfers | None,
) -> None:
    """One file or link of a listing; RefusedEntry says why it was left out."""
    relative = posixpath.join(relative_dir, attr.filename)
    remote = posixpath.join(remote_dir, attr.filename)
    try:
        if stat.S_ISLNK(attr.st_mode or 0):
            landing.link(sftp.readlink(remote) or "", relative_dir, destination, relative)
            return
        if landing.unchanged(destination, relative, attr.st_size or 0, attr.st_mtime or 0):
            report.unchanged += 1
            return
        _get(sftp, remote, destination, relative, attr, progress)
    except OSError as exc:  # the node refused to read it, or it vanished meanwhile
        raise RefusedEntry(f"cannot be copied ({exc})") from None
    _sent(report, relative, progress)


def rsync_up_nodes(
    connector: Connector,
    nodes: list[Node],
    pairs: dict[str, str],
    excludes: list[str],
    filters: list[str] | None = None,
    err: TextIO | None = None,
    checksum: bool = False,
    copy_links: bool = False,
    parallel: int | None = None,
    note: str = "",
) -> tuple[dict[str, SyncReport], list[NodeOutcome]]:
    """Send local -> remote `pairs` ({remote: local}, the file_mounts shape) to every node,
    counting files and bytes on `err` (a bar of nodes when there are several): as one tar
    stream over the system's OpenSSH when it is installed (ops.remote.tar_stream), else, or
    for a node without tar, over SFTP. `checksum` compares same-size files by content;
    `copy_links` sends what a link leading outside its folder names (else it is left out).
    Given `parallel`, a fan-out (ops.remote.fanout): that many nodes at a time, a node that
    fails said in a line and the others sent to, its outcome returned; without it, one
    node's failure raises; `note` ends its summary. The reports of the nodes sent to, by
    name."""
    from ops.remote.openssh import open_ssh, system_ssh

    ssh = system_ssh()
    if ssh is None:
        connector.head()  # pin the jump host once before threads share it
    err = err or sys.stderr
    several = len(nodes) > 1
    progress = ProgressBar("rsync-up", len(nodes), err) if several else TransferCount(
        "rsync-up", err)

    def every_pair(send_one: Callable[[Path, str], SyncReport]) -> SyncReport:
        """`send_one(local, remote)` for each pair, reported as one, paths as on the node."""
        total = SyncReport()
        for remote, local in pairs.items():
            report = send_one(Path(local), remote)
            total.sent += [posixpath.join(remote, path) for path in report.sent]
            total.unchanged += report.unchanged
            total.refused += [f"{local}/{line}" for line in report.refused]
        return total

    def over_tar(openssh: OpenSsh, node: Node) -> SyncReport | None:
        from ops.remote.tar_session import NoRemoteTar
        from ops.remote.tar_stream import send as send_as_tar

        try:
            return every_pair(lambda local, remote: send_as_tar(
                openssh, node, local, remote, excludes, filters or [], checksum, progress,
                copy_links))
        except NoRemoteTar:
            return None

    def over_sftp(node: Node) -> SyncReport:
        client = connector.node(node)
        sftp = client.open_sftp()
        try:
            return every_pair(lambda local, remote: sync_up(
                sftp, local, remote, excludes, filters or (), progress,
                client if checksum else None, copy_links))
        finally:
            sftp.close()

    reports: dict[str, SyncReport] = {}

    def send(node: Node, openssh: OpenSsh | None) -> int:
        report = over_tar(openssh, node) if openssh is not None else None
        if report is None:
            report = over_sftp(node)
        reports[node.name] = report
        if isinstance(progress, ProgressBar):
            progress.step(node.name)
        return 0

    try:
        with contextlib.ExitStack() as stack:
            openssh = stack.enter_context(open_ssh(connector, ssh, parallel is not None)) \
                if ssh else None
            if parallel is None:
                for node in nodes:
                    send(node, openssh)
                return reports, []
            say = progress.say if isinstance(progress, ProgressBar) else None
            outcomes = fan_out(nodes, lambda node: send(node, openssh), parallel, "rsync-up",
                               say, note)
            return {node.name: reports[node.name] for node in nodes
                    if node.name in reports}, outcomes
    finally:
        progress.close()


def rsync_down_head(connector: Connector, source: str, local: Path,
                    err: TextIO | None = None) -> SyncReport:
    """`rsync-down`: the head's `source` -> `local`, counting files and bytes on `err`: as one
    tar stream over the system's OpenSSH when it is installed (ops.remote.tar_fetch), else,
    or from a head without GNU tar and find, over SFTP."""
    from ops.remote.cluster_file import sync_rules
    from ops.remote.openssh import open_ssh, system_ssh

    outputs = connector.outputs
    rules = sync_rules(outputs)
    progress = TransferCount("rsync-down", err or sys.stderr)
    ssh = system_ssh()
    try:
        report = None
        if ssh is not None:
            from ops.remote.tar_fetch import fetch
            from ops.remote.tar_session import NoRemoteTar

            with open_ssh(connector, ssh) as openssh, contextlib.suppress(NoRemoteTar):
                report = fetch(openssh, outputs.head, source, local, rules.excludes, rules.filters,
                               progress)
        if report is None:
            sftp = connector.head().open_sftp()
            try:
                report = sync_down(sftp, source, local, rules.excludes, rules.filters, progress)
            finally:
                sftp.close()
    finally:
        progress.close()
    for refused in report.refused:
        print(f"rsync-down: left out {refused}", file=err or sys.stderr)
    return report


def rsync_up_stack(stack: str | None, pairs: dict[str, str] | None, all_nodes: bool,
                   trust_first_use: bool = False, checksum: bool = False,
                   copy_links: bool = False, parallel: str | None = None) -> int:
    """`rsync-up` / `file-mounts`: `pairs` {remote: local}, or None for the YAML's file_mounts;
    `checksum`: same-size files compared by content (rsync's -c), not mtime; `copy_links`:
    a link leading outside its folder sent as what it names (else left out, named). With
    `all_nodes`, a fan-out `parallel` nodes at a time (`--parallel`); the first failed
    node's status (0: every node has the files)."""
    from ops.remote.cluster_file import file_mounts, sync_rules
    from ops.remote.ssh import connect_stack

    if not all_nodes and parallel is not None:
        raise OpsError("--parallel works with --all-nodes: add it, or drop it")
    at_once = check_parallel(parallel) if all_nodes else None
    with connect_stack(stack, trust_first_use, warm=True) as connector:
        outputs = connector.outputs
        if pairs is None:
            pairs = file_mounts(outputs)
            if not pairs:
                print("the cluster YAML has no file_mounts: nothing to sync")
                return 0
        every = every_node(connector, "rsync-up") if all_nodes else None
        nodes = every.nodes if every else [outputs.head]
        if all_nodes:
            connector.warm_workers = False  # no background process per node (ops.remote.fanout)
        rules = sync_rules(outputs)
        reports, outcomes = rsync_up_nodes(connector, nodes, pairs, rules.excludes,
                                           rules.filters, checksum=checksum,
                                           copy_links=copy_links, parallel=at_once,
                                           note=every.note if every else "")
        for name, report in reports.items():
            for refused in report.refused:
                print(f"rsync-up: {name}: left out {refused}", file=sys.stderr)
            print(f"{name}: {report.summary()}")
        return fan_out_status(outcomes)


def rsync_up(stack: str | None, source: str, target: str, all_nodes: bool,
             trust_first_use: bool = False, checksum: bool = False,
             copy_links: bool = False, parallel: str | None = None) -> int:
    """`rsync-up`: the local `source` (checked first) -> `target` on the head or every node;
    the first failed node's status."""
    if not Path(source).exists():
        raise OpsError(f"{source} does not exist: pass a local file or directory")
    return rsync_up_stack(stack, {target: source}, all_nodes, trust_first_use, checksum,
                          copy_links, parallel)


def rsync_down(stack: str | None, source: str, target: str,
               trust_first_use: bool = False) -> None:
    """`rsync-down`: the head's `source` -> the local `target`, whose folder must exist."""
    from ops.paths import in_existing_folder
    from ops.remote.ssh import connect_stack

    local = in_existing_folder(target, "target")
    with connect_stack(stack, trust_first_use, warm=True) as connector:
        print(rsync_down_head(connector, source, local).summary())
