"""Ray's `rsync_exclude` (`is_excluded`) and `rsync_filter`: exclude files named in per-directory
filter files such as .gitignore. The SSH sync (ops/remote/sync.py) and the program's file_mounts
archive (bootstrap/file_mounts.py) both skip what these say. It lives in model, the floor both
stand on, with nothing but the standard library: importing the bootstrap package brings the
config model (a quarter of a second), which `invoke rsync-up` does without.

For `rsync_filter`, Ray passes each name to rsync as `--filter 'dir-merge,- NAME'`. These are
rsync's rules for that: a file NAME in the source directory or any directory below it holds
exclude patterns, one a line (blank lines and lines starting with # or ; are skipped), which
apply to that directory and everything under it. Pattern syntax is rsync's, which .gitignore
files mostly share:

* `*` and `?` do not match `/`; `**` does; `[...]` is a character class.
* a trailing `/` matches directories only.
* a leading `/` anchors the pattern to the directory holding the filter file.
* otherwise a pattern with a `/` (or `**`) in it is matched against the end of the path (so a
  leading `**/` may match no directory), a pattern without one against the name alone.
* `dir/***` matches `dir` and everything in it.

An excluded directory is not descended into. Unlike git, rsync reads `!pattern` as a literal
pattern (no re-including), so neither do we. Filter files themselves are still sent, as rsync does.
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass


def glob_regex(pattern: str) -> re.Pattern[str]:
    """rsync wildcards -> a regex for the whole string."""
    out: list[str] = []
    i = 0
    if pattern.endswith("/***"):  # the directory itself and everything in it
        return re.compile(glob_regex(pattern[:-4]).pattern + "(?:/.*)?", re.DOTALL)
    while i < len(pattern):
        char = pattern[i]
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "\\" and i + 1 < len(pattern):
            i += 1
            out.append(re.escape(pattern[i]))
        elif char == "[" and (end := pattern.find("]", i + 2)) != -1:
            body = pattern[i + 1 : end]
            if body[0] in "!^":
                body = "^" + body[1:]
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = end
        else:
            out.append(re.escape(char))
        i += 1
    return re.compile("".join(out), re.DOTALL)


@dataclass(frozen=True)
class Rule:
    base: str  # the directory holding the filter file, relative to the sync root ("" = root)
    regex: re.Pattern[str]
    anchored: bool  # leading /: relative to `base`
    whole_path: bool  # has a / or **: matched against the path, else against the name
    dir_only: bool  # trailing /

    @classmethod
    def parse(cls, line: str, base: str) -> Rule:
        dir_only = line.endswith("/")
        pattern = line.rstrip("/")
        anchored = pattern.startswith("/")
        pattern = pattern.lstrip("/")
        whole_path = anchored or "/" in pattern or "**" in pattern
        return cls(base, glob_regex(pattern), anchored, whole_path, dir_only)

    def matches(self, relative: str, is_dir: bool) -> bool:
        if self.dir_only and not is_dir:
            return False
        if self.anchored:
            local = relative[len(self.base) + 1 :] if self.base else relative
            return self.regex.fullmatch(local) is not None
        parts = relative.split("/")
        if not self.whole_path:
            return self.regex.fullmatch(parts[-1]) is not None
        # rsync matches the path as if rooted at "/", so a leading `**/` may stand for no dirs
        tails = ["/" + relative] + ["/".join(parts[start:]) for start in range(len(parts))]
        return any(self.regex.fullmatch(tail) for tail in tails)


def parse_rules(text: str, base: str) -> list[Rule]:
    rules = []
    for raw in text.splitlines():
        line = raw.rstrip()  # git ignores trailing blanks; a pattern ending in one is rare
        if line and not line.startswith(("#", ";")) and line.strip("/"):
            rules.append(Rule.parse(line, base))
    return rules


class DirMergeFilters:
    """The rules of every filter file seen so far; call `load` on a directory before its entries.

    `read(name)` returns the text of the file `name` in that directory, or None if there is none:
    a local read for rsync-up, an SFTP read for rsync-down.
    """

    def __init__(self, names: Iterable[str] = ()) -> None:
        self.names = [name for name in names if name]
        self._rules: dict[str, list[Rule]] = {}

    def __bool__(self) -> bool:
        return bool(self.names)

    def load(self, relative_dir: str, read: Callable[[str], str | None]) -> None:
        rules = []
        for name in self.names:
            text = read(name)
            if text:
                rules += parse_rules(text, relative_dir)
        if rules:
            self._rules[relative_dir] = rules

    def excluded(self, relative: str, is_dir: bool) -> bool:
        """Is `relative` (a path under the sync root) excluded by a filter file above it?"""
        directory = posixpath.dirname(relative)
        bases = [""]
        if directory:
            parts = directory.split("/")
            bases += ["/".join(parts[: i + 1]) for i in range(len(parts))]
        return any(
            rule.matches(relative, is_dir)
            for base in bases
            for rule in self._rules.get(base, ())
        )


def is_excluded(relative: str, patterns: Iterable[str]) -> bool:
    """rsync-style match on the relative path or any of its trailing parts (`**/.git`, `*.pyc`)."""
    parts = relative.split("/")
    tails = ["/".join(parts[i:]) for i in range(len(parts))]
    for pattern in patterns:
        pattern = pattern.rstrip("/")
        anchored = pattern.startswith("/")
        pattern = pattern.lstrip("/")
        while pattern.startswith("**/"):
            pattern = pattern[3:]
        candidates = [relative] if anchored else tails
        if any(fnmatch.fnmatchcase(candidate, pattern) for candidate in candidates):
            return True
    return False
