"""Pulumi type tokens `ops` recognises in plans, engine events and exported state.

One place for them: the offline review, the progress of `invoke up` and `invoke down
--workers-only` all sort resources by these tokens (the dynamic resources' own tokens live in
infra.dynamic_types, beside the resources).
"""

from __future__ import annotations

INSTANCE_TYPE = "gcp:compute/instance:Instance"
TPU_VM_TYPE = "gcp:tpu/v2Vm:V2Vm"
BUCKET_OBJECT_TYPE = "gcp:storage/bucketObject:BucketObject"
"""The cluster bucket's objects: the file_mounts archive and the head's autoscaler config."""
