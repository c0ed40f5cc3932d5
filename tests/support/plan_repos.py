"""Project folders for the plan and diff tests: a stack (its cluster YAML and its
`stacks/Pulumi.<stack>.yaml`) written into a folder, committed to a git repository there, and
the cluster YAML the diff scenarios edit (`BASE_YAML`); a plan made in the test's process as
the plan's interpreter prints it (`as_printed`)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import yaml

from model.stack_config import PROJECT_ROOT
from ops.review.plan import Plan, render_json

BASE_YAML = yaml.safe_load((PROJECT_ROOT / "stacks/clusters/full.yaml").read_text())
# In us-west1-c, which offers the TPU the TPU scenarios add (v5e; us-west1-a offers no TPU).
BASE_YAML["provider"]["availability_zone"] = "us-west1-c"


def write_stack(root: Path, stack: str, cluster: dict[str, Any]) -> None:
    (root / "stacks/clusters").mkdir(parents=True, exist_ok=True)
    (root / f"stacks/clusters/{stack}.yaml").write_text(yaml.safe_dump(cluster))
    (root / f"stacks/Pulumi.{stack}.yaml").write_text(
        yaml.safe_dump({"config": {"ray-gcp:cluster": f"stacks/clusters/{stack}.yaml"}})
    )


def git_commit_all(root: Path, message: str) -> None:
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    if not (root / ".git").exists():
        subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", message], check=True)


def as_printed(plan: Plan) -> Plan:
    """A plan `plan_stack` or `plan_yaml` made in this process, as `python -m ops.review.plan`
    prints it (`render_json`) and `invoke diff` or `invoke up`'s checks read it back."""
    return json.loads(render_json(plan))
