"""The cluster's Ray auth token: generated once per stack, kept in Secret Manager for the nodes.

Ray's token authentication (`RAY_AUTH_MODE=token`) makes every GCS, raylet and dashboard
client present one shared token. A StackSecret (infra.stack_secret) makes it once and state
keeps it (a secret output, encrypted); a token made in the program itself would change on every
run. Every node reads it at boot, as the head reads the SSH key (infra.key_secret), from a
secret only the nodes' service accounts may access (each by a grant on this secret alone): it
is never in instance metadata.
"""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp

from infra.component_options import waits_for
from infra.stack_secret import StackSecret
from model.config import ClusterConfig
from model.identities import SECRET_ACCESSOR, token_secret_id
from model.labels import CLUSTER_NAME, STACK

TOKEN_PURPOSE = "Ray auth token"


class RayTokenSecret(pulumi.ComponentResource):
    """The token, generated once, in a secret each of `readers` (service account emails) may
    access; `token` is a Pulumi secret and `version_name` the secret version nodes read.

    `version_name` is the secret's `latest` version, a name known at plan time: the worker
    bodies that carry it (a WorkerGroup's, the autoscaler's) stay known in a preview, where an
    output of a version yet to be created would make a WorkerGroup's whole body unknown and
    the preview show it replaced; the workers depend on this component instead.
    `version_reference` is the same name as an output of the version, for the head: the
    HeadNode component's depends_on does not reach its instance, the output's dependency
    does. Secret Manager's API is enabled by infra.key_secret.BootstrapKeySecret: pass it in
    `opts.depends_on`."""

    token: pulumi.Output[str]
    version_name: str
    version_reference: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        config: ClusterConfig,
        readers: list[pulumi.Input[str]],
        opts: pulumi.ResourceOptions | None = None,
        stack: str = "",
    ) -> None:
        super().__init__("ray-gcp:index:RayTokenSecret", name, None, opts)
        project = config.provider.project
        child = pulumi.ResourceOptions(parent=self)
        # The first ones wait for what the component waits for (the sweeper's claim, Secret
        # Manager's API): Pulumi does not pass a component's depends_on to its children.
        first = pulumi.ResourceOptions(parent=self, depends_on=waits_for(opts))
        generated = StackSecret(f"{name}-value", TOKEN_PURPOSE, first)
        self.token = pulumi.Output.secret(generated.value)
        secret_id = token_secret_id(config)
        secret = gcp.secretmanager.Secret(
            name,
            project=project,
            secret_id=secret_id,
            replication={"auto": {}},
            labels={CLUSTER_NAME: config.cluster_name, **({STACK: stack} if stack else {})},
            opts=first,
        )
        version = gcp.secretmanager.SecretVersion(
            f"{name}-version", secret=secret.id, secret_data=self.token, opts=child
        )
        for index, reader in enumerate(readers):
            gcp.secretmanager.SecretIamMember(
                f"{name}-accessor" if index == 0 else f"{name}-accessor-{index}",
                project=project,
                secret_id=secret.secret_id,
                role=SECRET_ACCESSOR,
                member=pulumi.Output.concat("serviceAccount:", reader),
                opts=child,
            )
        self.version_name = f"projects/{project}/secrets/{secret_id}/versions/latest"
        self.version_reference = version.name.apply(lambda _: self.version_name)
        self.register_outputs({"version_name": self.version_name})
