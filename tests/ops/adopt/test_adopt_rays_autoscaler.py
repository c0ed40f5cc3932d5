"""What runs on an adopted head, run: Ray's own autoscaler as `ray up` started it.

`invoke adopt` and `invoke up` change the head's metadata (the stack's startup script) but
restart nothing: the startup script runs at the head's next boot, and a head `ray up` made has
no node watcher to notice it. So until Ray restarts on the head, its monitor goes on running
`ray up`'s autoscaler (v2 by default since Ray 2.50, v1 with `RAY_UP_enable_autoscaler_v2=0`)
with Ray's `GCPNodeProvider` and the config `ray up` put on the head
(tests/support/ray_up_head.py runs both from the wheel against the fake cloud).

Across the adoption, on a cluster Ray's launcher made with `min_workers` and two more workers:
before `adopt`, after it, and after the first `up`, that autoscaler sees every node, launches
nothing for work they serve and terminates nothing (a worker whose launch hash is not the one
it computes would be terminated as outdated; one it no longer counts as its own, replaced).
Idle, it retires what it retires without the stack; a worker it launches after the adoption is
removed by `invoke down` with the rest.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.adoption import invoke, made_by_ray, shipped_yaml
from tests.support.engine_stack import cluster_nodes
from tests.support.ray_launcher import ray_sees
from tests.support.ray_up_head import IDLE_FOR_AN_HOUR, RayUpHead, Version

pytestmark = [pytest.mark.engine, pytest.mark.slow]

WORKER = "ray_worker_small"


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_rays_autoscaler_on_the_adopted_head_keeps_every_node_as_before(
        ray_user, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, version: Version) -> None:
    env, fake = ray_user
    data = shipped_yaml("full", f"adopt-{version}")
    data["max_workers"] = data["available_node_types"][WORKER]["max_workers"] = 3
    cluster_yaml, made = made_by_ray(fake, tmp_path, data, {WORKER: 2})  # min_workers 1, +2
    project, zone = data["provider"]["project_id"], data["provider"]["availability_zone"]
    (tmp_path / "head").mkdir()
    head = RayUpHead(version, made, fake, tmp_path / "head", monkeypatch)
    nodes = set(head.running())
    assert len(nodes) == 4
    served = head.bundles(3, WORKER)  # the head and three workers: what runs serves it

    def holds(when: str) -> None:
        for _ in range(3):
            head.cycle(requested=served, busy=nodes)
        assert set(head.running()) == nodes, f"{when}: {sorted(set(head.running()) ^ nodes)}"
        assert head.raylets.drained == [], when

    holds("before adopt")
    invoke(env, "adopt", "-c", str(cluster_yaml), "-y")
    holds("after adopt")
    invoke(env, "up", "-c", str(cluster_yaml), "-y")
    holds("after the first up")

    # Idle for an hour: Ray keeps the type's min_workers and retires the rest, as it did
    # before the adoption.
    for _ in range(3):
        head.cycle(idle_s={name: IDLE_FOR_AN_HOUR for name in nodes})
    left = set(head.running())
    assert made.head in left and len(left) == 2, sorted(left)

    # A worker the autoscaler launches now carries no stack's label: `down` removes it too.
    head.cycle(requested=head.bundles(2, WORKER), busy=left)
    launched = set(head.running()) - left
    assert len(launched) == 1, sorted(launched)
    assert "ray-gcp-stack" not in head.running()[launched.pop()]["labels"]
    invoke(env, "down", "-c", str(cluster_yaml), "-y")
    assert cluster_nodes(fake, project, zone, data["cluster_name"]) == {}
    assert ray_sees(made.config) == []
