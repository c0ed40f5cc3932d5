"""The stack a task works on: which one, its file's settings, its cluster, its outputs.

Every task chooses its stack here (`Stack.choose`: --stack, $PULUMI_STACK, the outputs file's name,
else the only stack of the project folder; never pulumi's "selected" stack, which a bare `down`
would otherwise delete unasked) and hands the one `Stack` down; the stack file is read once, the
cluster YAML and the outputs when first asked for. The outputs come from one pulumi CLI run, or
from the outputs keeper while the stack's state is unchanged (ops.stacks.kept_outputs), or in
test/offline mode from JSON named by $RAY_GCP_STACK_OUTPUTS: a file holding one stack's
outputs, or a directory of `<stack>.json`. The pulumi CLI check is here too: reading outputs
needs it. `stack_credentials` is the one identity of every day-two Google call (the YAML's
gcp_credentials, else ADC). A cluster YAML given to a task (`-c`) names its stack too
(`stack_for_cluster_yaml`): its cluster_name. Where a stack's file is: `.ray-gcp/stacks/` of the
folder the task runs in (`up -c` writes it there), else the repository's tracked `stacks/` (a fork's
stacks), whose file the engine never writes: it works on a copy in `.ray-gcp/stacks/`
(`engine_workspace`) that keeps the stack's encryption salt and worker counts. Where a stack lives
(`backend_env`): the user's PULUMI_BACKEND_URL, else the local file backend when `invoke up -c`
created the stack there, else pulumi's own login; its secrets are unlocked with the user's
passphrase, else the generated one in the state folder, unless the stack was made with a key
service (`new_stack_secrets_provider`: the stack file's `secretsprovider`, else
$RAY_GCP_SECRETS_PROVIDER). Light on purpose (pulumi and pydantic are
imported where used): `invoke exec` must start fast.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from model.stack_config import (
    CONFIG_KEY,
    COUNTS_KEY,
    INLINE_KEY,
    POLICY_KEY,
    PROJECT_ROOT,
    STACKS_DIR,
    read_stack_config,
    resolve_cluster_path,
    shown,
    stack_names,
)
from ops.engine import has_cli, installed_bin, missing_cli, pulumi_command, runtime_env
from ops.errors import OpsError
from ops.paths import (
    BACKEND_ENV,
    PASSPHRASE_ENV,
    PASSPHRASE_FILE_ENV,
    SECRETS_PROVIDER_ENV,
    local_backend_url,
    own_stacks_dir,
    passphrase_file,
    state_root,
    uses_local_backend,
    write_new_file,
)
from ops.stacks.kept_outputs import kept_outputs
from ops.stacks.torn_read import reading_again

if TYPE_CHECKING:
    from pulumi.automation import Stack as AutomationStack

    from model.adoption import Adoption
    from model.config import ClusterConfig

OUTPUTS_ENV = "RAY_GCP_STACK_OUTPUTS"
STACK_ENV = "PULUMI_STACK"
CONFIG_NAMESPACE = "ray-gcp:"
PROJECT_NAME = "ray-gcp"  # Pulumi.yaml's `name`


@dataclass(frozen=True)
class Node:
    name: str
    node_type: str
    kind: str  # "head" | "worker"
    internal_ip: str
    external_ip: str | None
    status: str
    zone: str = ""
    """The node's zone when the outputs say (a failover zone); else the stack's `zone`."""
    market: str = ""
    """`spot` or `on-demand` as the node really is (a spot type may fall back to on-demand);
    empty for outputs written before it was recorded, or a TPU VM."""

    @property
    def api(self) -> str:
        """"tpu" for a TPU VM, else "compute": node names end in their kind (model/plan.py)."""
        return "tpu" if self.name.endswith("-tpu") else "compute"


@dataclass(frozen=True)
class StackOutputs:
    stack: str
    cluster_name: str
    head_name: str
    head_internal_ip: str
    head_external_ip: str | None
    ssh_user: str
    ssh_port: int
    # repr=False: the key must never reach a log line or a traceback's locals dump.
    ssh_private_key: str = field(repr=False)
    project: str = ""
    zone: str = ""
    service_account_email: str = ""
    docker_container_name: str = ""
    dashboard_url: str = ""
    cluster_config_file: str = ""
    nodes: tuple[Node, ...] = ()
    # `head` and each worker type -> the startup script version its nodes should report.
    script_versions: dict[str, str] = field(default_factory=dict)
    ssh_proxy_command: str = ""
    """The head's ProxyCommand template (ops.remote.ssh_proxy); empty: dialled directly."""
    os_login: bool = False
    """Nodes take logins from OS Login: the user is the one ops.remote.os_login is given."""
    os_login_account: str = ""
    # Ray's auth token (a secret output); "" when the stack runs without token auth.
    ray_auth_token: str = field(default="", repr=False)

    def wanted_version(self, node: Node) -> str:
        key = "head" if node.kind == "head" or node.name == self.head_name else node.node_type
        return self.script_versions.get(key, "")

    @property
    def head_address(self) -> str:
        """External IP when the head has one, else the internal IP (use_internal_ips / VPN)."""
        return self.head_external_ip or self.head_internal_ip

    @property
    def head(self) -> Node:
        """The head as a node to reach (by its name and internal address, all a transfer
        needs), whether or not the outputs list the nodes."""
        return Node(self.head_name, "", "head", self.head_internal_ip, None, "")

    @property
    def workers(self) -> list[Node]:
        return [node for node in self.nodes if node.kind != "head"]

    def node(self, name: str) -> Node:
        for node in self.nodes:
            if node.name == name:
                return node
        known = ", ".join(node.name for node in self.nodes) or "none"
        raise OpsError(f"stack {self.stack!r} has no node {name!r}: nodes are {known}")


_REQUIRED = ("cluster_name", "head_name", "head_internal_ip", "ssh_user", "ssh_private_key")


def parse_outputs(stack: str, raw: dict[str, Any]) -> StackOutputs:
    """Plain stack outputs -> StackOutputs; missing keys mean the stack was never deployed."""
    missing = [key for key in _REQUIRED if not raw.get(key)]
    if missing:
        raise OpsError(
            f"stack {stack!r} has no output {missing[0]!r}: deploy it first with "
            f"`invoke up --stack {stack}`"
        )
    nodes = tuple(
        Node(
            name=item["name"],
            node_type=item.get("node_type", ""),
            kind=item.get("kind", "worker"),
            internal_ip=item.get("internal_ip") or "",
            external_ip=item.get("external_ip") or None,
            status=item.get("status", ""),
            zone=item.get("zone") or "",
            market=item.get("market") or "",
        )
        for item in raw.get("nodes") or []
    )
    return StackOutputs(
        stack=stack,
        cluster_name=raw["cluster_name"],
        head_name=raw["head_name"],
        head_internal_ip=raw["head_internal_ip"],
        head_external_ip=raw.get("head_external_ip") or None,
        ssh_user=raw["ssh_user"],
        ssh_port=int(raw.get("ssh_port") or 22),
        ssh_private_key=raw["ssh_private_key"],
        project=raw.get("project", ""),
        zone=raw.get("zone", ""),
        service_account_email=raw.get("service_account_email", ""),
        docker_container_name=raw.get("docker_container_name") or "",
        dashboard_url=raw.get("dashboard_url", ""),
        cluster_config_file=raw.get("cluster_config_file", ""),
        nodes=nodes,
        script_versions=dict(raw.get("script_versions") or {}),
        ssh_proxy_command=raw.get("ssh_proxy_command") or "",
        os_login=bool(raw.get("os_login")),
        os_login_account=raw.get("os_login_account") or "",
        ray_auth_token=raw.get("ray_auth_token") or "",
    )


def require_cli() -> None:
    if not has_cli():
        raise missing_cli()


def project_stacks() -> list[str]:
    """The stacks of the project folder: its own (`.ray-gcp/stacks/`) and, in a checkout of
    this repository, the tracked ones (`stacks/`)."""
    own = stack_names(own_stacks_dir()) if own_stacks_dir().is_dir() else []
    return sorted({*own, *stack_names(STACKS_DIR)})


def only_stack() -> str:
    """The project folder's one stack, the stack a task names none of; else one line listing
    them (a task never falls back to pulumi's selected stack)."""
    known = project_stacks()
    if len(known) == 1:
        return known[0]
    if not known:
        raise OpsError("no cluster here: `-c CLUSTER.yaml` names one (`up -c` creates it), or "
                       "run in the folder you ran `up -c` in")
    raise OpsError(f"which cluster? this folder has {len(known)}: {', '.join(known)}: name one "
                   "with `-s NAME` (or `-c CLUSTER.yaml`)")


def stack_file_path(name: str) -> Path:
    """The file stack `name`'s settings are read from: the repository's tracked one when there
    is one, else the project folder's own (`.ray-gcp/stacks/`, which need not exist yet)."""
    tracked = STACKS_DIR / f"Pulumi.{name}.yaml"
    return tracked if tracked.is_file() else own_stacks_dir() / f"Pulumi.{name}.yaml"


def engine_stack_file(name: str) -> Path:
    """The file the engine reads and writes as stack `name`'s (`.ray-gcp/stacks/`)."""
    return own_stacks_dir() / f"Pulumi.{name}.yaml"


def _read_document(path: Path) -> dict[str, Any]:
    import yaml

    if not path.is_file():
        return {}
    document = yaml.safe_load(path.read_text())
    return document if isinstance(document, dict) else {}


ENGINE_KEPT = (COUNTS_KEY,)
"""What a task writes into the engine's copy of a tracked stack file (`invoke scale`), kept
over the tracked file's value."""


def engine_workspace(name: str) -> Path:
    """The folder the engine runs in for stack `name`: the state folder, with a Pulumi.yaml
    (the project, its stacks in `stacks/`) and the stack's file. A tracked stack file is copied
    there first (its paths made absolute), keeping what the engine or a task wrote into the
    copy (the encryption salt, unless the tracked file has its own; secrets set with `pulumi
    config set --secret`; worker counts), so the tracked file is never written; the project
    folder's own file is the engine's."""
    import yaml

    base = state_root()
    project = {"name": PROJECT_NAME, "runtime": "python", "main": str(PROJECT_ROOT / "infra"),
               "stackConfigDir": "stacks",
               "description": "written by ray-gcp: the stacks of this folder"}
    text = yaml.safe_dump(project, sort_keys=False)
    ignore = base / ".gitignore"  # the user's own git never takes the state (keys, passphrase)
    if not ignore.is_file():
        ignore.write_text("# written by ray-gcp: the cluster state of this folder\n*\n")
    settings_file = base / "Pulumi.yaml"
    if not settings_file.is_file() or settings_file.read_text() != text:
        settings_file.write_text(text)
    tracked = STACKS_DIR / f"Pulumi.{name}.yaml"
    if tracked.is_file():
        copy = engine_stack_file(name)
        copy.parent.mkdir(mode=0o700, exist_ok=True)
        source, kept = _read_document(tracked), _read_document(copy)
        config = dict(source.get("config") or {})
        for key in (CONFIG_KEY, POLICY_KEY):
            if isinstance(config.get(key), str):
                config[key] = str(resolve_cluster_path(config[key]))
        for key, value in (kept.get("config") or {}).items():
            if key in ENGINE_KEPT or (isinstance(value, dict) and "secure" in value):
                config[key] = value
        # The copy's salt, unless the tracked file carries one (`pulumi stack init` by hand)
        document = {**{key: value for key, value in kept.items() if key != "config"}, **source,
                    "config": config}
        text = yaml.safe_dump(document, sort_keys=False, default_flow_style=False)
        if not copy.is_file() or copy.read_text() != text:
            copy.write_text(text)
    return base


def _program() -> None:
    from infra.program import run_program

    run_program()


def user_backend() -> bool:
    return bool(os.environ.get(BACKEND_ENV))


def user_passphrase() -> bool:
    """Whether the user gave pulumi a passphrase (an empty PULUMI_CONFIG_PASSPHRASE counts: pulumi
    takes it)."""
    return PASSPHRASE_ENV in os.environ or bool(os.environ.get(PASSPHRASE_FILE_ENV))


def backend_env(name: str) -> dict[str, str]:
    """What the CLI needs, beyond the user's own environment, to find stack `name` and unlock
    its secrets: the local file backend when `invoke up -c` created the stack there (and the
    user names no backend), the generated passphrase's file when there is one (and the user
    gives no passphrase). Never the passphrase itself."""
    env = {}
    if not user_backend() and uses_local_backend(name):
        env[BACKEND_ENV] = local_backend_url()
    generated = None if user_passphrase() else passphrase_file(create=False)
    if generated is not None:
        env[PASSPHRASE_FILE_ENV] = str(generated)
    return env


SECRETS_SCHEMES = ("gcpkms", "awskms", "azurekeyvault", "hashivault")
"""The key services `pulumi stack init --secrets-provider` takes by URL (pkg/secrets/cloud)."""


def new_stack_secrets_provider(stack_file: Path) -> str | None:
    """What a new stack whose file is `stack_file` is to encrypt its secrets with (`pulumi
    stack init --secrets-provider`): the file's own `secretsprovider:` (pulumi's key, which a
    team commits with a tracked stack file; pulumi alone would make the stack with a
    passphrase and drop it), else $RAY_GCP_SECRETS_PROVIDER, else None: pulumi's default (a
    passphrase on a file or cloud-storage backend, Pulumi Cloud's own there). A stack that
    exists keeps the one it has (`pulumi stack change-secrets-provider` moves it). Checked
    before anything is made: one line naming the file or setting."""
    from urllib.parse import urlsplit

    given: Any = _read_document(stack_file).get("secretsprovider")
    where = f"{shown(stack_file)}: secretsprovider"
    if given is None:
        given, where = os.environ.get(SECRETS_PROVIDER_ENV) or None, SECRETS_PROVIDER_ENV
    if given is None:
        return None
    if isinstance(given, str) and (given in ("default", "passphrase") or (
            urlsplit(given).scheme in SECRETS_SCHEMES and urlsplit(given).netloc)):
        return given
    raise OpsError(f"{where}: {given!r} is not a pulumi secrets provider: give `passphrase` or "
                   "a key's URL (gcpkms://projects/PROJECT/locations/LOCATION/keyRings/RING/"
                   "cryptoKeys/KEY, or awskms://, azurekeyvault://, hashivault://)")


def uses_passphrase(stack_file: Path) -> bool:
    """Whether a new stack whose file is `stack_file` would keep its secrets under a
    passphrase (pulumi's default on a file or cloud-storage backend)."""
    return new_stack_secrets_provider(stack_file) in (None, "default", "passphrase")


def select_stack(name: str, create: bool = False) -> AutomationStack:
    """The Automation API's handle on stack `name` (made first if `create` and missing): the
    pinned engine (else `pulumi` on PATH, ops.engine) drives the program inline, in this
    process (the SDK hosts the language runtime, so no Python language host is needed);
    Pulumi.yaml gives the project, its stack config folder and the virtualenv the engine runs
    the dynamic providers in; `backend_env` where the stack lives; a stack made here gets
    `new_stack_secrets_provider`'s provider."""
    require_cli()
    provider = new_stack_secrets_provider(stack_file_path(name)) if create else None
    from pulumi import automation as auto

    options = auto.LocalWorkspaceOptions(work_dir=str(engine_workspace(name)),
                                         pulumi_command=pulumi_command(),
                                         env_vars={**runtime_env(), **backend_env(name)},
                                         secrets_provider=provider)
    opener = auto.create_or_select_stack if create else auto.select_stack
    try:
        return reading_again(lambda: opener(stack_name=name, project_name=PROJECT_NAME,
                                            program=_program, opts=options))
    except auto.StackNotFoundError:
        raise _no_such_stack(name) from None
    except auto.StackAlreadyExistsError:  # another run created it since this one looked
        return auto.select_stack(stack_name=name, project_name=PROJECT_NAME, program=_program,
                                 opts=options)


def _cli_reason(output: str) -> str:
    """What the pulumi CLI's last `error:` line says, or "it failed"."""
    lines = [line.strip() for line in output.splitlines() if "error:" in line]
    return lines[-1].split("error:", 1)[1].strip() if lines else "it failed"


def _no_such_stack(name: str) -> OpsError:
    return OpsError(f"no such stack {name!r} in the backend: see `pulumi stack ls`, or create "
                    f"it with `up -s {name}`")


def pulumi_outputs(name: str, env: dict[str, str]) -> dict[str, Any]:
    """Plain output values; secrets (the SSH key, Ray's token) are unwrapped in memory only.

    One `pulumi stack output --json --show-secrets` run, where the Automation API's
    `select_stack(name).outputs()` runs the CLI four times (its version check, `stack select`,
    and the outputs with and without secrets): every day-two task reads the outputs, and
    `invoke exec` over a warm connection would spend most of its time there. A run that met
    another writing the state is run again (`reading_again`), said on stderr: the task's
    stdout may be what a script reads (`status --json`). `env`: the environment with
    `backend_env(name)` in it."""
    require_cli()
    installed = installed_bin()
    cli = str(installed / "pulumi") if installed is not None else "pulumi"

    def read() -> dict[str, Any]:
        done = subprocess.run(
            [cli, "stack", "output", "--json", "--show-secrets", "--non-interactive",
             "--stack", name],
            cwd=engine_workspace(name), env=env, capture_output=True,
            text=True, check=False)
        if done.returncode != 0:
            if "no stack named" in done.stderr:
                raise _no_such_stack(name)
            raise OpsError(f"pulumi cannot read the outputs of stack {name!r}: "
                           f"{_cli_reason(done.stderr)}")
        return json.loads(done.stdout or "{}")

    return reading_again(read, sys.stderr)


def resolve_stack_name(stack: str | None, require_file: bool = False) -> str:
    """The name of the stack `Stack.choose` chooses."""
    return Stack.choose(stack, require_file).name


def _chosen_stack(stack: str | None) -> str:
    if stack:
        return stack
    if os.environ.get(STACK_ENV):
        return os.environ[STACK_ENV]
    source = os.environ.get(OUTPUTS_ENV)
    if source and Path(source).is_file():
        return Path(source).stem
    return only_stack()


def _read_outputs_file(stack: str, source: Path) -> dict[str, Any]:
    path = source / f"{stack}.json" if source.is_dir() else source
    if not path.exists():
        if source.is_dir():
            known = ", ".join(sorted(p.stem for p in source.glob("*.json"))) or "none"
            raise OpsError(f"no such stack {stack!r} in {source}: stacks are {known}")
        raise OpsError(f"{OUTPUTS_ENV}={source} does not exist: point it at an outputs JSON")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise OpsError(f"{path} is not valid JSON (line {exc.lineno}): {exc.msg}") from None


def load_outputs(stack: str | None = None) -> StackOutputs:
    """The outputs of `stack` (or the default stack) as StackOutputs."""
    return Stack.choose(stack).outputs


def _outputs_of(name: str, returned: dict[str, Any] | None = None) -> StackOutputs:
    """`returned`: what an engine run just returned, kept instead of read from the CLI."""
    source = os.environ.get(OUTPUTS_ENV)
    if source:
        return parse_outputs(name, _read_outputs_file(name, Path(source)))
    env = {**os.environ, **backend_env(name)}
    read = (lambda: returned) if returned is not None else (lambda: pulumi_outputs(name, env))
    return parse_outputs(name, kept_outputs(PROJECT_NAME, name, env, read))


def stack_settings(stack: str, root: Path = PROJECT_ROOT) -> dict[str, str]:
    """The stack file's `ray-gcp:*` keys as pulumi hands them to a program: strings as they
    are, anything else as JSON text. `ray-gcp:cluster` becomes absolute under `root`, so a
    stack materialised from another git ref plans its own cluster YAML."""
    from model.stack_config import check_stack

    if root != PROJECT_ROOT:
        settings = check_stack(stack, root / "stacks", root)
    else:
        path = stack_file_path(stack)
        if not path.is_file():
            raise OpsError(f"{shown(path)}: no stack {stack!r} here: use one of "
                           f"{', '.join(project_stacks()) or 'none'}, or create it with "
                           "`up -c CLUSTER.yaml`")
        settings = check_stack(stack, path.parent, root)
        if path.parent == STACKS_DIR:
            kept = _read_document(engine_stack_file(stack)).get("config") or {}
            settings.update({key: kept[key] for key in ENGINE_KEPT if key in kept})
    config: dict[str, str] = {}
    for key, value in settings.items():
        if not str(key).startswith(CONFIG_NAMESPACE):
            continue
        if isinstance(value, dict) and "secure" in value:
            continue  # encrypted with the stack's key: not readable offline, never shown
        config[key] = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    if isinstance(settings.get(CONFIG_KEY), str):
        config[CONFIG_KEY] = str(resolve_cluster_path(settings[CONFIG_KEY], root))
    return config


def _cluster_config(settings: dict[str, str]) -> ClusterConfig | None:
    """The cluster config the settings name (inline or a YAML file), as the program reads it;
    None when they name none."""
    from model.config import load_cluster_config, parse_cluster_config

    inline = settings.get(INLINE_KEY)
    if inline:
        return parse_cluster_config(json.loads(inline), INLINE_KEY)
    if settings.get(CONFIG_KEY):
        return load_cluster_config(resolve_cluster_path(settings[CONFIG_KEY]))
    return None


def cluster_from_settings(settings: dict[str, str]) -> tuple[ClusterConfig, dict[str, int]]:
    """The stack's cluster config and pinned worker counts, read as the program reads them."""
    from model.plan import resolve_worker_counts
    from model.stack_config import COUNTS_KEY

    config = _cluster_config(settings)
    if config is None:
        raise OpsError(f"the stack sets neither {CONFIG_KEY} nor {INLINE_KEY}: set one to its "
                       "cluster YAML")
    counts = settings.get(COUNTS_KEY)
    return config, resolve_worker_counts(config, json.loads(counts) if counts else None,
                                         adoption_from_settings(settings))


def adoption_from_settings(settings: dict[str, str]) -> Adoption | None:
    """What the stack took over from `ray up` (`ray-gcp:adopt`, model/adoption.py), if any."""
    from model.adoption import read_adoption
    from model.stack_config import ADOPT_KEY

    adopted = settings.get(ADOPT_KEY)
    return read_adoption(json.loads(adopted) if adopted else None)


def cluster_credentials(settings: dict[str, str]) -> str | None:
    """The stack's `provider.gcp_credentials` (as the program gives them to pulumi-gcp);
    None means Application Default Credentials."""
    config = _cluster_config(settings)
    credentials = config.provider.gcp_credentials if config else None
    return credentials.credentials.get_secret_value() if credentials else None


def stack_credentials(outputs: StackOutputs) -> str | None:
    """The one identity of a stack's day-two Google calls (status, kill-random-node --hard,
    down --workers-only, the host-key lookup): its `provider.gcp_credentials` as the program
    reads them (the stack file's cluster, else the YAML named by its `cluster_config_file`
    output); None means Application Default Credentials."""
    from model.config import ConfigError, load_cluster_config
    from model.stack_config import StackFileError

    try:
        if stack_file_path(outputs.stack).is_file():
            return cluster_credentials(Stack(outputs.stack).settings)
        if not outputs.cluster_config_file:
            return None
        path = resolve_cluster_path(outputs.cluster_config_file)
        if not path.is_file():
            raise OpsError(f"{outputs.cluster_config_file}, the cluster YAML stack "
                           f"{outputs.stack!r} was deployed from, is not here: run from the "
                           "checkout that deployed it, or restore the file")
        config = load_cluster_config(path)
    except (ConfigError, StackFileError) as exc:
        raise OpsError(f"stack {outputs.stack!r}: {exc}") from None
    secret = config.provider.gcp_credentials
    return secret.credentials.get_secret_value() if secret is not None else None


@dataclass(frozen=True)
class ClusterYamlStack:
    """The stack a cluster YAML given with `-c` deploys as: named after its cluster_name, which
    the config's own check (1-35 lowercase letters, digits and hyphens, starting with a letter)
    already makes a valid pulumi stack name, so no name is ever rewritten."""

    name: str
    cluster_yaml: Path
    """Absolute."""
    stack_file: Path
    exists: bool
    """The stack file was there already (and names this YAML)."""

    @property
    def setting(self) -> str:
        """Its `ray-gcp:cluster` value: the YAML's absolute path (the stack file lives in the
        state folder, the YAML in the user's)."""
        return str(self.cluster_yaml)

    def write_stack_file(self) -> bool:
        """Write the stack file naming the YAML, unless it is there already; whether it was
        written."""
        import yaml

        if self.exists:
            return False
        text = yaml.safe_dump({"config": {CONFIG_KEY: self.setting}},
                              default_flow_style=False)
        state_root()  # made first when nothing else made it (the user's own backend)
        self.stack_file.parent.mkdir(mode=0o700, exist_ok=True)
        return write_new_file(self.stack_file, text, 0o644)


def stack_for_cluster_yaml(path: str, stacks_dir: Path | None = None,
                           root: Path = PROJECT_ROOT) -> ClusterYamlStack:
    """The stack a cluster YAML (`-c`, relative to where the task runs) deploys as. The YAML is
    read and checked whole first, and a stack file of that name that deploys another cluster
    (another YAML, or one inline) is refused in one line naming both; nothing is written."""
    from model.config import load_cluster_config

    cluster_yaml = Path(path).expanduser().absolute()
    config = load_cluster_config(cluster_yaml)
    name = config.cluster_name
    stack_file = stacks_dir / f"Pulumi.{name}.yaml" if stacks_dir else stack_file_path(name)
    if not stack_file.exists():
        return ClusterYamlStack(name, cluster_yaml, stack_file, exists=False)
    named = read_stack_config(stack_file, root).get(CONFIG_KEY)
    if not isinstance(named, str) or \
            resolve_cluster_path(named, root).resolve() != cluster_yaml.resolve():
        other = named if isinstance(named, str) else f"the cluster inline in its {INLINE_KEY}"
        raise OpsError(f"{path}: its cluster_name {name!r} is already stack {name!r}, whose "
                       f"{shown(stack_file)} deploys {other}: give this cluster another "
                       f"cluster_name, or work on that one with `-s {name}`")
    return ClusterYamlStack(name, cluster_yaml, stack_file, exists=True)


@dataclass(frozen=True)
class Stack:
    """One stack, chosen once per task and handed down: its file is read on first use, its
    cluster and outputs likewise, each once."""

    name: str

    @classmethod
    def choose(cls, stack: str | None, require_file: bool = False) -> Stack:
        """--stack, else $PULUMI_STACK, else the outputs file's name, else the project folder's only
        stack (`only_stack`); every task picks its stack here. The stack file, when there is
        one (or `require_file`), is read and checked first, so its mistakes show before any
        slow work; it is not read again."""
        chosen = cls(_chosen_stack(stack))
        if require_file or stack_file_path(chosen.name).exists():
            chosen.settings  # noqa: B018 - read (and checked) now, kept for later
        return chosen

    @classmethod
    def of(cls, stack: str | Stack) -> Stack:
        return stack if isinstance(stack, Stack) else cls(stack)

    @cached_property
    def settings(self) -> dict[str, str]:
        """The stack file's `ray-gcp:*` settings (`stack_settings`)."""
        return stack_settings(self.name)

    @cached_property
    def _cluster(self) -> tuple[ClusterConfig, dict[str, int]]:
        return cluster_from_settings(self.settings)

    @property
    def cluster(self) -> ClusterConfig:
        return self._cluster[0]

    @property
    def worker_counts(self) -> dict[str, int]:
        """Each worker type's count as the program resolves it (pinned, else min_workers)."""
        return self._cluster[1]

    @cached_property
    def outputs(self) -> StackOutputs:
        """The deployed stack's outputs (from pulumi, or $RAY_GCP_STACK_OUTPUTS): those an
        operation of this task just returned (`keep_outputs`), else read."""
        return _outputs_of(self.name, self.__dict__.get("_returned_outputs"))

    def keep_outputs(self, returned: dict[str, Any]) -> None:
        """The outputs an engine run of this task returned (an up's), plain: `outputs` is
        these from now on, and the outputs keeper keeps them for the next task, where
        reading them back would run the CLI once more (a third of a CPU-second, after the
        Automation API's own two reads)."""
        self.__dict__.pop("outputs", None)
        self.__dict__["_returned_outputs"] = returned

    def automation(self, create: bool = False) -> AutomationStack:
        """The Automation API's handle on the stack (`select_stack`; made first if `create`
        and missing), opened once per task: each opening runs the CLI twice (its version
        check and `stack select`)."""
        opened = self.__dict__.get("_automation")
        if opened is None:
            opened = self.__dict__["_automation"] = select_stack(self.name, create)
        return opened
