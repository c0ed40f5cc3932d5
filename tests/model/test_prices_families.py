"""Every current machine family has a list price (the plan, `invoke cost`, the spend cap and
the policy pack's max-hourly-price all read model/price_table.yaml): a2/a3/g2 nodes are priced
with the GPUs they come with, and the two readers of the table (model.prices for the program
and the tasks, policy.prices for the policy pack, which imports nothing of ours) agree."""

from __future__ import annotations

import pytest

from model.prices import bundled_gpus, machine_price, price_table
from policy.nodes import Node
from policy.prices import node_price

CURRENT = ["e2-standard-4", "e2-micro", "n1-standard-8", "n2-standard-8", "n2d-standard-8",
           "n4-standard-8", "c2-standard-8", "c2d-standard-8", "c3-standard-8", "c3d-standard-8",
           "c4-standard-8", "t2d-standard-8", "h3-standard-88", "a2-highgpu-1g",
           "a2-ultragpu-2g", "a3-highgpu-8g", "g2-standard-24", "n2-custom-4-8192"]


@pytest.mark.parametrize("machine_type", CURRENT)
def test_every_current_family_has_an_on_demand_price(machine_type):
    assert machine_price(machine_type) is not None
    _, unpriced = node_price(price_table(), Node(lambda: {}, 1, "us-central1-a",
                                                 machine_type=machine_type))
    assert unpriced == []


@pytest.mark.parametrize(("machine_type", "gpu", "count"), [
    ("a2-highgpu-1g", "nvidia-tesla-a100", 1), ("a2-ultragpu-2g", "nvidia-a100-80gb", 2),
    ("a3-highgpu-8g", "nvidia-h100-80gb", 8), ("g2-standard-24", "nvidia-l4", 2),
])
def test_a_machine_type_with_its_own_gpus_is_priced_with_them(machine_type, gpu, count):
    assert bundled_gpus(machine_type) == [(gpu, count)]
    price, _ = node_price(price_table(), Node(lambda: {}, 1, "us-central1-a",
                                              machine_type=machine_type))
    rate = price_table()["gpus"][gpu]["on_demand"]
    assert price == pytest.approx(machine_price(machine_type) + count * rate)


@pytest.mark.parametrize("spot", [False, True])
@pytest.mark.parametrize("machine_type", CURRENT)
def test_the_policy_packs_reader_agrees_with_the_programs(machine_type, spot):
    ours = machine_price(machine_type, spot)
    theirs, unpriced = node_price(price_table(), Node(lambda: {}, 1, "us-central1-a",
                                                      machine_type=machine_type, spot=spot))
    gpus = sum(count * price_table()["gpus"][gpu].get("spot" if spot else "on_demand", 0)
               for gpu, count in bundled_gpus(machine_type))
    if ours is None:
        assert machine_type in unpriced
    else:
        assert theirs == pytest.approx(ours + gpus, rel=1e-4)


def test_a_v5e_slice_given_by_accelerator_config_is_priced_by_the_policy_pack():
    price, unpriced = node_price(price_table(), Node(lambda: {}, 1, "us-central1-a",
                                                     tpu_version="v5lite_pod", tpu_chips=8))
    assert unpriced == [] and price == pytest.approx(
        8 * price_table()["tpu_chips"]["v5litepod"]["on_demand"])
