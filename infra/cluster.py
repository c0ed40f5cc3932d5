"""RayCluster: the component other Pulumi programs use, and this program's top. Wires service
account, SSH key, Ray auth token, network, bucket, head, worker groups and TPU slices from a Ray
cluster YAML; registers what other programs read (its outputs below, and the stack outputs
infra/program.py exports from them)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_gcp as gcp

from bootstrap.autoscaler_config import autoscaler_config
from bootstrap.file_mounts import FileMountArchive, PackedMounts
from infra.bucket import ClusterBucket
from infra.cluster_args import ClusterConfigError, RayClusterArgs, prepare_cluster
from infra.iam import ClusterServiceAccount, OsLoginGrants, WorkerServiceAccount
from infra.key_secret import BootstrapKeySecret
from infra.metadata import (
    BOOTSTRAP_CONFIG_KEY,
    BOOTSTRAP_SSH_KEY_SECRET_KEY,
    HEAD_ADDRESS_KEY,
    PINNED_METADATA,
    RAY_AUTH_TOKEN_SECRET_KEY,
    REAPPLY_ENV,
    merge_metadata,
    pinned_body,
    with_worker_request,
)
from infra.network import ClusterNetwork, GivenNetwork
from infra.node_resources import HeadNode, NodeInputs
from infra.nodes import node_body
from infra.ray_token import RayTokenSecret
from infra.ssh_keys import ClusterSshKey
from infra.stack_secret import ARCHIVE_KEY_PURPOSE, StackSecret
from infra.tpu_slices import TpuSlices
from infra.workers import ClusterSweeper, ClusterSweeperArgs, WorkerGroup, WorkerGroupArgs
from model.adoption import Adoption, read_adoption
from model.config import ClusterConfig, ConfigError
from model.labels import LAUNCH_CONFIG, STACK, launch_config_hash, stack_identity
from model.plan import ClusterPlan, NodeGroupPlan
from model.yaml_text import dump_yaml

__all__ = ["RayCluster", "RayClusterArgs"]

# host:port of an emulator (the tests' fake cloud) that the dynamic providers call instead of
# Google's APIs, over plain http; `invoke kill-random-node --hard` reads the same variable.
API_ENDPOINT_ENV = "RAY_GCP_API_ENDPOINT"
DASHBOARD_URL = "http://localhost:8265 (after `invoke attach -p 8265`)"


@dataclass(frozen=True)
class ClusterInputs:
    """What a cluster is built from once its config is checked (`cluster_inputs`): its node
    plan, and what the environment hands down."""

    plan: ClusterPlan
    # The credentials the worker groups and the sweeper call Google APIs with (the gcp
    # provider's own), else None for application default credentials.
    credentials: pulumi.Output[str] | None = None
    # `invoke up --restart-only` and friends: a new value re-applies every node's setup.
    reapply_request: str = ""
    # A Compute API root other than Google's (the fake cloud of the tests).
    api_endpoint: str | None = None
    # The packed file_mounts, named here with the stack's secret key.
    mounts: PackedMounts | None = None
    # The stack's identity (model.labels.stack_identity), on every node.
    stack: str = ""
    # What a cluster `ray up` made gives the stack (model/adoption.py).
    adoption: Adoption | None = None
    # An existing network the cluster joins (RayClusterArgs.network/subnetwork).
    given_network: GivenNetwork | None = None

    @property
    def config(self) -> ClusterConfig:
        return self.plan.config

    @property
    def head_name(self) -> str:
        """An adopted head keeps its name (a name is fixed for an instance's life)."""
        return self.adoption.head if self.adoption else self.plan.head.instance_name

    @property
    def stack_labels(self) -> dict[str, str]:
        return {STACK: self.stack} if self.stack else {}


@dataclass(frozen=True)
class _TokenMetadata:
    """How nodes name the Ray auth token's secret version, and what they wait for."""

    workers: dict[str, pulumi.Input[str]] = field(default_factory=dict)
    head: dict[str, pulumi.Input[str]] = field(default_factory=dict)
    dependencies: tuple[pulumi.Resource, ...] = ()


class RayCluster(pulumi.ComponentResource):
    """A Ray cluster on GCP from a Ray cluster YAML:
    `RayCluster("ml", RayClusterArgs(config="cluster.yaml"), opts)`.

    Outputs (attributes, registered): `head_name`, `head_internal_ip`, `head_external_ip`,
    `bucket_name`, `network_name`, `subnetwork`, `service_account_email` (the autoscaler's, the
    head's unless its node_config names one), `worker_service_account_email`,
    `dashboard_url`. Every resource is its child; `opts.providers` may name the gcp provider
    (with the YAML's `provider.gcp_credentials`, the worker groups call Google as the same
    identity). A bad config raises ClusterConfigError: one message naming the file.

    Built in named steps, in the order the resources register: the sweeper, the accounts,
    SSH key, network and key secret, the Ray auth token, the file_mounts key, the bucket, then
    the head and the worker groups from the same node bodies."""

    def __init__(
        self, name: str, args: RayClusterArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("ray-gcp:index:RayCluster", name, None, opts)
        self._name, self._args = name, cluster_inputs(args)
        inputs = self._args
        # SPEC 2.1: fail early, at preview, when the project does not exist.
        self.project_number = gcp.organizations.get_project_output(
            project_id=inputs.plan.project, opts=pulumi.InvokeOptions(parent=self)
        ).number
        self._add_sweeper()
        child = pulumi.ResourceOptions(parent=self, depends_on=[self.sweeper])
        node_accounts = self._add_accounts(child)
        self.ssh_key = ClusterSshKey(f"{name}-ssh-key", inputs.config, child)
        self.network = ClusterNetwork(f"{name}-network", inputs.plan, child,
                                      given=inputs.given_network)
        self.key_secret = BootstrapKeySecret(
            f"ray-{inputs.config.cluster_name}-ssh-key",
            inputs.config,
            self.ssh_key.private_key,
            self._head_email(),
            child,
            stack=inputs.stack,
        )
        token = self._add_ray_token(node_accounts)
        self._add_file_mounts(child)
        # What nodes fetch with their own service account: file_mounts, the head's config.
        self.bucket = ClusterBucket(
            f"ray-{inputs.config.cluster_name}-bucket",
            inputs.config,
            node_accounts,
            self.file_mounts,
            child,
            stack=inputs.stack,
        )
        bodies, auth = self._node_bodies(token), self._auth()
        self._add_head(bodies, auth, token)
        self._add_workers(bodies, auth, token)
        self._register_outputs()

    def _register_outputs(self) -> None:
        """What another program reads from the component (the stack exports the same)."""
        self.head_name = pulumi.Output.from_input(self._args.head_name)
        self.head_internal_ip = self.head.internal_ip
        self.head_external_ip = self.head.external_ip
        self.bucket_name = self.bucket.name
        self.network_name = self.network.network
        self.subnetwork = self.network.subnetwork
        self.service_account_email = self.service_account.email
        self.worker_service_account_email = self.worker_account.email
        self.dashboard_url = pulumi.Output.from_input(DASHBOARD_URL)
        self.register_outputs({
            "head_name": self.head_name, "head_internal_ip": self.head_internal_ip,
            "head_external_ip": self.head_external_ip, "bucket_name": self.bucket_name,
            "network": self.network_name, "subnetwork": self.subnetwork,
            "service_account_email": self.service_account_email,
            "worker_service_account_email": self.worker_service_account_email,
            "dashboard_url": self.dashboard_url,
        })

    def _add_sweeper(self) -> None:
        """Created first, so destroyed last: it deletes every node still labelled with the
        cluster and the stack (the autoscaler's own, leftovers of a half-failed up) once the
        rest is gone. Its create claims the cluster name: everything else waits for it."""
        args, name = self._args, self._name
        self.sweeper = ClusterSweeper(
            sweeper_name(name),
            ClusterSweeperArgs(
                project=args.plan.project,
                zone=args.plan.zone,
                cluster_name=args.config.cluster_name,
                has_tpu=args.config.has_tpu,
                credentials=args.credentials,
                api_endpoint=args.api_endpoint,
                stack=args.stack or None,
                adopted=args.adoption.names if args.adoption else None,
            ),
            opts=pulumi.ResourceOptions(parent=self, aliases=_sweeper_aliases(name, args.plan)),
        )

    def _add_accounts(self, child: pulumi.ResourceOptions) -> list[pulumi.Input[str]]:
        """Who each node runs as (model.identities): the head as Ray's autoscaler account
        unless its node_config names one, workers as the cluster's own account unless theirs
        does; with OS Login, the grants that let you log in. Every account a node runs as."""
        args, name, config = self._args, self._name, self._args.config
        self.service_account = ClusterServiceAccount(f"{name}-service-account", config, child,
                                                     args.adoption)
        self.worker_account = WorkerServiceAccount(
            f"ray-{config.cluster_name}-worker", args.plan, self._head_email(), child)
        if config.provider.os_login:
            self.os_login = OsLoginGrants(
                f"{name}-os-login", args.plan,
                depends_on=[self.service_account, self.worker_account], opts=child
            )
        return _node_accounts(args.plan, {
            config.autoscaler_service_account_email: self.service_account.email,
            args.plan.worker_account_email: self.worker_account.email,
        })

    def _add_ray_token(self, node_accounts: list[pulumi.Input[str]]) -> _TokenMetadata:
        """Every node reads the Ray auth token with its own service account, as the head reads
        the key, and nothing else's; off when the YAML says `provider.ray_token_auth: false`."""
        config = self._args.config
        self.ray_token: RayTokenSecret | None = None
        if not config.provider.ray_token_auth:
            return _TokenMetadata()
        self.ray_token = RayTokenSecret(
            f"ray-{config.cluster_name}-auth-token",
            config,
            node_accounts,
            pulumi.ResourceOptions(parent=self, depends_on=[self.sweeper, self.key_secret]),
            stack=self._args.stack,
        )
        # Workers name the version as plain text (a preview keeps their bodies known) and
        # wait for it through depends_on; the head, whose component's depends_on does not
        # reach its instance, waits through the output.
        return _TokenMetadata(
            workers={RAY_AUTH_TOKEN_SECRET_KEY: self.ray_token.version_name},
            head={RAY_AUTH_TOKEN_SECRET_KEY: self.ray_token.version_reference},
            dependencies=(self.ray_token,),
        )

    def _add_file_mounts(self, child: pulumi.ResourceOptions) -> None:
        """The archive's name is an HMAC under a key only this stack's state holds, so the name
        (in public metadata and previews) cannot be checked against guesses of a secret file.
        A cluster without file_mounts has no key: its stack gains no resource."""
        mounts = self._args.mounts
        self.file_mounts: pulumi.Output[FileMountArchive] | None = None
        if mounts is not None:
            key = StackSecret(f"{self._name}-file-mounts-key", ARCHIVE_KEY_PURPOSE, child)
            self.file_mounts = key.value.apply(mounts.keyed)

    def _node_bodies(self, token: _TokenMetadata) -> dict[str, pulumi.Output[dict[str, Any]]]:
        """Every node type in the worker role: what Ray's autoscaler launches from the head's
        bootstrap config, and exactly what our worker groups create. Each boots itself from
        its startup script."""
        args = self._args
        return {
            node_type: _body(
                args.config, group, self.network, self.ssh_key,
                {HEAD_ADDRESS_KEY: args.head_name, **token.workers},
                self.file_mounts, args.stack_labels,
            )
            for node_type, group in args.plan.node_types.items()
        }

    def _auth(self) -> pulumi.Output[dict[str, str]]:
        """Ray's `auth` section as the head's autoscaler sees it (its launch hash covers it)."""
        user = self._args.config.auth.ssh_user
        return pulumi.Output.all(self.ssh_key.private_key).apply(
            lambda key: {"ssh_user": user, "ssh_private_key": key[0]}
        )

    def _add_head(self, bodies: dict[str, pulumi.Output[dict[str, Any]]],
                  auth: pulumi.Output[dict[str, str]], token: _TokenMetadata) -> None:
        args = self._args
        plan, config = args.plan, args.config
        # The head's autoscaler counts the worker groups' nodes towards each type's minimum.
        worker_counts = {group.node_type: group.count for group in plan.workers}
        bootstrap_yaml = pulumi.Output.all(**bodies).apply(
            lambda all_bodies: dump_yaml(autoscaler_config(config, all_bodies, worker_counts))
        )
        self.head = HeadNode(
            f"{self._name}-head",
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
                        **token.head,
                    },
                    self.file_mounts,
                    request=args.reapply_request,
                ),
                labels=_labels(plan.head, bodies[plan.head.node_type], auth, args.stack_labels),
            ),
            instance_name=args.head_name,
            imported=args.adoption is not None,
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=[self.sweeper, self.service_account, self.worker_account,
                            self.network, self.key_secret, *token.dependencies,
                            *self.bucket.dependencies],
            ),
        )

    def _add_workers(self, bodies: dict[str, pulumi.Output[dict[str, Any]]],
                     auth: pulumi.Output[dict[str, str]], token: _TokenMetadata) -> None:
        """A WorkerGroup per compute worker type, a TpuSlices per TPU one, after the head."""
        args = self._args
        plan, request = args.plan, args.reapply_request
        after_head: list[pulumi.Resource] = [self.sweeper, self.head, self.worker_account,
                                             *self.bucket.dependencies, *token.dependencies]
        self.worker_groups: dict[str, WorkerGroup | TpuSlices] = {}
        for group in plan.workers:
            body = bodies[group.node_type]
            labels = _labels(group, body, auth, args.stack_labels)
            opts = pulumi.ResourceOptions(parent=self, depends_on=after_head)
            if group.kind == "tpu":
                # Each slice Pulumi keeps is a V2Vm of its own, shown and validated by Pulumi.
                self.worker_groups[group.node_type] = TpuSlices(
                    f"{self._name}-{group.node_type}",
                    plan,
                    group,
                    NodeInputs(
                        body=body,
                        metadata=merge_metadata(
                            args.config, group, self.ssh_key.public_key,
                            {HEAD_ADDRESS_KEY: args.head_name, **token.workers,
                             **PINNED_METADATA},
                            self.file_mounts,
                        ),
                        labels=labels,
                    ),
                    depends_on=after_head,
                    opts=opts,
                    credentials=args.credentials,
                    api_endpoint=args.api_endpoint,
                )
            else:
                self.worker_groups[group.node_type] = _worker_group(
                    f"{self._name}-{group.node_type}",
                    plan,
                    group,
                    body.apply(lambda b: with_worker_request(pinned_body(b), request)),
                    labels,
                    args.credentials,
                    opts,
                    args.api_endpoint,
                    args.adoption.of_type(group.node_type) if args.adoption else None,
                )

    def _head_email(self) -> pulumi.Input[str]:
        """The head's account: the autoscaler account's output (a grant to it waits for it),
        or the one its node_config names."""
        if self._args.plan.head.account_from_node_config:
            return self._args.plan.head.service_account_email
        return self.service_account.email


def cluster_inputs(args: RayClusterArgs) -> ClusterInputs:
    """The config checked and planned (a ClusterConfigError otherwise), and what the
    environment hands down: the YAML's credentials, a re-apply request, the API endpoint."""
    prepared = prepare_cluster(args)
    credentials = prepared.config.provider.gcp_credentials
    return ClusterInputs(
        prepared.plan,
        # Either type (service-account JSON or OAuth token): the worker groups and the sweeper
        # call Google APIs as the same identity as the gcp provider, never ADC behind its back.
        credentials=(pulumi.Output.secret(credentials.credentials.get_secret_value())
                     if credentials is not None else None),
        reapply_request=os.environ.get(REAPPLY_ENV, ""),
        api_endpoint=os.environ.get(API_ENDPOINT_ENV) or None,
        mounts=prepared.mounts,
        stack=args.stack or stack_identity(pulumi.get_organization(), pulumi.get_project(),
                                           pulumi.get_stack()),
        adoption=_adoption(args),
        given_network=(GivenNetwork(args.network, args.subnetwork)
                       if args.network is not None or args.subnetwork is not None else None),
    )


def _adoption(args: RayClusterArgs) -> Adoption | None:
    try:
        return read_adoption(args.adopt)
    except ConfigError as error:
        raise ClusterConfigError(error) from None


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
    adopt: dict[str, list[str]] | None = None,
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
            adopt=adopt,
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
