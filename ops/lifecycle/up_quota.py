"""The TPU quota check `invoke up` runs before it creates anything.

Pulumi's TPU slices are created by pulumi-gcp (or our queued-slice provider) one resource at a
time, and the TPU API refuses only the slice that no longer fits: an up of 7 slices under
quota for 5 would leave 5 created and 2 failed. So before the refresh and the up, the cluster
at the size Pulumi keeps (the head and each type's pinned count) is checked against the zone's
TPU quotas, as `invoke preflight` checks it at max_workers. The cluster's own slices are not
counted as in use (they are part of what it needs), so the check needs no diff. A limit that
cannot be read does not stop the up: it is said in one line. Compute workers are checked by
their WorkerGroup before each insert (infra/workers/quota.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TextIO

from infra.workers.quota import quota_request_url
from infra.workers.retry import RetryPolicy
from model.config import ClusterConfig
from ops.errors import OpsError
from ops.lifecycle.apis import quota_apis
from ops.lifecycle.preflight import kept_cluster, tpu_quota_check


def check_tpu_quota_before_up(
    config: ClusterConfig,
    counts: Mapping[str, int],
    out: TextIO,
    api_endpoint: str | None = None,
    retry: RetryPolicy | None = None,
) -> None:
    """Raise OpsError naming every short TPU quota; print why a quota could not be checked."""
    rows, users, _ = tpu_quota_check(
        config, kept_cluster(config, counts), quota_apis(config, api_endpoint, retry)
    )
    for row in rows:
        if row.limit is None and row.note == "unknown":
            print(f"  warning: TPU quota {row.metric} not checked: {row.why}", file=out, flush=True)
    short = [row for row in rows if row.short]
    if short:
        project = config.provider.project
        raise OpsError(
            "not enough TPU quota for the cluster's slices, nothing was created: "
            + "; ".join(f"{row.describe()} for {', '.join(users[row.metric])}" for row in short)
            + f". Request more at {quota_request_url(project)} (filter by the quota's name and "
            "zone), or lower the type's count (ray-gcp:workerCounts, else its min_workers)"
        )
