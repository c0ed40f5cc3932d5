"""`invoke autostop` against a real sshd: it writes the head's override the daemon reads, and
says what it set; `invoke status` says when autostop stopped an unreachable head."""

from __future__ import annotations

import json

from bootstrap.autostop import OVERRIDE_FILE, REASON_LABEL, TIME_LABEL
from bootstrap.local_cluster import free_port
from ops.cloud.autostop import override_text
from tests.fakes.compute import FakeComputeServer
from tests.support.sshd_server import stack_outputs_for


def _override(home_stack) -> dict:
    return json.loads((home_stack.workdir / "home" / OVERRIDE_FILE).read_text())


def test_autostop_writes_the_heads_override(home_stack):
    result = home_stack.invoke("autostop", "--minutes", "30", "--down")
    assert result.returncode == 0, result.stderr
    assert "deletes the cluster after 30 idle minutes" in result.stdout
    assert "no autostop daemon runs on the head" in result.stdout  # this sshd runs none
    assert (home_stack.workdir / "home" / OVERRIDE_FILE).read_text() == override_text(30, True)
    assert _override(home_stack) == {"idle_minutes": 30, "down": True}


def test_cancel_turns_autostop_off(home_stack):
    assert home_stack.invoke("autostop", "--minutes", "5").returncode == 0
    result = home_stack.invoke("autostop", "--cancel")
    assert result.returncode == 0, result.stderr
    assert "autostop is off" in result.stdout
    assert _override(home_stack) == {"idle_minutes": 0, "down": False}


def test_bad_requests_are_one_line_errors(stack):
    for args, says in ((("autostop",), "give --minutes N"),
                       (("autostop", "--minutes", "0"), "at least 1"),
                       (("autostop", "--cancel", "--down"), "--cancel takes no")):
        result = stack.invoke(*args)
        assert result.returncode == 1
        assert says in result.stderr and "Traceback" not in result.stderr


def test_status_says_when_autostop_stopped_the_head(stack, sshd):
    outputs = stack_outputs_for(sshd, ssh_port=free_port())  # nothing listens: head is down
    stack.write_outputs(outputs)
    with FakeComputeServer() as fake:
        fake.cloud.add_foreign_instance(outputs["project"], outputs["zone"],
                                        outputs["head_name"], {
                                            REASON_LABEL: "stopped",
                                            TIME_LABEL: "2026-12-03t14-15-00z"})
        with fake.cloud.lock:
            fake.cloud.zone_instances(outputs["project"], outputs["zone"])[
                outputs["head_name"]]["status"] = "TERMINATED"
        result = stack.invoke("status", env={**stack.env, "RAY_GCP_API_ENDPOINT": fake.endpoint})
    assert result.returncode == 0, result.stderr
    assert ("the cluster was stopped for idleness at 2026-12-03 14:15:00 UTC (autostop)"
            in result.stdout)
    assert "invoke up --stack test" in result.stdout


def test_autostop_and_cost_have_help_for_every_flag(stack):
    for task, flags in (("autostop", ("--stack", "--minutes", "--down", "--cancel")),
                        ("cost", ("--stack",))):
        help_text = stack.invoke("--help", task).stdout
        assert all(flag in help_text for flag in flags), help_text
