"""What `invoke adopt` found and what the stack will take over, said before anything is
written; then what the first preview changes in place, explained."""

from __future__ import annotations

from collections.abc import Iterable

from ops.adopt.survey import RAY_KEY_FILE, Survey


def render(found: Survey) -> str:
    config = found.config
    lines = [f"Ray cluster {config.cluster_name!r} in project {config.provider.project}, zone "
             f"{config.provider.availability_zone}, as `ray up` made it:"]
    if found.head is not None:
        lines.append(f"  head      {found.head['name']} ({config.head_node_type}): imported "
                     "under its own name, kept running")
    for node_type, kept in sorted(found.autoscaler.items()):
        lines.append(f"  workers   {node_type}: {len(kept)} stay Ray's autoscaler's (the one "
                     f"`ray up` started on the head; the stack pins none of its own until "
                     f"you set a count): {', '.join(kept)}")
    if found.account:
        lines.append(f"  account   {found.account}: imported (kept when the stack goes, as "
                     "Ray keeps it)")
    lines += [f"  role      {role} of the account: imported" for role in found.roles_imported]
    lines += [f"  role      {role} of the account: granted by the stack"
              for role in found.roles_created]
    lines += [f"  role      {role} of the account: Ray's, not the stack's; left as it is"
              for role in found.roles_left]
    key_file = RAY_KEY_FILE.format(region=config.provider.region,
                                   project=config.provider.project,
                                   user=config.auth.ssh_user, index=0)
    if found.ray_keys:
        lines.append(f"  ssh key   Ray's ({key_file}, {len(found.ray_keys)} line(s) in the "
                     "project's ssh-keys metadata): left there; the stack's nodes get the "
                     "stack's own key (`invoke attach`). Remove Ray's line once no `ray up` "
                     "cluster of the project needs it")
    else:
        lines.append("  ssh key   none of Ray's in the project metadata")
    lines.append("  firewall  " + (", ".join(found.firewalls) + ": not the stack's, left as "
                                   "they are" if found.firewalls else
                                   "no rule aimed at the cluster (Ray's launcher makes none)"))
    lines.append("  added     what only the stack makes: its worker account, bucket, secrets, "
                 "firewall rules, the sweeper")
    if found.refusals:
        lines.append("cannot be adopted:")
        lines += [f"  - {reason}" for reason in found.refusals]
    return "\n".join(lines)


NOTES = {
    "labels": "labels: Ray's stay; the stack adds ray-gcp-stack and the launch hash of its "
              "own head config (from now on `invoke up`, not `ray up`, which would replace "
              "the head)",
    "metadata": "metadata: the startup script that makes the node boot itself and the "
                "stack's SSH key; the running node keeps running, the script runs at its "
                "next boot",
    "tags": "tags: the cluster's network tags, which the stack's firewall rules aim at",
    "serviceAccount": "serviceAccount: the scopes the stack gives the head",
    "desiredStatus": "desiredStatus/allowStoppingForUpdate: recorded, nothing changes on the "
                     "node",
    "allowStoppingForUpdate": "",
    "createIgnoreAlreadyExists": "createIgnoreAlreadyExists: recorded, nothing changes",
    "adopt": "adopt: the worker group labels the running workers named above with the stack "
             "(its `down` removes them); they stay Ray's autoscaler's",
}


def explain(updates: dict[str, list[str]]) -> str:
    """Each imported resource updated in place with why, one line per input it changes."""
    if not updates:
        return "the first preview changes nothing in place"
    lines = ["changed in place after the import (no node is replaced or deleted):"]
    for name, keys in sorted(updates.items()):
        lines.append(f"  {name}: {', '.join(keys)}")
        lines += [f"      {note}" for note in _notes(keys)]
    return "\n".join(lines)


def _notes(keys: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(NOTES[key] for key in keys if NOTES.get(key)))
