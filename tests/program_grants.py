"""The IAM grants a program run declares, made in the fake cloud as pulumi-gcp would make
them: project members (`gcp.projects.IAMMember`), service-account members
(`gcp.serviceaccount.IAMMember`), secret members (`SecretIamMember`) and bucket members
(`BucketIAMMember`). For tests that start from the program's registrations without the
engine (tests/ray_cooperation.py): the fake then judges each call by exactly those grants."""

from __future__ import annotations

from ops.review.plan_engine import ProgramRun
from tests.fake_compute import FakeComputeServer


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
