"""What runs on a node: the startup script that makes a GCE instance or TPU VM a Ray head or
worker, the head's autoscaler config, and a local two-node cluster built from the same
scripts."""

from bootstrap.autoscaler_config import autoscaler_config
from bootstrap.file_mounts import FileMountPlan, plan_file_mounts
from bootstrap.node_metadata import node_metadata
from bootstrap.startup_script import render_startup_script

__all__ = [
    "FileMountPlan",
    "autoscaler_config",
    "node_metadata",
    "plan_file_mounts",
    "render_startup_script",
]
