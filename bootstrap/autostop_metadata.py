"""The head's autostop entries: the settings (`ray-autostop`, from `provider.autostop`) and
the daemon itself (`ray-autostop-daemon`, bootstrap/autostop.py gzip+base64, decoded and
started by the head's startup script).

The settings are their own key, so changing `provider.autostop` is an in-place metadata
update the running daemon reads at its next check; no node is replaced or restarted."""

from __future__ import annotations

import base64
import functools
import gzip
import json
from pathlib import Path

from bootstrap.autostop import DAEMON_KEY, SETTINGS_KEY
from infra.config import ClusterConfig
from infra.labels import CLUSTER_NAME, NODE_KIND, ray_labels

DAEMON = Path(__file__).with_name("autostop.py")


def autostop_settings(config: ClusterConfig) -> dict:
    """What the daemon needs: where the cluster is, how to tell its nodes and head, and the
    YAML's setting (`idle_minutes` 0: off until `invoke autostop` turns it on)."""
    head = ray_labels(config.cluster_name, "head", config.head_node_type)
    autostop = config.provider.autostop
    return {
        "project": config.provider.project,
        "zone": config.provider.availability_zone,
        "cluster_labels": {CLUSTER_NAME: head[CLUSTER_NAME]},
        "head_labels": {CLUSTER_NAME: head[CLUSTER_NAME], NODE_KIND: head[NODE_KIND]},
        "tpu": config.has_tpu,
        "idle_minutes": autostop.idle_minutes if autostop else 0,
        "down": bool(autostop and autostop.down),
    }


@functools.cache
def daemon_payload() -> str:
    """The daemon's source, gzip (mtime 0, OS byte 255: the same bytes everywhere) + base64."""
    compressed = bytearray(gzip.compress(DAEMON.read_bytes(), compresslevel=9, mtime=0))
    compressed[9] = 255
    return base64.b64encode(bytes(compressed)).decode()


def autostop_entries(config: ClusterConfig) -> dict[str, str]:
    return {
        SETTINGS_KEY: json.dumps(autostop_settings(config), sort_keys=True),
        DAEMON_KEY: daemon_payload(),
    }
