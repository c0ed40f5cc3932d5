"""The head's autostop entries: the settings (`ray-autostop`, from `provider.autostop`) and
the daemon itself (`ray-autostop-daemon`: a zip of bootstrap/autostop.py and the head
provider's package, whose standard-library modules it imports, base64; the head's startup script
decodes it and runs it with `python3`).

The settings are their own key, so changing `provider.autostop` is an in-place metadata
update the running daemon reads at its next check; no node is replaced or restarted."""

from __future__ import annotations

import base64
import functools
import io
import json
import zipfile
from pathlib import Path

from bootstrap.autostop import DAEMON_KEY, SETTINGS_KEY
from model.config import ClusterConfig
from model.config.node_config import ComputeNodeConfig
from model.labels import CLUSTER_NAME, NODE_KIND, ray_labels

# The zip's files: the daemon at its top (`python3 daemon.pyz` runs __main__.py), and the head
# provider's package, whose standard-library modules it imports, under a `bootstrap` package of
# its own (the real one's __init__ imports the config model).
HERE = Path(__file__).parent
DAEMON_FILES = {
    "autostop.py": HERE / "autostop.py",
    **{f"bootstrap/head_provider/{path.name}": path
       for path in sorted((HERE / "head_provider").glob("*.py"))},
}
DAEMON_TEXTS = {
    "__main__.py": "import sys\n\nfrom autostop import main\n\nsys.exit(main())\n",
    "bootstrap/__init__.py": '"""The head daemon\'s part of bootstrap: modules of the head '
                             'provider\'s it imports."""\n',
}


def has_time_limits(config: ClusterConfig) -> bool:
    """Some node of the cluster may have an end GCE keeps (a flex-start rung, or a node_config
    with maxRunDuration or terminationTime): the daemon then follows the ends."""
    rungs = [rung for policy in (config.provider.capacity or {}).values()
             for rung in policy.ladder or []]
    schedulings = [node_type.node_config.scheduling
                   for node_type in config.available_node_types.values()
                   if isinstance(node_type.node_config, ComputeNodeConfig)]
    return any(rung.market == "flex-start" for rung in rungs) or any(
        s.max_run_duration is not None or s.termination_time or s.provisioning_model ==
        "FLEX_START" for s in schedulings)


def autostop_settings(config: ClusterConfig) -> dict:
    """What the daemon needs: where the cluster is, how to tell its nodes and head, and the
    YAML's setting (`idle_minutes` 0: off until `invoke autostop` turns it on); `ends` when
    some node may have an end (has_time_limits: absent otherwise, so other clusters' metadata
    stays as it was)."""
    head = ray_labels(config.cluster_name, "head", config.head_node_type)
    autostop = config.provider.autostop
    ends = {"ends": True} if has_time_limits(config) else {}
    return {**ends,
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
    """The daemon as a zip Python runs (fixed dates and modes: the same bytes everywhere),
    base64."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        for name, text in (*((name, text.encode()) for name, text in DAEMON_TEXTS.items()),
                           *((name, path.read_bytes()) for name, path in DAEMON_FILES.items())):
            entry = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            entry.external_attr = 0o644 << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(entry, text)
    return base64.b64encode(buffer.getvalue()).decode()


def autostop_entries(config: ClusterConfig) -> dict[str, str]:
    return {
        SETTINGS_KEY: json.dumps(autostop_settings(config), sort_keys=True),
        DAEMON_KEY: daemon_payload(),
    }
