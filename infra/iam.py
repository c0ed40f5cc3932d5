"""The nodes' service accounts and their grants (model.identities says who gets what): Ray's
autoscaler account for the head with its project roles (SPEC 2.2, trimmed to what the head's
autoscaler uses), the cluster's own worker account, the head's actAs on the worker accounts;
OS Login's grants."""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp

from infra.component_options import waits_for
from model.config import ClusterConfig
from model.config.cluster import AUTOSCALER_ACCOUNT_ID
from model.identities import SERVICE_ACCOUNT_USER, head_project_roles, worker_account_id
from model.plan import ClusterPlan


class ClusterServiceAccount(pulumi.ComponentResource):
    """`ray-autoscaler-sa-v1` with the project roles the head's autoscaler needs to create and
    delete workers.

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
            for role in head_project_roles(config.has_tpu)
        ]
        self.register_outputs({"email": self.email})


class WorkerServiceAccount(pulumi.ComponentResource):
    """The cluster's own worker account (`ray-<cluster>-worker`), made and deleted with the
    stack, and the head's `roles/iam.serviceAccountUser` on each account workers run as (its
    autoscaler launches workers as them: GCE asks the caller for `iam.serviceAccounts.actAs`).
    What workers may read is granted where it is kept (infra.bucket, infra.ray_token)."""

    email: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        plan: ClusterPlan,
        head_email: pulumi.Input[str],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("ray-gcp:index:WorkerServiceAccount", name, None, opts)
        account = gcp.serviceaccount.Account(
            name,
            account_id=worker_account_id(plan.config.cluster_name),
            display_name=f"Ray workers of cluster {plan.config.cluster_name}",
            project=plan.project,
            opts=pulumi.ResourceOptions(parent=self, depends_on=waits_for(opts)),
        )
        self.email = account.email
        self.account_users = [
            gcp.serviceaccount.IAMMember(
                f"{name}-head-acts-as-{email.split('@')[0]}",
                service_account_id=f"projects/{plan.project}/serviceAccounts/{email}",
                role=SERVICE_ACCOUNT_USER,
                member=pulumi.Output.concat("serviceAccount:", head_email),
                # Named as text (a preview shows it), after the cluster's own account exists.
                opts=pulumi.ResourceOptions(parent=self, depends_on=[account]),
            )
            for email in plan.worker_accounts
        ]
        self.register_outputs({"email": self.email})


class OsLoginGrants(pulumi.ComponentResource):
    """What `provider.os_login.principal` needs to log in to the nodes: the OS Login role on
    the project (`osAdminLogin` for sudo, which Ray's setup uses, or `osLogin`), and
    `serviceAccountUser` on each service account the nodes run as (OS Login asks it of anyone
    logging in to a VM that runs as a service account). Each is one IAM member resource: it
    adds the pair to the policy and leaves every other member alone."""

    def __init__(
        self,
        name: str,
        plan: ClusterPlan,
        depends_on: list[pulumi.Resource],
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__("ray-gcp:index:OsLoginGrants", name, None, opts)
        os_login = plan.config.provider.os_login
        if os_login is None:
            raise ValueError("OsLoginGrants needs provider.os_login")
        child = pulumi.ResourceOptions(parent=self, depends_on=depends_on)
        self.login = gcp.projects.IAMMember(
            f"{name}-{os_login.login_role.removeprefix('roles/').replace('.', '-')}",
            project=plan.project,
            role=os_login.login_role,
            member=os_login.principal,
            opts=child,
        )
        accounts = sorted({
            group.service_account_email
            for group in [plan.head, *plan.node_types.values()]
            if group.service_account_email
        })
        self.account_users = [
            gcp.serviceaccount.IAMMember(
                f"{name}-account-user-{email.split('@')[0]}",
                service_account_id=f"projects/{plan.project}/serviceAccounts/{email}",
                role=SERVICE_ACCOUNT_USER,
                member=os_login.principal,
                opts=child,
            )
            for email in accounts
        ]
        self.register_outputs({})
