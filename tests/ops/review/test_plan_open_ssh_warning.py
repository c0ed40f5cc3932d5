"""A plan whose SSH rule admits every address says so, in `invoke plan` and in the PR diff;
ranges that merely look wide, and private mode, do not."""

from __future__ import annotations

import copy

import pytest

from model.config import parse_cluster_config
from ops.review.plan import plan_stack, render_table
from ops.review.plan_base import diff_stack_markdown
from tests.support.plan_repos import BASE_YAML, git_commit_all, write_stack

PROVIDER = {"type": "gcp", "region": "us-west1", "availability_zone": "us-west1-a",
            "project_id": "proj"}
HEAD = {"resources": {}, "node_config": {"machineType": "n1-standard-2"}}


def review_warnings(**provider) -> list[str]:
    config = parse_cluster_config({"cluster_name": "c", "provider": {**PROVIDER, **provider},
                                   "head_node_type": "h", "available_node_types": {"h": HEAD}})
    return config.review_warnings


@pytest.mark.parametrize("ranges", [None, ["0.0.0.0/0"], ["0.0.0.0/1", "128.0.0.0/1"],
                                    ["10.0.0.0/8", "0.0.0.0/1", "128.0.0.0/2", "192.0.0.0/2"],
                                    ["::/0"]])
def test_ranges_covering_every_address_are_named_in_a_warning(ranges):
    given = {} if ranges is None else {"ssh_source_ranges": ranges}
    (warning,) = review_warnings(**given)
    assert warning.startswith("provider.ssh_source_ranges:")
    assert "whole internet" in warning and "private_cluster" in warning
    assert ("::/0" if ranges == ["::/0"] else "0.0.0.0/0") in warning


@pytest.mark.parametrize("ranges", [["0.0.0.0/1"], ["0.0.0.0/1", "128.0.0.0/2"],
                                    ["203.0.113.0/24", "35.235.240.0/20"], ["::/1", "8000::/2"]])
def test_ranges_leaving_any_address_out_give_no_warning(ranges):
    assert review_warnings(ssh_source_ranges=ranges) == []


def test_private_mode_defaults_to_iap_and_gives_no_warning():
    assert review_warnings(private_cluster=True) == []


def test_invoke_plan_carries_the_warning_and_the_table_prints_it():
    plan = plan_stack("minimal")
    (warning,) = plan["warnings"]
    assert "0.0.0.0/0" in warning
    assert f"warning: {warning}\n" in render_table(plan)
    assert plan_stack("private")["warnings"] == []


@pytest.mark.slow  # the diff's plan interpreters: over 5 CPU-s (tests/conftest.py)
def test_the_pr_diff_shows_the_warning_even_without_a_resource_change(tmp_path):
    split = copy.deepcopy(BASE_YAML)
    split["provider"]["ssh_source_ranges"] = ["0.0.0.0/1", "128.0.0.0/1"]
    write_stack(tmp_path, "s", split)
    git_commit_all(tmp_path, "base")

    markdown = diff_stack_markdown("s", "HEAD", root=tmp_path)

    assert "No resource changes." in markdown
    (line,) = [line for line in markdown.splitlines() if line.startswith("> **Warning:**")]
    assert "(0.0.0.0/1, 128.0.0.0/1 together cover 0.0.0.0/0)" in line
