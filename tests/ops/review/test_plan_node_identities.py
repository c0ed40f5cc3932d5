"""The plan says, per node role, which account the nodes run as, with which scopes and grants,
and warns when a node_config's own account cannot do what its node needs."""

from __future__ import annotations

from model.identities import bucket_name, worker_account_id
from model.plan import plan_cluster
from tests.support.bootstrap_stubs import cluster

CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform"
READ_ONLY = "https://www.googleapis.com/auth/devstorage.read_only"
OWN = "mine@my-gcp-project.iam.gserviceaccount.com"


def _with_worker_account(scopes: list[str]):
    return cluster(available_node_types={
        "head_t": {"resources": {"CPU": 2}, "node_config": {"machineType": "n1-standard-2"}},
        "worker_t": {"resources": {"CPU": 4}, "min_workers": 1, "node_config": {
            "machineType": "n1-standard-2",
            "serviceAccounts": [{"email": OWN, "scopes": scopes}]}},
    })


def test_default_workers_run_as_the_clusters_own_account_with_only_its_reads():
    plan = plan_cluster(cluster())
    head, worker = plan.identities
    assert worker.email == "ray-stubbed-worker@my-gcp-project.iam.gserviceaccount.com"
    assert worker.scopes == (CLOUD_PLATFORM,)
    assert [str(g) for g in worker.grants] == [
        "roles/secretmanager.secretAccessor on secret ray-stubbed-auth-token",
        f"roles/storage.objectViewer on bucket {bucket_name(plan.config)}"]
    assert head.email.startswith("ray-autoscaler-sa-v1@")
    assert "roles/iam.serviceAccountUser on service account " + worker.email in \
        [str(g) for g in head.grants]
    assert not any(g.role == "roles/storage.objectAdmin" for g in head.grants)
    assert plan.identity_warnings == []


def test_a_node_config_account_without_cloud_platform_is_warned_of_its_missing_secret_access():
    (warning,) = plan_cluster(_with_worker_account([READ_ONLY])).identity_warnings
    assert warning.startswith("available_node_types.worker_t.node_config:")
    assert OWN in warning and "secret access" in warning and "bucket read" not in warning


def test_a_node_config_account_with_no_scope_is_warned_of_both_reads():
    (warning,) = plan_cluster(_with_worker_account([])).identity_warnings
    assert "secret access" in warning and "bucket read" in warning


def test_a_node_config_account_with_cloud_platform_is_kept_without_warning():
    plan = plan_cluster(_with_worker_account([CLOUD_PLATFORM]))
    assert plan.node_types["worker_t"].service_account_email == OWN
    assert plan.identity_warnings == []


def test_long_cluster_names_give_distinct_valid_account_ids():
    first = worker_account_id("a" * 30 + "-one")
    second = worker_account_id("a" * 30 + "-two")
    assert first != second
    assert all(6 <= len(name) <= 30 for name in (first, second))
    assert worker_account_id("c") == "ray-c-worker"
