"""The policy pack's rules (`policy.rules`, the same functions Pulumi's analyzer runs) over an
offline plan: the violations a plan records, how `invoke plan` and `invoke diff` show them,
and the refusal a `mandatory` one makes of `invoke diff`. Beside them the plan records the
spend cap's finding (`spend_cap`, always mandatory), which refuses `invoke plan`, `invoke diff`
and `invoke up` alike.

A stack names its pack config with `ray-gcp:policyConfig` (a JSON file in Pulumi's
`--policy-pack-config` form, relative to the project folder); without it every rule runs with
its defaults.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from model.stack_config import POLICY_KEY, resolve_cluster_path
from ops.errors import OpsError
from ops.review.spend_cap import SPEND_CAP
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


def refusal(stack: str, findings: list[Finding]) -> str | None:
    """The one line broken mandatory policies end a command with; the spend cap's own first
    (the file, the YAML path, the projection, the cap and the fix). None: nothing broken."""
    broken = mandatory_policies(findings)
    if not broken:
        return None
    others = [policy for policy in broken if policy != SPEND_CAP]
    also = (f"stack {stack!r} breaks mandatory policies: {', '.join(others)} (see the "
            "Guardrails section of the diff)" if others else "")
    if SPEND_CAP not in broken:
        return also
    cap = next(f for f in findings if f["policy"] == SPEND_CAP)
    return f"{cap['resource']}: {cap['message']}" + (f"; {also}" if also else "")


def refuse_mandatory(stack: str, findings: list[Finding]) -> None:
    """Raise when a mandatory policy is broken (after the diff is written)."""
    line = refusal(stack, findings)
    if line:
        raise OpsError(line)


def refuse_over_cap(stack: str, findings: list[Finding], when: str = "") -> None:
    """`invoke plan`'s and `invoke up`'s refusal: the spend cap alone (the pack's policies
    fail only the diff, and the up through the engine); `when` says what was not done."""
    line = refusal(stack, [f for f in findings if f["policy"] == SPEND_CAP])
    if line:
        raise OpsError(f"{line} ({when})" if when else line)


def mandatory_policies(findings: list[Finding]) -> list[str]:
    """The policies a plan breaks at the mandatory level, sorted, once each."""
    return sorted({f["policy"] for f in findings if f["level"] == "mandatory"})
