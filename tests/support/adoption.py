"""What the tests of `invoke adopt` share: a user with Ray's launcher and the tool, both at the
fake cloud (`ray_user`), a cluster Ray's own launcher made from a shipped YAML
(`made_by_ray`), the task run as the user runs it (`invoke`), and the engine's summaries a
task printed (`summaries`)."""

from __future__ import annotations

import copy
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from model.config import parse_cluster_config
from tests.fakes.compute import FakeComputeServer, Faults
from tests.support.engine_stack import PROJECT_ROOT, EngineWorkspace, require_engine
from tests.support.ray_launcher import RayMade, point_ray_at, ray_up
from tests.support.warm_python import run_module

USERS_OWN = ("PULUMI_BACKEND_URL", "PULUMI_CONFIG_PASSPHRASE", "PULUMI_CONFIG_PASSPHRASE_FILE")


def invoke(env: dict[str, str], *args: str, check: bool = True
           ) -> subprocess.CompletedProcess[str]:
    done = run_module(["invoke", *args], cwd=PROJECT_ROOT, env=env, timeout=900)
    if check:
        assert done.returncode == 0, f"invoke {' '.join(args)}:\n{done.stdout[-5000:]}" \
            f"{done.stderr[-3000:]}"
    return done


def summaries(said: str) -> list[str]:
    """Each engine run's `summary: ...` line (an up prints its refresh's, then its own)."""
    return re.findall(r"^summary: (.*) in [\d.]+s$", said, re.M)


def ray_user_at(home: Path, state: Path, monkeypatch: pytest.MonkeyPatch
                ) -> Iterator[tuple[dict[str, str], FakeComputeServer]]:
    """A user with Ray's launcher (its key goes to `home`/.ssh) and the tool, both at the fake
    cloud; the tool's state in `state`."""
    bin_dir = require_engine()
    home.mkdir(exist_ok=True)
    monkeypatch.setenv("HOME", str(home))
    with FakeComputeServer(Faults(operation_s=0.0)) as fake:
        point_ray_at(fake, monkeypatch)
        space = EngineWorkspace(fake, bin_dir, root=state.parent / "engine")
        env = {key: value for key, value in {**os.environ, **space.env}.items()
               if key not in USERS_OWN}
        env["RAY_GCP_STATE_DIR"] = str(state)
        yield env, fake


def shipped_yaml(shape: str, name: str | None = None) -> dict[str, Any]:
    """A shipped cluster YAML as the user wrote it (Ray's list-form `scheduling` and all),
    under a cluster name of the test's."""
    data = yaml.safe_load((PROJECT_ROOT / f"stacks/clusters/{shape}.yaml").read_text())
    data["cluster_name"] = name or f"adopt-{shape}"
    return data


def first_worker_type(data: dict[str, Any]) -> str:
    """The YAML's first worker type, Ray's defaults filled in (`minimal`: Ray's own)."""
    return next(iter(parse_cluster_config(copy.deepcopy(data)).worker_types))


def made_by_ray(fake: FakeComputeServer, folder: Path, data: dict[str, Any],
                demand: dict[str, int] | None = None) -> tuple[Path, RayMade]:
    """`ray up` of `data` (written to `folder`) by Ray's own launcher code; `demand`: workers
    per type the autoscaler launched beyond `min_workers` (default: one of the first worker
    type, as for pending work)."""
    provider = data["provider"]
    fake.cloud.catalogue.zones.setdefault(provider["region"], [provider["availability_zone"]])
    cluster_yaml = folder / f"{data['cluster_name']}.yaml"
    cluster_yaml.write_text(yaml.safe_dump(data))
    return cluster_yaml, ray_up(data, {first_worker_type(data): 1} if demand is None else demand)
