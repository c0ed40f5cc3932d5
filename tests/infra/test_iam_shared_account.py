"""Two clusters in one project share Ray's autoscaler account and its role bindings:
destroying one stack must leave what the other still uses."""

from __future__ import annotations

import pytest

import ops.review.plan_engine as plan_engine
from ops.review.plan_engine import ProgramRun, RecordedResource, run_program


def run_recording_retained(cluster_file: str, stack: str) -> tuple[ProgramRun, set[str]]:
    """The program under mocks, plus the logical names registered with retain_on_delete."""
    retained: set[str] = set()

    class Monitor(plan_engine._RecordingMonitor):
        def RegisterResource(self, request):  # noqa: N802  (the gRPC method name)
            if request.retainOnDelete:
                retained.add(request.name)
            return super().RegisterResource(request)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(plan_engine, "_RecordingMonitor", Monitor)
        run = run_program({"ray-gcp:cluster": cluster_file}, stack=stack)
    return run, retained


def identity(resource: RecordedResource) -> tuple:
    """What a resource is in the cloud, whichever stack holds it (a resource without a name
    input is named after its logical name)."""
    keys = ("project", "accountId", "role", "member", "service", "secretId")
    name = resource.inputs.get("name", resource.name)
    return (resource.type, name, *(str(resource.inputs.get(key)) for key in keys))


def deleted_by_destroy(run: ProgramRun, retained: set[str]) -> set[tuple]:
    """What `pulumi destroy` asks the provider to delete: every custom resource but the
    retained ones; a `projects.Service` with disableOnDestroy false is left enabled."""
    return {
        identity(r)
        for r in run.resources
        if r.custom
        and r.name not in retained
        and not (r.type == "gcp:projects/service:Service" and not r.inputs["disableOnDestroy"])
    }


def test_destroying_one_cluster_leaves_the_shared_account_and_bindings_of_another():
    full, full_retained = run_recording_retained("stacks/clusters/full.yaml", "full")
    solo, _ = run_recording_retained("stacks/clusters/head-only.yaml", "head-only")
    assert full.of_type("gcp:compute/instance:Instance")[0].inputs["project"] == (
        solo.of_type("gcp:compute/instance:Instance")[0].inputs["project"])

    still_used = {identity(r) for r in solo.resources if r.custom}
    deleted = deleted_by_destroy(full, full_retained)
    assert not deleted & still_used
    shared = [r for r in full.resources if identity(r) in still_used]
    assert {r.type for r in shared} >= {
        "gcp:serviceaccount/account:Account", "gcp:projects/iAMMember:IAMMember"}
    # The cluster's own resources do go.
    (head,) = full.of_type("gcp:compute/instance:Instance")
    assert identity(head) in deleted
