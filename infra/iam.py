"""Ray's autoscaler service account and its project roles (SPEC 2.2)."""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp

from infra.component_options import waits_for
from infra.config import ClusterConfig
from infra.config.cluster import AUTOSCALER_ACCOUNT_ID


class ClusterServiceAccount(pulumi.ComponentResource):
    """`ray-autoscaler-sa-v1` with the roles the head's autoscaler needs to manage nodes.

    Every cluster of a project shares the account and its role bindings, as with Ray's
    launcher: each stack adopts them if they exist and retains them on delete, so destroying
    one cluster never takes them from another (Ray never deletes them either).
    """

    email: pulumi.Output[str]

    def __init__(
        self, name: str, config: ClusterConfig, opts: pulumi.ResourceOptions | None = None
    ):
        super().__init__("ray-gcp:index:ClusterServiceAccount", name, None, opts)
        project = config.provider.project
        account = gcp.serviceaccount.Account(
            AUTOSCALER_ACCOUNT_ID,
            account_id=AUTOSCALER_ACCOUNT_ID,
            display_name="Ray Autoscaler Service Account (v1)",
            project=project,
            # Ray's launcher shares this account between clusters of a project.
            create_ignore_already_exists=True,
            opts=pulumi.ResourceOptions(
                parent=self, retain_on_delete=True, depends_on=waits_for(opts)
            ),
        )
        self.email = account.email
        self.bindings = [
            gcp.projects.IAMMember(
                f"{AUTOSCALER_ACCOUNT_ID}-{role.removeprefix('roles/').replace('.', '-')}",
                project=project,
                role=role,
                member=account.email.apply(lambda email: f"serviceAccount:{email}"),
                # A binding is one (role, member) pair in the project's policy, the same
                # pair for every cluster: deleting it would revoke it from all of them.
                opts=pulumi.ResourceOptions(parent=self, retain_on_delete=True),
            )
            for role in config.autoscaler_roles
        ]
        self.register_outputs({"email": self.email})
