"""The real pulumi engine, hermetic: a file backend and PULUMI_HOME in a temp folder, the
stacks' secrets under a key of the fake Vault (tests/fakes/vault.py: `hashivault://`, which the
product's RAY_GCP_SECRETS_PROVIDER names too; a passphrase would cost every CLI run a 0.16 CPU-s
key derivation, and the tests of passphrase stacks ask for one), no update checks or plugin
downloads, the stand-in gcp plugin
(tests/fakes/standin_gcp) found on PATH as an ambient plugin, and the program's dynamic providers
pointed at the fake cloud (RAY_GCP_API_ENDPOINT).

The engine is the one `invoke engine` installs (`~/.cache/ray-gcp-pulumi/engine/<version>/
bin`, or RAY_GCP_ENGINE_BIN). Without it, engine tests skip, and fail under CI=true.
Operations run through tests/support/engine_driver.py, each in a fresh interpreter.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.fakes.compute import FakeComputeServer, Faults
from tests.fakes.vault import shared_vault
from tests.support.warm_python import run_module, socket_env, warm_engine_root

ENGINE_VERSION = "3.276.0"
ENGINE_BIN_ENV = "RAY_GCP_ENGINE_BIN"
PROJECT_ROOT = Path(__file__).resolve().parents[2]
STANDIN_DIR = Path(__file__).parents[1] / "fakes" / "standin_gcp"
PASSPHRASE = "engine-tests-passphrase"
SECRETS_PROVIDER = "hashivault://ray-gcp-tests"
OPERATION_TIMEOUT_S = 900


def installed_engine_bin() -> Path | None:
    """The installed engine's bin folder, if there is one."""
    given = os.environ.get(ENGINE_BIN_ENV)
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    folder = Path(given) if given else cache / "ray-gcp-pulumi" / "engine" / ENGINE_VERSION / "bin"
    return folder if (folder / "pulumi").is_file() else None


def require_engine() -> Path:
    """The engine's bin folder; a skip when it is missing, a failure under CI."""
    found = installed_engine_bin()
    if found is None:
        message = (f"the pulumi engine v{ENGINE_VERSION} is not installed: run `invoke engine` "
                   f"(or set {ENGINE_BIN_ENV})")
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return found


def endpoint_env(fake: FakeComputeServer) -> dict[str, str]:
    """The gcp provider's per-API endpoints (the Terraform provider's environment variables,
    which default and explicit providers alike read), all at the fake."""
    base = f"http://{fake.endpoint}"
    return {"GOOGLE_COMPUTE_CUSTOM_ENDPOINT": f"{base}/compute/v1/",
            "GOOGLE_TPU_V2_CUSTOM_ENDPOINT": f"{base}/v2/",
            **{f"GOOGLE_{api}_CUSTOM_ENDPOINT": f"{base}/v1/"
               for api in ("IAM", "RESOURCE_MANAGER", "SERVICE_USAGE", "SECRET_MANAGER")},
            "GOOGLE_STORAGE_CUSTOM_ENDPOINT": f"{base}/storage/v1/",
            "GOOGLE_OAUTH_ACCESS_TOKEN": fake.user_token()}  # the user's own


def repo_stack_config(stack: str) -> dict[str, Any]:
    """`stacks/Pulumi.<stack>.yaml`'s config, as the repo has it."""
    text = (PROJECT_ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text()
    return dict((yaml.safe_load(text) or {}).get("config") or {})


def repo_stacks() -> list[str]:
    return sorted(p.name[len("Pulumi."):-len(".yaml")]
                  for p in (PROJECT_ROOT / "stacks").glob("Pulumi.*.yaml"))


@dataclass
class EngineRun:
    steps: list[dict[str, Any]]
    summary: dict[str, int]
    outputs: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    def operations(self) -> dict[str, str]:
        """URN -> what happens to it: add, remove, replace or update (same/read left out)."""
        found: dict[str, str] = {}
        for step in self.steps:
            op = {"create": "add", "delete": "remove", "update": "update",
                  "replace": "replace", "create-replacement": "replace",
                  "delete-replaced": "replace"}.get(step["op"])
            if op is not None:
                found[step["urn"]] = op
        return found


class EngineWorkspace:
    """One temp folder: backend, PULUMI_HOME and a project whose stacks point at the fake."""

    def __init__(self, fake: FakeComputeServer, bin_dir: Path, root: Path | None = None,
                 extra_env: dict[str, str] | None = None,
                 secrets_provider: str | None = SECRETS_PROVIDER) -> None:
        """`secrets_provider`: what the stacks it creates keep their secrets under (None:
        pulumi's default, the passphrase)."""
        self.fake = fake
        self.root = root or Path(tempfile.mkdtemp(prefix="engine-"))
        self.project = self.root / "project"
        self.project.mkdir(parents=True, exist_ok=True)
        (self.root / "state").mkdir(exist_ok=True)
        runtime: dict[str, Any] = {"name": "python"}
        venv = Path(sys.prefix)
        if (venv / "bin" / "python").is_file() and sys.prefix != sys.base_prefix:
            # The engine runs the dynamic providers' plugin with this virtualenv's python.
            runtime["options"] = {"virtualenv": str(venv)}
        (self.project / "Pulumi.yaml").write_text(yaml.safe_dump(
            {"name": "ray-gcp", "runtime": runtime}))
        # The engine with its dynamic-provider plugin run warm, for the CLI a test runs and the
        # `invoke` tasks' runs alike (warm_engine_root); the installed one when runs start cold.
        warm = warm_engine_root(bin_dir)
        engine_root = warm or bin_dir.parent
        self.env = {
            "PULUMI_HOME": str(self.root / "home"),
            "PULUMI_BACKEND_URL": f"file://{self.root / 'state'}",
            "PULUMI_CONFIG_PASSPHRASE": PASSPHRASE,
            **({"RAY_GCP_SECRETS_PROVIDER": secrets_provider, **shared_vault().env()}
               if secrets_provider else {}),
            "PULUMI_SKIP_UPDATE_CHECK": "true",
            "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
            # Ambient plugins: the stand-in gcp first, then the engine's own plugin scripts.
            "PATH": os.pathsep.join([str(STANDIN_DIR), str(engine_root / "bin"),
                                     str(Path(sys.executable).parent), os.environ["PATH"]]),
            # ops.engine.engine_root(), the install the `invoke` tasks drive, is that one.
            **({"XDG_CACHE_HOME": str(warm.parents[2])} if warm else {}),
            "PULUMI_PYTHON_CMD": sys.executable,
            "STANDIN_GCP_PYTHON": sys.executable,
            "RAY_GCP_API_ENDPOINT": fake.endpoint,
            **endpoint_env(fake),
            "ENGINE_ROOT": str(engine_root),  # PulumiCommand runs its bin/pulumi
            # No outputs keeper outliving a task (tests/engine/test_engine_kept_outputs.py turns it
            # on
            # and stops it).
            "RAY_GCP_SSH_PERSIST": "0",
            # `invoke up` asks the head whether Ray is up once, without waiting: the fake's
            # nodes run no bootstrap (tests/ops/lifecycle/test_up_summary.py waits for one that
            # reports).
            "RAY_GCP_UP_WAIT_S": "0",
            # The language host double forks the program from this worker's warm interpreter.
            **socket_env(),
            **(extra_env or {}),
        }
        (self.root / "env.json").write_text(json.dumps(self.env))

    def init_options(self) -> list[str]:
        """`pulumi stack init`'s options for a stack of this workspace."""
        provider = self.env.get("RAY_GCP_SECRETS_PROVIDER")
        return ["--secrets-provider", provider] if provider else []

    def write_stack(self, stack: str, config: dict[str, Any]) -> None:
        """The stack's settings file (its secrets provider's settings kept once the engine set
        them: the encryption salt, or the provider and its encrypted key)."""
        path = self.project / f"Pulumi.{stack}.yaml"
        kept = yaml.safe_load(path.read_text()) if path.exists() else {}
        keys = {key: kept[key] for key in ("encryptionsalt", "secretsprovider", "encryptedkey")
                if key in kept}
        path.write_text(yaml.safe_dump({**keys, "config": config}))

    def run(self, stack: str, operation: str, program: Path | None = None) -> EngineRun:
        """One operation through tests/support/engine_driver.py (`program`: another program
        file)."""
        began = time.monotonic()
        process = run_module(
            ["tests.support.engine_driver", str(self.root), stack, operation,
             *([str(program)] if program else [])],
            cwd=PROJECT_ROOT, timeout=OPERATION_TIMEOUT_S, env={**os.environ, **self.env})
        if process.returncode != 0:
            raise AssertionError(f"pulumi {operation} of {stack} failed:\n"
                                 f"{process.stderr[-6000:]}\n{process.stdout[-3000:]}")
        answer = json.loads(process.stdout.strip().splitlines()[-1])
        return EngineRun(answer.get("steps", []), answer.get("summary") or {},
                         answer.get("outputs") or {},
                         time.monotonic() - began)

    def export(self, stack: str) -> dict[str, Any]:
        """`pulumi stack export` as a user runs it (secrets stay ciphertext): the deployment.
        (The Automation API's export_stack adds --show-secrets.)"""
        process = subprocess.run(
            [str(Path(self.env["ENGINE_ROOT"]) / "bin" / "pulumi"), "stack", "export",
             "--stack", stack, "--cwd", str(self.project)],
            capture_output=True, text=True, timeout=OPERATION_TIMEOUT_S,
            env={**os.environ, **self.env}, check=True,
        )
        return json.loads(process.stdout)["deployment"]

    @contextlib.contextmanager
    def repo_stack(self, stack: str, config: dict[str, Any]) -> Iterator[Path]:
        """A stack of the project itself, as the `invoke` tasks find it
        (stacks/Pulumi.<stack>.yaml, which is yielded and removed afterwards), created on this
        workspace's backend."""
        path = PROJECT_ROOT / "stacks" / f"Pulumi.{stack}.yaml"
        path.write_text(yaml.safe_dump({"config": config}))
        try:
            subprocess.run([str(Path(self.env["ENGINE_ROOT"]) / "bin" / "pulumi"), "stack",
                            "init", stack, "--cwd", str(PROJECT_ROOT), *self.init_options()],
                           env={**os.environ, **self.env}, check=True, capture_output=True)
            yield path
        finally:
            path.unlink(missing_ok=True)
            # and the engine's copy of it in the state folder (ops.stacks.stack.engine_workspace)
            state = Path(self.env.get("RAY_GCP_STATE_DIR") or PROJECT_ROOT / ".ray-gcp")
            (state / "stacks" / path.name).unlink(missing_ok=True)

    def invoke(self, *args: str) -> subprocess.CompletedProcess[str]:
        """`invoke <args>` in the project, as a user runs it, against this workspace."""
        return run_module(["invoke", *args], cwd=PROJECT_ROOT, env={**os.environ, **self.env},
                          timeout=OPERATION_TIMEOUT_S)

    def cleanup(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def cluster_nodes(fake: FakeComputeServer, project: str, zone: str, cluster: str
                  ) -> dict[str, dict[str, Any]]:
    """Every instance and TPU node of the cluster the fake holds (by `ray-cluster-name`)."""
    nodes = dict(fake.instances(project, zone, **{"ray-cluster-name": cluster}))
    nodes.update({name: node for name, node in fake.tpu_nodes(project, zone).items()
                  if (node.get("labels") or {}).get("ray-cluster-name") == cluster})
    return nodes


ENGINE_STATE = PROJECT_ROOT / "tests" / "engine_state"
"""Stack states frozen on an earlier release (`<stack>.json` and `<stack>.encryptionsalt`),
which the old-state tests load with today's program."""


def urn_type(urn: str) -> str:
    """A URN's resource type, without its parents' types."""
    return urn.split("::")[2].rsplit("$", 1)[-1]


def freeze_state(stack: str, cluster: str) -> None:
    """Up `stack` of `cluster` on an empty fake and store its state and encryption salt in
    ENGINE_STATE: run on the release being frozen (`python -m tests.engine.test_engine_...`)."""
    bin_dir = installed_engine_bin()
    if bin_dir is None:
        raise SystemExit("the pulumi engine is not installed: run `invoke engine` first")
    state, salt = ENGINE_STATE / f"{stack}.json", ENGINE_STATE / f"{stack}.encryptionsalt"
    with FakeComputeServer(Faults(operation_s=0.0)) as fake:
        space = EngineWorkspace(fake, bin_dir, secrets_provider=None)  # the salt is kept
        try:
            space.write_stack(stack, cluster)
            space.run(stack, "up")
            deployment = space.export(stack)
            ENGINE_STATE.mkdir(exist_ok=True)
            state.write_text(json.dumps(deployment, indent=1, sort_keys=True) + "\n")
            settings = yaml.safe_load((space.project / f"Pulumi.{stack}.yaml").read_text())
            salt.write_text(settings["encryptionsalt"] + "\n")
        finally:
            space.cleanup()
    print(f"wrote {state.relative_to(PROJECT_ROOT)} and {salt.name}")
