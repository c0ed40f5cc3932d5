"""The policy pack's rules (`policy.rules`, the same functions Pulumi's analyzer runs) over an
offline plan: the violations a plan records, how `invoke plan` and `invoke diff` show them,
and the refusal a `mandatory` one makes of `invoke diff`.

A stack names its pack config with `ray-gcp:policyConfig` (a JSON file in Pulumi's
`--policy-pack-config` form, relative to the project folder); without it every rule runs with
its defaults.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from infra.stack_config import POLICY_KEY, resolve_cluster_path
from ops.errors import OpsError
from policy.rules import PackConfigError, evaluate, load_pack_config

Finding = dict[str, str]  # {policy, level, resource, message}: one violation in a plan


def pack_config(settings: Mapping[str, Any], root: Path) -> dict[str, Any]:
    path = settings.get(POLICY_KEY)
    try:
        return load_pack_config(resolve_cluster_path(path, root) if path else None)
    except PackConfigError as error:
        raise OpsError(str(error)) from None


def plan_findings(resources: Iterable[Mapping[str, Any]], config: Mapping[str, Any]
                  ) -> list[Finding]:
    """The violations of a plan's resources, as the plan document records them."""
    return [{"policy": v.policy, "level": v.level, "resource": v.resource, "message": v.message}
            for v in evaluate(((r["type"], r["name"], r["inputs"]) for r in resources), config)]


def table_lines(findings: list[Finding]) -> list[str]:
    if not findings:
        return ["policy: no violations"]
    return [f"policy: {len(findings)} violation(s)"] + [
        f"  {f['level'].upper():9}  {f['policy']}  {f['resource']}: {f['message']}"
        for f in findings]


def markdown_lines(findings: list[Finding]) -> list[str]:
    if not findings:
        return ["**Guardrails:** no policy violations.", ""]
    mandatory = sum(1 for f in findings if f["level"] == "mandatory")
    lines = [f"#### Guardrails: {len(findings)} policy violation(s), {mandatory} mandatory", ""]
    lines += [f"- **{f['level']}** `{f['policy']}` on `{f['resource']}`: {f['message']}"
              for f in findings]
    return lines + [""]


def refuse_mandatory(stack: str, findings: list[Finding]) -> None:
    """Raise when a mandatory policy is broken (after the diff is written)."""
    broken = mandatory_policies(findings)
    if broken:
        raise OpsError(f"stack {stack!r} breaks mandatory policies: {', '.join(broken)} (see "
                       "the Guardrails section of the diff)")


def mandatory_policies(findings: list[Finding]) -> list[str]:
    """The policies a plan breaks at the mandatory level, sorted, once each."""
    return sorted({f["policy"] for f in findings if f["level"] == "mandatory"})
