"""ClusterBucket: the cluster's private bucket for what nodes fetch at boot and on re-apply.

It holds the file_mounts archive (bootstrap/file_mounts.py) and the head's autoscaler config,
neither of which belongs in instance metadata (anyone who may view an instance reads its
metadata, and GCE caps one value at 256 KB). Uniform bucket-level access and enforced public
access prevention leave IAM as the only way in: each account a node runs as (the head's, the
cluster's worker account, any a node_config names) may read objects of this bucket alone
(roles/storage.objectViewer on the bucket), nothing more. Each object is named after its
content's hash, so a change is one new object and the old one goes once the nodes name the new;
the archive's hash is keyed with the stack's secret (bootstrap/file_mounts.py), the autoscaler
config's is plain (it holds no secret).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pulumi
import pulumi_gcp as gcp

from bootstrap.file_mounts import FileMountArchive
from infra.component_options import waits_for
from model.config import ClusterConfig
from model.identities import OBJECT_VIEWER, bucket_name
from model.labels import CLUSTER_NAME, STACK
from model.stack_config import state_base

CONFIG_PREFIX = "autoscaler/"


class ClusterBucket(pulumi.ComponentResource):
    """The bucket, its readers, and the file_mounts archive when the YAML has mounts."""

    def __init__(
        self,
        name: str,
        config: ClusterConfig,
        readers: list[pulumi.Input[str]],
        mounts: pulumi.Output[FileMountArchive] | None,
        opts: pulumi.ResourceOptions | None = None,
        stack: str = "",
    ) -> None:
        """`stack` is the stack's identity (model.labels.stack_identity), on the bucket."""
        super().__init__("ray-gcp:index:ClusterBucket", name, None, opts)
        self._name = name
        child = pulumi.ResourceOptions(parent=self)
        self.bucket = gcp.storage.Bucket(
            name,
            name=bucket_name(config),
            project=config.provider.project,
            location=config.provider.region.upper(),
            uniform_bucket_level_access=True,
            public_access_prevention="enforced",
            # It holds only what the program put there: `down` takes it with its objects.
            force_destroy=True,
            labels={CLUSTER_NAME: config.cluster_name, **({STACK: stack} if stack else {})},
            opts=pulumi.ResourceOptions(parent=self, depends_on=waits_for(opts)),
        )
        self.name = self.bucket.name
        self.readers = [
            gcp.storage.BucketIAMMember(
                f"{name}-reader-{index}",
                bucket=self.bucket.name,
                role=OBJECT_VIEWER,
                member=pulumi.Output.from_input(email).apply(
                    lambda address: f"serviceAccount:{address}"
                ),
                opts=child,
            )
            for index, email in enumerate(readers)
        ]
        self.file_mounts: gcp.storage.BucketObject | None = None
        if mounts is not None:
            # Named and hashed under the stack's key: neither says anything of the content.
            self.file_mounts = gcp.storage.BucketObject(
                f"{name}-file-mounts",
                bucket=self.bucket.name,
                name=pulumi.Output.unsecret(mounts.apply(lambda archive: archive.object_name)),
                source=pulumi.Output.unsecret(
                    mounts.apply(lambda archive: pulumi.FileAsset(str(stored_archive(archive))))
                ),
                content_type="application/gzip",
                opts=child,
            )
        self.register_outputs({"name": self.name})

    def autoscaler_config(self, text: pulumi.Output[str]) -> pulumi.Output[str]:
        """Store the head's autoscaler config; its `gs://` reference, known once the object
        exists (so the head that reads it is created or updated after it). The config is no
        secret (the key is in Secret Manager): previews show it as text."""
        digest = text.apply(lambda value: hashlib.sha256(value.encode()).hexdigest())
        stored = gcp.storage.BucketObject(
            f"{self._name}-autoscaler-config",
            bucket=self.bucket.name,
            name=digest.apply(lambda value: f"{CONFIG_PREFIX}{value}.yaml"),
            source=text.apply(pulumi.StringAsset),
            content_type="application/yaml",
            opts=pulumi.ResourceOptions(parent=self),
        )
        return pulumi.Output.all(stored.bucket, stored.name).apply(
            lambda parts: f"gs://{parts[0]}/{parts[1]}"
        )

    @property
    def dependencies(self) -> list[pulumi.Resource]:
        """What a node needs before it boots: its grant to read, and the archive."""
        return [*self.readers, *([self.file_mounts] if self.file_mounts else [])]


def stored_archive(mounts: FileMountArchive) -> Path:
    """The archive as a file in `.ray-gcp/file-mounts/<stack>/` (or under $RAY_GCP_STATE_DIR),
    where the engine reads the asset it uploads; the stack's older archives there are removed."""
    path = mounts.write(state_base() / "file-mounts" / pulumi.get_stack())
    for old in path.parent.glob("*.tar.gz"):
        if old != path:
            old.unlink(missing_ok=True)
    return path
