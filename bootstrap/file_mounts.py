"""`file_mounts` packed into one archive that every node fetches from the cluster's bucket.

`ray up` rsyncs each `file_mounts` entry (a file or a folder) to every node before its setup
commands, and so does its autoscaler for the workers it adds. Here the program packs every entry
into one gzip'd tar (`pack_file_mounts`), skipping what `rsync_exclude` and `rsync_filter` skip
(model/sync_filter.py), and stores it in the cluster's private bucket under a name made of
an HMAC-SHA256 of its content keyed with the stack's own random secret
(`file-mounts/<hmac>.tar.gz`, `PackedMounts.keyed`; the key is infra/stack_secret.py's). The
name changes exactly when the content does, so a change is one new object, and the startup
script, which names it, changes with it, so the node watcher re-applies the mounts in place.
Without the key nobody can test a guess of a short secret file against the name, which is in
instance metadata and in every preview; the archive's gzip header carries the same HMAC, so the
bytes the engine hashes for the upload are not reproducible from guessed content either.
Each node downloads it with its own service account before its initialization commands; member
`<i>` of the archive is the i-th mount in target order. Nothing of it is in instance metadata,
so key-like files travel the same private way as the rest.

The archive is the same bytes for the same files (sorted members, mtime, owner and group of the
archive's own making, gzip mtime 0): file modes and symlinks are kept, as `rsync -a` keeps them.
All mounts together may hold `MOUNT_SIZE_LIMIT` bytes.
"""

from __future__ import annotations

import gzip
import hashlib
import hmac
import io
import os
import posixpath
import stat
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

from model.config import ClusterConfig, ConfigError, expand_local_path
from model.private_files import private_folder, write_private_file
from model.sync_filter import DirMergeFilters, is_excluded

MOUNT_SIZE_LIMIT = 256 * 1024 * 1024
OBJECT_PREFIX = "file-mounts/"
_SIZE_FIX = (
    "add its large files to rsync_exclude (or an rsync_filter file) and copy them with "
    "`invoke rsync-up` after `up`, or fetch them from a bucket in setup_commands"
)


@dataclass(frozen=True)
class FileMountArchive:
    """The packed mounts as stored: `targets[i]` is member `<i>` of the archive."""

    targets: tuple[str, ...]
    content: bytes  # the .tar.gz
    digest: str  # the stack-keyed HMAC of the uncompressed tar: the same files give the same name

    @property
    def object_name(self) -> str:
        return f"{OBJECT_PREFIX}{self.digest}.tar.gz"

    def write(self, folder: Path) -> Path:
        """The archive as a file in `folder` (the program's asset; the local cluster's bucket):
        it holds the mounted files (secrets among them), so the folder is 0700 and the file
        0600 (model.private_files), an older one tightened."""
        private_folder(folder)
        path = folder / Path(self.object_name).name
        if path.is_file() and not path.is_symlink() and path.read_bytes() == self.content:
            path.chmod(0o600)
        else:
            write_private_file(path, self.content)
        return path


def pack_file_mounts(
    config: ClusterConfig, base_dir: Path | None = None
) -> PackedMounts | None:
    """Every `file_mounts` entry in one tar, or None when there is none. Relative local
    paths are read from `base_dir` (default the working directory, where `ray up` reads them).
    A missing or unreadable path, or a total over the limit, is a ConfigError naming the
    entry's YAML path."""
    if not config.file_mounts:
        return None
    base = base_dir or Path.cwd()
    targets = tuple(sorted(config.file_mounts))
    packer = _Packer(config.rsync_exclude, config.rsync_filter)
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for index, target in enumerate(targets):
            where = f"file_mounts.{target}"
            source = config.file_mounts[target]
            if not source.strip():
                raise ConfigError([(where, "the local path is empty: name a file or folder "
                                           "on this machine")])
            try:
                path = base / expand_local_path(source)
            except ValueError as error:
                raise ConfigError([(where, str(error))]) from None
            try:
                packer.add(tar, path, str(index))
            except _MountProblem as problem:
                raise ConfigError([(where, f"{source!r}: {problem}")]) from None
    return PackedMounts(targets, raw.getvalue())


@dataclass(frozen=True)
class PackedMounts:
    """The mounts packed but not yet named: only the stack's key names them (`keyed`)."""

    targets: tuple[str, ...]
    tar: bytes  # the uncompressed tar
    _keyed: dict[str, FileMountArchive] = field(default_factory=dict, compare=False, repr=False)

    def keyed(self, key: str) -> FileMountArchive:
        """The archive named by the HMAC-SHA256 of the tar under `key` (the stack's secret),
        that HMAC also in the gzip header's comment. An empty key would make the name a public
        hash of the content, so it is refused."""
        if not key:
            raise ValueError("the file_mounts archive is named with the stack's secret key, "
                             "and the key is empty")
        if key not in self._keyed:
            digest = hmac.new(key.encode(), self.tar, hashlib.sha256).hexdigest()
            self._keyed[key] = FileMountArchive(self.targets, _gzip(self.tar, digest), digest)
        return self._keyed[key]

    def stand_in(self) -> FileMountArchive:
        """An archive with no content, named like the real one (same length): what a script
        renders to when only its size matters (metadata limits)."""
        return FileMountArchive(self.targets, b"", "0" * hashlib.sha256().digest_size * 2)


def _gzip(data: bytes, comment: str) -> bytes:
    """`data` gzip'd, the same bytes on every machine for the same data and comment: mtime 0,
    OS "unknown", and `comment` in the header's FCOMMENT field (RFC 1952 2.3)."""
    compressed = gzip.compress(data, compresslevel=6, mtime=0)
    header = bytearray(compressed[:10])  # no FNAME: gzip.compress writes none
    header[3] |= 0x10  # FLG.FCOMMENT
    header[9] = 255  # OS
    return bytes(header) + comment.encode("latin-1") + b"\0" + compressed[10:]


def synced_files_outside_mounts(config: ClusterConfig) -> list[str]:
    """`cluster_synced_files` entries no `file_mounts` target covers. Every node fetches the
    file_mounts itself, so a path under a mount target is on every node already; any other
    path exists only where something on the head made it, and no node copies it."""
    roots = [_remote(target) for target in config.file_mounts]
    return [path for path in config.cluster_synced_files
            if not any(_remote(path) == root or _remote(path).startswith(root.rstrip("/") + "/")
                       for root in roots)]


def _remote(path: str) -> str:
    """A remote path with `~/` and relative forms made one (both are under the node home)."""
    path = path.strip()
    if path in ("~", "~/"):
        return "~"
    return path if path.startswith(("/", "~/")) else f"~/{path}"


class _MountProblem(Exception):
    """What is wrong with one mount's local path (the caller adds the YAML path)."""


class _Packer:
    """Adds mounts to one tar, counting their bytes against MOUNT_SIZE_LIMIT."""

    def __init__(self, excludes: list[str], filters: list[str]) -> None:
        self.excludes = excludes
        self.filters = filters
        self.total = 0

    def add(self, tar: tarfile.TarFile, path: Path, member: str) -> None:
        try:
            info = path.lstat()
        except OSError as error:
            raise _MountProblem(f"does not exist on this machine ({error.strerror}): fix the "
                                "local path (relative paths are read from the folder you run "
                                "`invoke up` in)") from None
        if stat.S_ISLNK(info.st_mode):  # the mount itself: what it points at, as rsync -a
            try:
                path = path.resolve(strict=True)
                info = path.stat()
            except (OSError, RuntimeError):
                raise _MountProblem("is a symbolic link to nothing: fix the link or the local "
                                    "path") from None
        if stat.S_ISDIR(info.st_mode):
            self._folder(tar, path, member)
        elif stat.S_ISREG(info.st_mode):
            self._file(tar, path, member, info)
        else:
            raise _MountProblem("is neither a regular file nor a folder: mount a file or a "
                                "folder")

    def _folder(self, tar: tarfile.TarFile, root: Path, member: str) -> None:
        merge = DirMergeFilters(self.filters)
        tar.addfile(self._info(root, member, root.stat()))
        for directory, subdirs, files in os.walk(root, onerror=self._unreadable):
            relative_dir = Path(directory).relative_to(root).as_posix()
            relative_dir = "" if relative_dir == "." else relative_dir
            if merge:
                merge.load(relative_dir, _reader(Path(directory)))
            kept = []
            for name in sorted(subdirs):
                relative = posixpath.join(relative_dir, name)
                if is_excluded(relative, self.excludes) or merge.excluded(relative, is_dir=True):
                    continue
                entry = Path(directory) / name
                if entry.is_symlink():  # os.walk does not follow it: a link in the archive
                    files.append(name)
                    continue
                kept.append(name)
                tar.addfile(self._info(entry, f"{member}/{relative}", entry.lstat()))
            subdirs[:] = kept
            for name in sorted(files):
                relative = posixpath.join(relative_dir, name)
                if is_excluded(relative, self.excludes) or merge.excluded(relative, is_dir=False):
                    continue
                entry = Path(directory) / name
                info = entry.lstat()
                if stat.S_ISLNK(info.st_mode):
                    link = self._info(entry, f"{member}/{relative}", info, tarfile.SYMTYPE)
                    link.linkname = os.readlink(entry)
                    tar.addfile(link)
                elif stat.S_ISREG(info.st_mode):
                    self._file(tar, entry, f"{member}/{relative}", info)
                # sockets, fifos and devices are skipped, as rsync skips them without root

    def _file(self, tar: tarfile.TarFile, path: Path, member: str, info: os.stat_result) -> None:
        self.total += info.st_size
        if self.total > MOUNT_SIZE_LIMIT:
            raise _MountProblem(
                f"file_mounts add up to more than {MOUNT_SIZE_LIMIT // (1024 * 1024)} MB, the "
                f"most the cluster's bucket carries to every node (reached at {path}): "
                + _SIZE_FIX)
        try:
            with path.open("rb") as handle:
                tar.addfile(self._info(path, member, info), handle)
        except OSError as error:
            raise _MountProblem(f"{path} cannot be read ({error.strerror}): make it readable "
                                "or exclude it with rsync_exclude") from None

    @staticmethod
    def _unreadable(error: OSError) -> None:
        raise _MountProblem(f"{error.filename} cannot be read ({error.strerror}): make it "
                            "readable or exclude it with rsync_exclude")

    @staticmethod
    def _info(path: Path, member: str, info: os.stat_result,
              kind: bytes | None = None) -> tarfile.TarInfo:
        entry = tarfile.TarInfo(member)
        if kind is not None:
            entry.type = kind
        elif stat.S_ISDIR(info.st_mode):
            entry.type = tarfile.DIRTYPE
        else:
            entry.size = info.st_size
        entry.mode = stat.S_IMODE(info.st_mode)
        entry.mtime = 0
        entry.uid = entry.gid = 0
        entry.uname = entry.gname = ""
        return entry


def _reader(directory: Path):
    def read(name: str) -> str | None:
        try:
            return (directory / name).read_text(errors="replace")
        except OSError:
            return None
    return read

