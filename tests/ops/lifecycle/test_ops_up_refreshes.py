"""`invoke up` refreshes before it updates, so preempted or deleted workers come back in one
command: the refresh lowers a group's count in the state and the up makes the nodes again,
both in one engine run (`pulumi up --refresh`)."""

from __future__ import annotations

import io

from ops.cloud.cloud_api import API_ENDPOINT_ENV
from ops.lifecycle import pulumi_cli
from ops.stacks import stack as stack_module
from tests.fakes.compute import FakeComputeServer
from tests.support.recording_stacks import RecordingStack


def test_up_refreshes_first_so_lost_workers_are_recreated(monkeypatch):
    stack = RecordingStack()
    monkeypatch.setattr(stack_module, "select_stack", lambda name, create=False: stack)

    with FakeComputeServer() as fake:  # what the up's checks ask Compute first
        monkeypatch.setenv(API_ENDPOINT_ENV, fake.endpoint)
        pulumi_cli.run_operation("full", "up", out=io.StringIO())

    ((operation, kwargs),) = stack.calls  # one engine run: `pulumi up --refresh`
    assert operation == "up" and kwargs["refresh"] is True and kwargs["run_program"] is True
    assert callable(kwargs["on_event"])
