"""The IAM grants a program run declares, made in the fake cloud as pulumi-gcp would make
them: project members (`gcp.projects.IAMMember`), service-account members
(`gcp.serviceaccount.IAMMember`), secret members (`SecretIamMember`) and bucket members
(`BucketIAMMember`). For tests that start from the program's registrations without the
engine (tests/support/ray_cooperation.py): the fake then judges each call by exactly those
grants."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from model.config.cluster import AUTOSCALER_ACCOUNT_ID, CLOUD_PLATFORM_SCOPE
from model.identities import head_project_roles
from ops.review.plan_engine import ProgramRun
from tests.fakes.compute import FakeComputeServer


def grant_as_planned(run: ProgramRun, fake: FakeComputeServer) -> None:
    for resource in run.of_type("gcp:projects/iAMMember:IAMMember"):
        i = resource.inputs
        fake.platform.grant(i["project"], i["role"], i["member"])
    for resource in run.of_type("gcp:serviceaccount/iAMMember:IAMMember"):
        i = resource.inputs
        email = str(i["serviceAccountId"]).rsplit("/", 1)[-1]  # projects/p/serviceAccounts/e
        project = email.split("@", 1)[1].split(".", 1)[0]
        fake.platform.grant_on_account(project, email, i["role"], i["member"])
    for resource in run.of_type("gcp:secretmanager/secretIamMember:SecretIamMember"):
        i = resource.inputs
        fake.platform.grant_on_secret(i["project"], str(i["secretId"]).rsplit("/", 1)[-1],
                                      i["role"], i["member"])
    for resource in run.of_type("gcp:storage/bucketIAMMember:BucketIAMMember"):
        i = resource.inputs
        fake.storage.grant(i["bucket"], i["role"], i["member"])


def programs_head(fake: FakeComputeServer, project: str, tpu: bool = False) -> dict[str, Any]:
    """For a test with no planned cluster: the head's service account as the program makes
    it (the autoscaler's account, cloud-platform scope), granted the project roles the
    program grants it (model.identities; with `tpu`, a cluster with TPU types');
    {"email", "scopes"}."""
    email = f"{AUTOSCALER_ACCOUNT_ID}@{project}.iam.gserviceaccount.com"
    for role in head_project_roles(tpu):
        fake.platform.grant(project, role, f"serviceAccount:{email}")
    return {"email": email, "scopes": [CLOUD_PLATFORM_SCOPE]}


def local_metadata_token(folder: Path, token: str) -> None:
    """The metadata server's token answer, where a head in local mode reads it
    (bootstrap/head_provider/instance_metadata.py)."""
    path = folder / "service-accounts" / "default" / "token"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"access_token": token, "expires_in": 3599,
                                "token_type": "Bearer"}))
