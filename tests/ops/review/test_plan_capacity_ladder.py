"""The plan shows each laddered type's rungs and which pinned node each rung is meant for
(a reservation rung: its nodes spread over the list by what each has free); `invoke preflight`
reads the free counts from the live API (the fake here). The worked example of the docs,
docs/examples/gpu-ladder.yaml, is planned as a user would plan it and passes Ray's schema."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from ray.autoscaler._private.util import prepare_config, validate_config

from model.config import load_cluster_config
from ops.lifecycle.apis import quota_apis
from ops.lifecycle.preflight_reservations import reservation_lines
from ops.review.plan import plan_yaml, render_json, render_table
from tests.fakes.compute import FakeComputeServer
from tests.fakes.compute.helpers import fast_retry

DOCS = Path(__file__).resolve().parents[3] / "docs"
EXAMPLE = DOCS / "examples" / "gpu-ladder.yaml"
A100 = [{"acceleratorType": "nvidia-tesla-a100", "acceleratorCount": 1}]


def test_the_docs_example_plans_with_its_ladder_and_passes_rays_schema():
    validate_config(prepare_config(yaml.safe_load(EXAMPLE.read_text())))  # as `ray up`
    plan = plan_yaml(str(EXAMPLE))
    table = render_table(plan).splitlines()

    row = next(line for line in table if line.startswith("a100_worker"))
    assert "reservation > spot > flex-start > on-demand" in row
    ladder = table[table.index(next(x for x in table if x.startswith("capacity ladder"))):][:6]
    assert ladder == [
        "capacity ladder of a100_worker (4 pinned, the first rung with room takes a node):",
        "  reservation a100-res in us-central1-a: nodes 1-4, as many as it holds (free count "
        "not read: `invoke preflight` reads it)",
        "  reservation projects/shared-gpu-proj/reservations/a100-pool in us-central1-a: nodes "
        "1-4, as many as it holds (shared from another project: not ours to read)",
        "  spot in us-central1-a, us-central1-b: the nodes the rungs above cannot place",
        "  flex-start (24 h at most) in us-central1-a (+ failover zones): the nodes the rungs "
        "above cannot place",
        "  on-demand in us-central1-a (+ failover zones): the nodes the rungs above cannot place",
    ]
    (entry,) = json.loads(render_json(plan))["capacity_ladders"]
    assert [r["market"] for r in entry["rungs"]] == [
        "reservation", "reservation", "spot", "flex-start", "on-demand"]


def test_preflight_reads_what_the_reservation_has_free_and_assigns_the_pinned_nodes():
    config = load_cluster_config(EXAMPLE)
    with FakeComputeServer() as fake:
        reservation = fake.cloud.reservations.add(
            "my-gcp-project", "us-central1-a", "a100-res", 5, "a2-highgpu-1g", accelerators=A100)
        reservation.consumers.update({"a", "b", "c"})  # 2 of 5 free
        apis = quota_apis(config, fake.endpoint, fast_retry())
        lines = reservation_lines(config, {"a100_worker": 4}, apis)

    assert lines[1] == "  reservation a100-res in us-central1-a: nodes 1-2 (2 free)"
    assert lines[2].startswith("  reservation projects/shared-gpu-proj/reservations/a100-pool "
                               "in us-central1-a: nodes 3-4, as many as it holds")


def test_preflight_names_a_reservation_it_cannot_find_with_the_fix():
    config = load_cluster_config(EXAMPLE)
    with FakeComputeServer() as fake:
        lines = reservation_lines(config, {"a100_worker": 4},
                                  quota_apis(config, fake.endpoint, fast_retry()))

    (problem,) = [line for line in lines if line.startswith("reservation problem")]
    assert "reservation a100-res cannot be read in us-central1-a" in problem
    assert "gcloud compute reservations list --project my-gcp-project" in problem


def any_reservation_config(tmp_path: Path) -> Path:
    raw = yaml.safe_load(EXAMPLE.read_text())
    raw["provider"]["capacity"]["a100_worker"]["ladder"] = [
        {"market": "any-reservation"}, {"market": "on-demand"}]
    path = tmp_path / "any.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def test_preflight_counts_what_an_any_reservation_rung_can_take(tmp_path):
    config = load_cluster_config(str(any_reservation_config(tmp_path)))
    with FakeComputeServer() as fake:
        book = fake.cloud.reservations
        book.add("my-gcp-project", "us-central1-a", "open", 3, "a2-highgpu-1g",
                 accelerators=A100, specific_required=False)
        book.add("my-gcp-project", "us-central1-a", "named", 5, "a2-highgpu-1g",
                 accelerators=A100)  # only for instances that name it
        book.add("my-gcp-project", "us-central1-a", "other-shape", 5, "n2-standard-8",
                 specific_required=False)
        lines = reservation_lines(config, {"a100_worker": 4},
                                  quota_apis(config, fake.endpoint, fast_retry()))

    assert lines[1] == "  any-reservation in us-central1-a: nodes 1-3 (3 free)"
    assert not [line for line in lines if line.startswith("reservation problem")]


def test_preflight_says_when_no_reservation_serves_an_any_reservation_rung(tmp_path):
    config = load_cluster_config(str(any_reservation_config(tmp_path)))
    with FakeComputeServer() as fake:
        fake.cloud.reservations.add("my-gcp-project", "us-central1-a", "named", 5,
                                    "a2-highgpu-1g", accelerators=A100)
        lines = reservation_lines(config, {"a100_worker": 4},
                                  quota_apis(config, fake.endpoint, fast_retry()))

    assert lines[1] == "  any-reservation in us-central1-a: none (0 free)"
    (problem,) = [line for line in lines if line.startswith("reservation problem")]
    assert "a100_worker's any-reservation rung in us-central1-a" in problem
    assert "a2-highgpu-1g with 1 x nvidia-tesla-a100" in problem


def test_preflight_counts_a_tpu_types_any_reservation_by_its_accelerator_type():
    from model.config import parse_cluster_config
    from tests.support.program_runs import stack_yaml

    raw = stack_yaml("tpu-queued")
    tpu_type = next(name for name, t in raw["available_node_types"].items()
                    if t["node_config"].get("acceleratorType") == "v4-8")
    raw["provider"]["capacity"] = {tpu_type: {"ladder": [{"market": "any-reservation"},
                                                         {"market": "on-demand"}]}}
    config = parse_cluster_config(raw)
    with FakeComputeServer() as fake:
        fake.cloud.reservations.add("my-gcp-project", "us-central2-b", "tpu-open", 2, "v4-8",
                                    specific_required=False)
        lines = reservation_lines(config, {tpu_type: 3},
                                  quota_apis(config, fake.endpoint, fast_retry()))

    assert lines[1] == "  any-reservation in us-central2-b: nodes 1-2 (2 free)"
