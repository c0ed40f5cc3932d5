"""Diff rows as Markdown for a pull-request comment: a summary line, then one bullet per
resource with its changed paths (`ray_worker_small.count: 1 -> 3`) and a cost hint where a
machine type changes."""

from __future__ import annotations

from ops.review.guardrails import Finding, markdown_lines
from ops.review.plan_diff import ACTION_ORDER, DiffRow
from ops.review.plan_effects import node_effect
from ops.review.prices import cost_hint, price_note

COMMENT_MARKER = "<!-- ray-gcp-plan-diff:{stack} -->"
MAX_CHANGES_SHOWN = 25
HEADINGS = {"replace": "Replace", "update": "Update in place", "add": "Add", "remove": "Remove"}


def change_lines(row: DiffRow) -> list[str]:
    """`subject.path: old -> new` per changed input, the form reviewers quote back; long
    text (scripts, the autoscaler config) as `subject.path: <summary>`."""
    return [f"{row.subject}.{c.path}: {c.summary or f'{c.old} -> {c.new}'}"
            for c in row.changes]


def machine_type_hint(row: DiffRow) -> str | None:
    change = next((c for c in row.changes if c.path == "machineType"), None)
    if change is None:
        return None
    return cost_hint(change.old, change.new, row.count if row.count is not None else 1)


def price_line(base: dict | None, head: dict | None) -> str | None:
    """`Price per hour: $0.12 -> $0.15 at the pinned size, ...` from the plans'
    `price_per_hour` (a base planned by older code has none: then the head's alone)."""
    if not head:
        return None
    parts = []
    floor = "at least " if head.get("unpriced") else ""  # an unpriced part is not free
    for key, label in (("pinned", "at the pinned size"), ("at_max_workers", "at max_workers")):
        new = f"{floor}${head[key]:.2f}"
        parts.append(f"{f'${base[key]:.2f} → ' if base and base[key] != head[key] else ''}"
                     f"{new} {label}")
    line = f"**Price per hour:** {', '.join(parts)}"
    if head.get("unpriced"):
        line += f" (without {', '.join(head['unpriced'])}: not in the price table)"
    return line


def _code(text: str) -> str:
    return "`" + text.replace("`", "'") + "`"


def _resource(row: DiffRow) -> str:
    if row.old_name and row.new_name and row.old_name != row.new_name:
        names = f"{_code(row.old_name)} → {_code(row.new_name)}"
    else:
        names = _code(row.new_name or row.old_name or "")
    return f"**{row.subject}** — {row.kind} {names} ({_code(row.type)})"


def summary(rows: list[DiffRow], unchanged: int) -> str:
    counts = {action: sum(1 for r in rows if r.action == action) for action in ACTION_ORDER}
    parts = [f"{counts[a]} to {a}" for a in ACTION_ORDER]
    return f"**{', '.join(parts)}**, {unchanged} unchanged"


def render_markdown(
    rows: list[DiffRow],
    stack: str,
    base_label: str,
    head_label: str,
    unchanged: int,
    notes: list[str] | None = None,
    price: str | None = None,
    warnings: list[str] | None = None,
    findings: list[Finding] | None = None,
    spend_cap: list[str] | None = None,
) -> str:
    """`notes` say how a side was planned when that limits what the diff can show; `price`
    is the cluster's price per hour (see `price_line`), with the `spend_cap` lines under it
    (`spend_cap.markdown_lines`); `warnings` are the working tree's
    review warnings (SSH open to the internet), shown even when nothing else changed;
    `findings` the working tree's policy violations (none for a plan made before the
    guardrails)."""
    # The first line a reviewer sees states the cost change (the marker is invisible).
    lines = [COMMENT_MARKER.format(stack=stack), *([price, ""] if price else []),
             *(spend_cap or []),
             f"### Plan diff for stack `{stack}`", "",
             f"{base_label} → {head_label}: {summary(rows, unchanged)}.", ""]
    for warning in warnings or []:
        lines += [f"> **Warning:** {warning}", ""]
    if findings is not None:
        lines += markdown_lines(findings)
    for note in notes or []:
        lines += [f"> **Note:** {note}", ""]
    if not rows:
        lines += ["No resource changes.", ""]
    priced = False
    for action in ACTION_ORDER:
        group = [r for r in rows if r.action == action]
        if not group:
            continue
        lines += [f"#### {HEADINGS[action]} ({len(group)})", ""]
        for row in group:
            lines.append(f"- {_resource(row)}")
            shown = change_lines(row)
            lines += [f"  - {_code(line)}" for line in shown[:MAX_CHANGES_SHOWN]]
            if len(shown) > MAX_CHANGES_SHOWN:
                lines.append(f"  - … and {len(shown) - MAX_CHANGES_SHOWN} more")
            for change in row.changes:  # the commands themselves, not a line count
                if change.commands:
                    lines += [f"  - commands in {row.subject}.{change.path}:", "", "    ```diff",
                              *(f"    {line}" for line in change.commands), "    ```", ""]
            effect = node_effect(row)  # issue 13: in place, stop/start or new nodes
            if effect:
                lines.append(f"  - effect: {effect}")
            hint = machine_type_hint(row)
            if hint:
                priced = True
                lines.append(f"  - cost hint: {hint}")
        lines.append("")
    if priced or price:
        lines += [f"<sub>{price_note()}</sub>", ""]
    lines.append("<sub>Offline plan: the program run under a mock engine (no cloud); "
                 "secret values are shown as [secret] and not compared.</sub>")
    return "\n".join(lines) + "\n"
