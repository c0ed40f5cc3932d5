"""Paths on the user's machine that a cluster YAML names (file_mounts sources, SSH keys).

`~` and `~user` are expanded as `ray up` expands them; a user that does not exist here (or a
home that cannot be found) is a ValueError the model reports at the key's YAML path.
"""

from __future__ import annotations

from pathlib import Path


def expand_local_path(value: str) -> Path:
    """`value` with a leading `~` or `~user` expanded."""
    try:
        return Path(value).expanduser()
    except RuntimeError:
        user = value[1:].split("/", 1)[0]
        whose = f"there is no user {user!r} on this machine" if user else \
            "your home directory cannot be found (HOME is unset)"
        raise ValueError(f"{value!r} starts with ~{user}, but {whose}: write the path out "
                         "in full, or start it with ~/ for your own home") from None
