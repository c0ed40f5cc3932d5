"""A cluster `ray up` made, taken over by a new stack (`invoke adopt`, ops/adopt): what the
stack file's `ray-gcp:adopt` names, read for the program.

- `head`: the head instance's name. The stack's head keeps it (a name is fixed for the life of
  an instance: another name would replace it) and is imported (`ResourceOptions(import_=...)`).
- `serviceAccount` / `roles`: `ray-autoscaler-sa-v1`, and the project roles it holds that the
  stack grants too: imported rather than created.
- `pinned`: per worker type, the running workers its WorkerGroup takes as its own (up to its
  count): no node is made where one already runs.
- `autoscaler`: per worker type, the running workers that stay Ray's autoscaler's: they gain
  only the stack's label (its `down` removes them). Their launch hash stays Ray's: the head
  goes on running the autoscaler `ray up` started, which would terminate a worker whose hash
  it does not compute as outdated.

Every name here was found in the cloud by `invoke adopt`; the program trusts none of it beyond
using it as a name (the providers look each one up).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from model.config import ConfigError
from model.stack_config import ADOPT_KEY

_NAME = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?")
_ROLE = re.compile(r"roles/[A-Za-z0-9_.]+")


@dataclass(frozen=True)
class Adoption:
    head: str
    service_account: bool = False
    roles: tuple[str, ...] = ()
    pinned: dict[str, tuple[str, ...]] = field(default_factory=dict)
    autoscaler: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def names(self) -> list[str]:
        """Every node the stack takes over: the head first."""
        return [self.head, *(name for names in self.pinned.values() for name in names),
                *(name for names in self.autoscaler.values() for name in names)]

    def of_type(self, node_type: str) -> dict[str, list[str]]:
        """A WorkerGroup's `adopt` input for `node_type`."""
        return {"pinned": list(self.pinned.get(node_type, ())),
                "autoscaler": list(self.autoscaler.get(node_type, ()))}

    def as_config(self) -> dict[str, Any]:
        """The stack file's `ray-gcp:adopt` value."""
        return {"head": self.head, "serviceAccount": self.service_account,
                "roles": list(self.roles),
                "pinned": {k: list(v) for k, v in sorted(self.pinned.items()) if v},
                "autoscaler": {k: list(v) for k, v in sorted(self.autoscaler.items()) if v}}


def read_adoption(raw: object) -> Adoption | None:
    """`ray-gcp:adopt` as written by `invoke adopt`; None when absent."""
    if raw is None:
        return None
    if not isinstance(raw, dict) or not isinstance(raw.get("head"), str):
        raise ConfigError([(ADOPT_KEY, "must be a mapping with the adopted head's `head` name "
                                       "(as `invoke adopt` writes it): run `invoke adopt` "
                                       "again or remove the key")])
    problems: list[tuple[str, str]] = []
    head = _names("head", [raw["head"]], problems)
    roles = raw.get("roles") or []
    if not isinstance(roles, list) or not all(isinstance(r, str) and _ROLE.fullmatch(r)
                                              for r in roles):
        problems.append((f"{ADOPT_KEY}.roles", "must be a list of `roles/...` names"))
        roles = []
    groups = {key: _groups(raw, key, problems) for key in ("pinned", "autoscaler")}
    if problems:
        raise ConfigError(problems)
    return Adoption(head=head[0], service_account=bool(raw.get("serviceAccount")),
                    roles=tuple(roles), pinned=groups["pinned"], autoscaler=groups["autoscaler"])


def _groups(raw: dict[str, Any], key: str,
            problems: list[tuple[str, str]]) -> dict[str, tuple[str, ...]]:
    value = raw.get(key) or {}
    if not isinstance(value, dict):
        problems.append((f"{ADOPT_KEY}.{key}", "must map a worker type to node names"))
        return {}
    return {str(node_type): tuple(_names(f"{key}.{node_type}", names, problems))
            for node_type, names in value.items()}


def _names(path: str, names: object, problems: list[tuple[str, str]]) -> list[str]:
    if not isinstance(names, list) or not all(isinstance(n, str) and _NAME.fullmatch(n)
                                              for n in names):
        problems.append((f"{ADOPT_KEY}.{path}", "must be GCE instance names (lowercase "
                                                "letters, digits and `-`)"))
        return [""] if path == "head" else []
    return list(names)
