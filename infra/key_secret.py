"""The head's copy of the cluster SSH key, kept in Secret Manager rather than in metadata.

Ray's autoscaler on the head SSHes into the workers it launches, so the head needs the private
key. Instance metadata is readable by anyone who may view the instance and by every process on
it; a secret readable only by the head's service account is not.
"""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp

from infra.component_options import waits_for
from model.config import ClusterConfig
from model.identities import SECRET_ACCESSOR, key_secret_id
from model.labels import CLUSTER_NAME, STACK

SECRET_MANAGER_API = "secretmanager.googleapis.com"


class BootstrapKeySecret(pulumi.ComponentResource):
    """A secret holding the private key, readable by the head's service account."""

    version_name: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        config: ClusterConfig,
        private_key: pulumi.Output[str],
        service_account_email: pulumi.Input[str],
        opts: pulumi.ResourceOptions | None = None,
        stack: str = "",
    ) -> None:
        super().__init__("ray-gcp:index:BootstrapKeySecret", name, None, opts)
        project = config.provider.project
        child = pulumi.ResourceOptions(parent=self)
        # Enabled once per project and left on: other clusters may rely on it.
        api = gcp.projects.Service(
            f"{name}-api",
            project=project,
            service=SECRET_MANAGER_API,
            disable_on_destroy=False,
            opts=pulumi.ResourceOptions(parent=self, depends_on=waits_for(opts)),
        )
        secret = gcp.secretmanager.Secret(
            name,
            project=project,
            secret_id=key_secret_id(config),
            replication={"auto": {}},
            labels={CLUSTER_NAME: config.cluster_name, **({STACK: stack} if stack else {})},
            opts=pulumi.ResourceOptions(parent=self, depends_on=[api]),
        )
        version = gcp.secretmanager.SecretVersion(
            f"{name}-version", secret=secret.id, secret_data=private_key, opts=child
        )
        gcp.secretmanager.SecretIamMember(
            f"{name}-accessor",
            project=project,
            secret_id=secret.secret_id,
            role=SECRET_ACCESSOR,
            member=pulumi.Output.concat("serviceAccount:", service_account_email),
            opts=child,
        )
        self.version_name = version.name
        self.register_outputs({"version_name": self.version_name})
