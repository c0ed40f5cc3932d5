"""RayCluster: wires service account, SSH key, Ray auth token, network, bucket, head, worker
groups and TPU slices. Nothing else."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_gcp as gcp

from bootstrap import autoscaler_config
from bootstrap.file_mounts import FileMountArchive, PackedMounts
from infra.bucket import ClusterBucket
from infra.iam import ClusterServiceAccount, OsLoginGrants, WorkerServiceAccount
from infra.key_secret import BootstrapKeySecret
from infra.metadata import (
    BOOTSTRAP_CONFIG_KEY,
    BOOTSTRAP_SSH_KEY_SECRET_KEY,
    HEAD_ADDRESS_KEY,
    PINNED_METADATA,
    RAY_AUTH_TOKEN_SECRET_KEY,
    merge_metadata,
    pinned_body,
    with_worker_request,
)
from infra.network import ClusterNetwork
from infra.node_resources import HeadNode, NodeInputs
from infra.nodes import node_body
from infra.ray_token import RayTokenSecret
from infra.ssh_keys import ClusterSshKey
from infra.stack_secret import ARCHIVE_KEY_PURPOSE, StackSecret
from infra.tpu_slices import TpuSlices
from infra.workers import ClusterSweeper, ClusterSweeperArgs, WorkerGroup, WorkerGroupArgs
from model.config import ClusterConfig
from model.labels import LAUNCH_CONFIG, STACK, launch_config_hash
from model.plan import ClusterPlan, NodeGroupPlan
from model.yaml_text import dump_yaml


class RayCluster(pulumi.ComponentResource):
    """A Ray cluster on GCP from a node plan; outputs what `invoke attach` and friends need."""

    def __init__(
        self,
        name: str,
        plan: ClusterPlan,
        credentials: pulumi.Output[str] | None = None,
        opts: pulumi.ResourceOptions | None = None,
        reapply_request: str = "",
        api_endpoint: str | None = None,
        mounts: PackedMounts | None = None,
        stack: str = "",
    ) -> None:
        """`stack` is the stack's identity (model.labels.stack_identity), on every node.
        `mounts` are the packed file_mounts, named here with the stack's secret key."""
        super().__init__("ray-gcp:index:RayCluster", name, None, opts)
        config = plan.config
        user = config.auth.ssh_user

        # SPEC 2.1: fail early, at preview, when the project does not exist.
        self.project_number = gcp.organizations.get_project_output(
            project_id=plan.project, opts=pulumi.InvokeOptions(parent=self)
        ).number
        # Created first, so destroyed last: it deletes every node still labelled with the
        # cluster and the stack (the autoscaler's own, leftovers of a half-failed up) once the
        # rest is gone. Its create claims the cluster name: everything else waits for it.
        self.sweeper = ClusterSweeper(
            sweeper_name(name),
            ClusterSweeperArgs(
                project=plan.project,
                zone=plan.zone,
                cluster_name=config.cluster_name,
                has_tpu=config.has_tpu,
                credentials=credentials,
                api_endpoint=api_endpoint,
                stack=stack or None,
            ),
            opts=pulumi.ResourceOptions(parent=self, aliases=_sweeper_aliases(name, plan)),
        )
        child = pulumi.ResourceOptions(parent=self, depends_on=[self.sweeper])
        stack_labels = {STACK: stack} if stack else {}
        self.service_account = ClusterServiceAccount(f"{name}-service-account", config, child)
        # Who each node runs as (model.identities): the head as the account above unless its
        # node_config names one, workers as the cluster's own account unless theirs does.
        head_email = self._head_email(plan)
        self.worker_account = WorkerServiceAccount(
            f"ray-{config.cluster_name}-worker", plan, head_email, child)
        node_accounts = _node_accounts(plan, {
            config.autoscaler_service_account_email: self.service_account.email,
            plan.worker_account_email: self.worker_account.email,
        })
        if config.provider.os_login:
            self.os_login = OsLoginGrants(
                f"{name}-os-login", plan,
                depends_on=[self.service_account, self.worker_account], opts=child
            )
        self.ssh_key = ClusterSshKey(f"{name}-ssh-key", config, child)
        self.network = ClusterNetwork(f"{name}-network", plan, child)
        self.key_secret = BootstrapKeySecret(
            f"ray-{config.cluster_name}-ssh-key",
            config,
            self.ssh_key.private_key,
            head_email,
            child,
            stack=stack,
        )
        # Every node reads the Ray auth token with its own service account, as the head reads
        # the key, and nothing else's; off when the YAML says `provider.ray_token_auth: false`.
        self.ray_token: RayTokenSecret | None = None
        token_metadata: dict[str, pulumi.Input[str]] = {}
        token_after_version: dict[str, pulumi.Input[str]] = {}
        if config.provider.ray_token_auth:
            self.ray_token = RayTokenSecret(
                f"ray-{config.cluster_name}-auth-token",
                config,
                node_accounts,
                pulumi.ResourceOptions(parent=self, depends_on=[self.sweeper, self.key_secret]),
                stack=stack,
            )
            # Workers name the version as plain text (a preview keeps their bodies known) and
            # wait for it through depends_on; the head, whose component's depends_on does not
            # reach its instance, waits through the output.
            token_metadata = {RAY_AUTH_TOKEN_SECRET_KEY: self.ray_token.version_name}
            token_after_version = {
                RAY_AUTH_TOKEN_SECRET_KEY: self.ray_token.version_reference}
        token_dependencies: list[pulumi.Resource] = [self.ray_token] if self.ray_token else []
        # The archive's name is an HMAC under a key only this stack's state holds, so the name
        # (in public metadata and previews) cannot be checked against guesses of a secret file.
        # A cluster without file_mounts has no key: its stack gains no resource.
        self.file_mounts: pulumi.Output[FileMountArchive] | None = None
        if mounts is not None:
            key = StackSecret(f"{name}-file-mounts-key", ARCHIVE_KEY_PURPOSE, child)
            self.file_mounts = key.value.apply(mounts.keyed)
        mounts_archive = self.file_mounts
        # What nodes fetch with their own service account: file_mounts, the head's config.
        self.bucket = ClusterBucket(
            f"ray-{config.cluster_name}-bucket",
            config,
            node_accounts,
            mounts_archive,
            child,
            stack=stack,
        )
        head_name = plan.head.instance_name

        # Every node type in the worker role: what Ray's autoscaler launches from the head's
        # bootstrap config, and exactly what our worker groups create. Each boots itself from
        # its startup script.
        worker_bodies: dict[str, pulumi.Output[dict[str, Any]]] = {
            node_type: _body(
                config, group, self.network, self.ssh_key,
                {HEAD_ADDRESS_KEY: head_name, **token_metadata}, mounts_archive, stack_labels,
            )
            for node_type, group in plan.node_types.items()
        }
        auth = pulumi.Output.all(self.ssh_key.private_key).apply(
            lambda key: {"ssh_user": user, "ssh_private_key": key[0]}
        )
        # The head's autoscaler counts the worker groups' nodes towards each type's minimum.
        worker_counts = {group.node_type: group.count for group in plan.workers}
        bootstrap_yaml = pulumi.Output.all(**worker_bodies).apply(
            lambda bodies: dump_yaml(autoscaler_config(config, bodies, worker_counts))
        )
        self.head = HeadNode(
            f"{name}-head",
            plan,
            NodeInputs(
                # Its metadata goes apart (it holds secrets): the body only gives its networking.
                body=pulumi.Output.from_input(self.network.interfaces_for(plan.head)).apply(
                    lambda interfaces: node_body(plan.head, interfaces, {})
                ),
                metadata=merge_metadata(
                    config,
                    plan.head,
                    self.ssh_key.public_key,
                    {
                        BOOTSTRAP_CONFIG_KEY: self.bucket.autoscaler_config(bootstrap_yaml),
                        BOOTSTRAP_SSH_KEY_SECRET_KEY: self.key_secret.version_name,
                        **token_after_version,
                    },
                    mounts_archive,
                    request=reapply_request,
                ),
                labels=_labels(plan.head, worker_bodies[plan.head.node_type], auth, stack_labels),
            ),
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=[self.sweeper, self.service_account, self.worker_account,
                            self.network, self.key_secret, *token_dependencies,
                            *self.bucket.dependencies],
            ),
        )
        after_head: list[pulumi.Resource] = [self.sweeper, self.head, self.worker_account,
                                             *self.bucket.dependencies, *token_dependencies]
        self.worker_groups: dict[str, WorkerGroup | TpuSlices] = {}
        for group in plan.workers:
            body = worker_bodies[group.node_type]
            labels = _labels(group, body, auth, stack_labels)
            opts = pulumi.ResourceOptions(parent=self, depends_on=after_head)
            if group.kind == "tpu":
                # Each slice Pulumi keeps is a V2Vm of its own, shown and validated by Pulumi.
                self.worker_groups[group.node_type] = TpuSlices(
                    f"{name}-{group.node_type}",
                    plan,
                    group,
                    NodeInputs(
                        body=body,
                        metadata=merge_metadata(
                            config, group, self.ssh_key.public_key,
                            {HEAD_ADDRESS_KEY: head_name, **token_metadata, **PINNED_METADATA},
                            mounts_archive,
                        ),
                        labels=labels,
                    ),
                    depends_on=after_head,
                    opts=opts,
                    credentials=credentials,
                    api_endpoint=api_endpoint,
                )
            else:
                self.worker_groups[group.node_type] = _worker_group(
                    f"{name}-{group.node_type}",
                    plan,
                    group,
                    body.apply(lambda b: with_worker_request(pinned_body(b), reapply_request)),
                    labels,
                    credentials,
                    opts,
                    api_endpoint,
                )
        self.register_outputs({"head_name": head_name})

    def _head_email(self, plan: ClusterPlan) -> pulumi.Input[str]:
        """The head's account: the autoscaler account's output (a grant to it waits for it),
        or the one its node_config names."""
        if plan.head.account_from_node_config:
            return plan.head.service_account_email
        return self.service_account.email


def sweeper_name(name: str) -> str:
    """Worker groups, the sweeper's siblings of the same Pulumi type, are `<name>-<node type>`
    and node type names hold only lowercase letters, digits, `_` and `-`: with a `.` the
    sweeper's name is one no node type can take (a type named `sweeper` included)."""
    return f"{name}.sweeper"


def _sweeper_aliases(name: str, plan: ClusterPlan) -> list[pulumi.Alias]:
    """Stacks deployed before the rename know the sweeper as `<name>-sweeper`: the alias keeps
    it the same resource (a replacement would delete the old one, sweeping the cluster). No
    such stack has a worker type `sweeper`: its two resources could not have been created."""
    if any(group.node_type == "sweeper" for group in plan.workers):
        return []
    return [pulumi.Alias(name=f"{name}-sweeper")]


def _body(
    config: ClusterConfig,
    group: NodeGroupPlan,
    network: ClusterNetwork,
    ssh_key: ClusterSshKey,
    extra: dict[str, pulumi.Input[str]],
    mounts: pulumi.Output[FileMountArchive] | None,
    stack_labels: dict[str, str],
) -> pulumi.Output[dict[str, Any]]:
    """The group's node body in API JSON once the subnet and the public key are known. Its
    labels carry the stack's identity: the autoscaler launches its own nodes from this body
    (Ray adds its labels to the body's), so they carry it too and the sweeper finds them."""
    metadata = merge_metadata(config, group, ssh_key.public_key, extra, mounts)
    return pulumi.Output.all(network.interfaces_for(group), pulumi.Output.all(**metadata)).apply(
        lambda values: _with_labels(node_body(group, values[0], values[1]), stack_labels)
    )


def _node_accounts(
    plan: ClusterPlan, own: dict[str, pulumi.Output[str]]
) -> list[pulumi.Input[str]]:
    """Every account a node runs as, each once, the head's first: the program's own by their
    resources' outputs (`own`: a grant to them waits for the account), a node_config's by its
    email."""
    emails = dict.fromkeys(group.service_account_email
                           for group in [plan.head, *plan.node_types.values()])
    return [own.get(email, email) for email in emails]


def _with_labels(body: dict[str, Any], labels: dict[str, str]) -> dict[str, Any]:
    return {**body, "labels": {**body.get("labels", {}), **labels}}


def _worker_group(
    name: str,
    plan: ClusterPlan,
    group: NodeGroupPlan,
    body: pulumi.Output[dict[str, Any]],
    labels: pulumi.Output[dict[str, str]],
    credentials: pulumi.Output[str] | None,
    opts: pulumi.ResourceOptions,
    api_endpoint: str | None,
) -> WorkerGroup:
    """One WorkerGroup owns N instances of the type: one number scales it, and it counts the
    autoscaler's own nodes without touching them."""
    return WorkerGroup(
        name,
        WorkerGroupArgs(
            project=plan.project,
            zone=plan.zone,
            cluster_name=plan.config.cluster_name,
            node_type=group.node_type,
            name_prefix=group.name_prefix,
            body=pulumi.Output.all(body, labels).apply(lambda pair: {**pair[0], "labels": pair[1]}),
            count=group.count,
            cache_stopped_nodes=plan.config.provider.cache_stopped_nodes,
            credentials=credentials,
            api_endpoint=api_endpoint,
            fallback_zones=plan.config.provider.fallback_zones,
            capacity=plan.config.provider.capacity_input(group.node_type),
        ),
        opts=opts,
    )


def _labels(
    group: NodeGroupPlan,
    ray_node_config: pulumi.Output[dict[str, Any]],
    auth: pulumi.Output[dict[str, str]],
    stack_labels: dict[str, str],
) -> pulumi.Output[dict[str, str]]:
    """Ray's labels, the stack's identity, and the launch hash the head's autoscaler will
    compute for this type. The hash is a digest of the key, not the key: it is shown, not kept
    secret. The stack label is not in `group.labels`, which node names derive from."""
    return pulumi.Output.unsecret(
        pulumi.Output.all(ray_node_config, auth).apply(
            lambda pair: {
                **group.labels,
                **stack_labels,
                LAUNCH_CONFIG: launch_config_hash(pair[0], pair[1]),
            }
        )
    )
