"""Cost hints: machine prices built from per-vCPU and per-GiB rates match Google's published
per-machine prices, and a hint's delta is the price difference times the nodes."""

from __future__ import annotations

import pytest

from ops.review.prices import cost_hint, hourly_price, price_note

# Per-machine on-demand prices published for us-central1 (see ops/review/prices.py's docstring),
# independent of the per-unit rates the module computes from.
PUBLISHED = {"n1-standard-4": 0.1900, "e2-standard-4": 0.134012, "n2-standard-2": 0.0971,
             "n1-standard-1": 0.0475, "e2-standard-2": 0.067006}


@pytest.mark.parametrize("machine_type", sorted(PUBLISHED))
def test_computed_price_matches_the_published_machine_price(machine_type: str) -> None:
    assert hourly_price(machine_type) == pytest.approx(PUBLISHED[machine_type], abs=5e-5)


def test_cost_hint_delta_is_price_difference_times_nodes() -> None:
    old, new, nodes = "n1-standard-2", "n2-standard-8", 3
    delta = (hourly_price(new) - hourly_price(old)) * nodes
    assert f"(+${delta:.2f}/h for {nodes} nodes)" in cost_hint(old, new, nodes)


def test_unknown_machine_type_is_named_instead_of_priced() -> None:
    assert cost_hint("n1-standard-2", "a3-megagpu-8g") == "no price known for a3-megagpu-8g"


def test_price_note_says_approximate() -> None:
    assert "approximate" in price_note()
