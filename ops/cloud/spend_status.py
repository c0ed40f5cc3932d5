"""The spend cap in `invoke status`, from the Compute API (so it reads a stopped head too): what
the head's daemon last published in the guest attribute `ray-spend/status` (spent so far, the
hourly projection, the cap), and what the head's labels record: a launch the head's provider
refused (`ray-spend-refused`, `-at`) and a stop at the total cap (`ray-spend-cap`, `-at`).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import TYPE_CHECKING, Any

from bootstrap.head_provider.spend import (
    CAPPED_AT_LABEL,
    CAPPED_LABEL,
    LABEL_TIME_FORMAT,
    REFUSED_AT_LABEL,
    REFUSED_LABEL,
    WORKERS_STOPPED,
)

if TYPE_CHECKING:
    from ops.cloud.cloud_api import StackApi

SPEND_NAMESPACE = "ray-spend/"  # bootstrap/autostop.py's SPEND_ATTRIBUTE is `ray-spend/status`


def label_time(label_value: str) -> str:
    """A time label's value (`2026-12-05t01-02-03z`) as `2026-12-05 01:02:03 UTC`."""
    try:
        moment = datetime.strptime(label_value, LABEL_TIME_FORMAT)
    except ValueError:
        return label_value
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def _money(amount: float | None, unit: str = "") -> str:
    return "no cap" if amount is None else f"${amount:.2f}{unit}"


def spend_lines(published: dict[str, Any] | None, head_labels: dict[str, str]) -> list[str]:
    """What to say: nothing for a cluster whose head shows no trace of a cap."""
    lines = []
    if published:
        lines.append(
            f"spend: ${published.get('total_usd', 0):.2f} so far (cap "
            f"{_money(published.get('max_usd_total'))}), "
            f"${published.get('per_hour', 0):.2f}/h now (cap "
            f"{_money(published.get('max_usd_per_hour'), '/h')}); counted by the head since "
            f"{published.get('started') or '?'}, last at {published.get('checked') or '?'}")
        capped = published.get("capped")
        if capped:
            lines.append(f"spend cap: at the total cap the head stopped "
                         f"{', '.join(capped.get('nodes') or []) or 'nothing'} "
                         f"({capped.get('action')}) at {capped.get('at')}")
    if head_labels.get(CAPPED_LABEL) == WORKERS_STOPPED:
        lines.append(f"spend cap: the workers are held stopped since "
                     f"{label_time(head_labels.get(CAPPED_AT_LABEL, '?'))}: raise "
                     "provider.spend_cap.max_usd_total (then `invoke up`) to launch again")
    if head_labels.get(REFUSED_LABEL):
        lines.append(f"spend cap: a launch of {head_labels[REFUSED_LABEL]} was refused at "
                     f"{label_time(head_labels.get(REFUSED_AT_LABEL, '?'))} (why: the head's "
                     "autoscaler log, Ray's monitor.log)")
    return lines


def head_spend_lines(api: StackApi) -> list[str]:
    """The lines for the stack's head, asked of the Compute API; none when it cannot say (the
    nodes table has said why the API did not answer)."""
    from google.api_core.exceptions import GoogleAPIError
    from google.auth.exceptions import GoogleAuthError
    from requests import RequestException

    from infra.workers.retry import with_retry

    outputs = api.outputs
    if not (outputs.project and outputs.zone and outputs.head_name):
        return []
    try:
        head = api.head()
    except (GoogleAPIError, GoogleAuthError, RequestException):
        return []
    published = None
    try:
        items = with_retry(lambda: api.clients.compute.guest_attributes(
            outputs.project, outputs.zone, outputs.head_name, SPEND_NAMESPACE))
        for item in items:
            if f"{item.get('namespace')}/{item.get('key')}" == f"{SPEND_NAMESPACE}status":
                published = json.loads(item.get("value", ""))
    except (GoogleAPIError, GoogleAuthError, RequestException, ValueError):
        published = None  # 404: the daemon has published nothing
    return spend_lines(published, dict(head.get("labels") or {}))
