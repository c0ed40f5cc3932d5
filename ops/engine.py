"""The pulumi engine this project pins: built from its Go module, installed per user, found.

`engine/go.mod` pins `github.com/pulumi/pulumi/pkg/v3` (the CLI's module, main package
`cmd/pulumi`) and `sdk/v3` at one version and carries the `replace` lines their own go.mod
files need. `install_engine` builds the CLI from the Go module proxy into
`$XDG_CACHE_HOME/ray-gcp-pulumi/engine/<version>/bin` (default `~/.cache/...`) with the version
stamped as pulumi's release build stamps it, and puts next to it the dynamic-provider plugin
script the Python SDK ships (`sdk/python/dist`), which the engine finds beside its own binary.
The Python language host is a separate Go module the proxy does not serve, so the lifecycle
tasks run the program inline through the Automation API (ops/lifecycle/pulumi_cli.py).

Imports nothing from infra/ or the rest of ops/ but `ops.errors` and `ops.paths`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from model.stack_config import PROJECT_ROOT
from ops.errors import OpsError

if TYPE_CHECKING:
    from pulumi.automation import PulumiCommand

GO_MODULE_DIR = PROJECT_ROOT / "engine"
CLI_MODULE = "github.com/pulumi/pulumi/pkg/v3"
SDK_MODULE = "github.com/pulumi/pulumi/sdk/v3"
CLI_PACKAGE = f"{CLI_MODULE}/cmd/pulumi"
VERSION_VARIABLE = f"{SDK_MODULE}/go/common/version.Version"
"""What `pulumi version` prints; unstamped, the Automation API refuses the CLI."""
PLUGIN_SCRIPTS = ("pulumi-resource-pulumi-python",)
"""From the sdk module's `python/dist`: the plugin the engine runs for dynamic providers
(`python -u -m pulumi.dynamic` in the virtualenv Pulumi.yaml names). 3.276 ships no
policy-analyzer script there: the policy pack runs as `policy/analyzer`, an executable the
engine starts itself (ops/lifecycle/pulumi_cli.py)."""
GO_ENV = {"GOFLAGS": "-mod=mod -buildvcs=false", "GOTOOLCHAIN": "local"}


def pinned_version() -> str:
    """The version engine/go.mod pins, without the `v` (`3.276.0`); pkg and sdk must agree."""
    go_mod = GO_MODULE_DIR / "go.mod"
    try:
        text = go_mod.read_text()
    except OSError as exc:
        raise OpsError(f"cannot read {go_mod} ({exc.strerror}): it pins the pulumi engine; "
                       "restore it from git") from None
    versions = {
        module: re.search(rf"^\s*{re.escape(module)} v(\S+)", text, re.MULTILINE)
        for module in (CLI_MODULE, SDK_MODULE)
    }
    found = {module: match.group(1) for module, match in versions.items() if match}
    if len(found) != 2 or len(set(found.values())) != 1:
        raise OpsError(f"{go_mod} must require {CLI_MODULE} and {SDK_MODULE} at one version "
                       f"(found {found or 'neither'}): fix the require lines and run "
                       "`go mod tidy` there")
    return found[CLI_MODULE]


def engine_root(version: str | None = None) -> Path:
    """`<cache>/ray-gcp-pulumi/engine/<version>`: what PulumiCommand calls the install root
    (the CLI is `bin/pulumi` below it)."""
    return cache_root() / "engine" / (version or pinned_version())


def cache_root() -> Path:
    """`$XDG_CACHE_HOME/ray-gcp-pulumi` (default `~/.cache/ray-gcp-pulumi`): what this tool
    keeps on the machine that can be made again (the engine, a plan's key)."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "ray-gcp-pulumi"


def installed_bin() -> Path | None:
    """The bin folder `invoke engine` filled for the pinned version, if it did."""
    bin_dir = engine_root() / "bin"
    return bin_dir if (bin_dir / "pulumi").is_file() else None


def pulumi_command() -> PulumiCommand:
    """The CLI the lifecycle tasks drive: the pinned engine `invoke engine` installed
    (`pinned_command`), else `pulumi` on PATH. The Automation API puts the CLI's folder first
    on the PATH it runs the CLI with, so the engine finds the plugin scripts beside it either
    way."""
    from pulumi.automation import PulumiCommand

    installed = installed_bin()
    if installed is not None:
        return pinned_command(installed.parent, pinned_version())
    if shutil.which("pulumi") is not None:
        return PulumiCommand()
    raise missing_cli()


def pinned_command(root: Path, version: str) -> PulumiCommand:
    """The engine installed under `root` (its CLI `bin/pulumi`) as the Automation API's
    command, known to be `version`: `install_engine` stamped it so. The SDK's own constructor
    asks the CLI (`pulumi version`, a process start and 0.13 CPU-s in every task); the
    version is what the SDK reads (its minimum, its event-log transport), so it is given."""
    from pulumi.automation import PulumiCommand
    from semver import VersionInfo

    class Pinned(PulumiCommand):
        def __init__(self) -> None:  # the parent's would run `pulumi version`
            self.command = str(root / "bin" / "pulumi")
            self.version = VersionInfo.parse(version)

    return Pinned()


def runtime_env(project_dir: Path = PROJECT_ROOT) -> dict[str, str]:
    """Pulumi.yaml's runtime options as the engine hands them to the dynamic-provider plugin
    when it runs the program itself: `PULUMI_RUNTIME_<OPTION>` (pkg resource/plugin/
    provider_plugin.go), the virtualenv made absolute. For an inline program the CLI swaps the
    project's runtime for `client` (cmd/pulumi/operations/io.go), so the plugin gets none and
    would run whatever `python3` is on PATH; the lifecycle tasks put these in the CLI's
    environment instead, which the plugin inherits."""
    import yaml

    if not (project_dir / "Pulumi.yaml").is_file():  # installed as a tool: its own virtualenv
        return {"PULUMI_RUNTIME_VIRTUALENV": sys.prefix} if sys.prefix != sys.base_prefix else {}
    runtime = yaml.safe_load((project_dir / "Pulumi.yaml").read_text()).get("runtime")
    options = (runtime.get("options") or {}) if isinstance(runtime, dict) else {}
    env = {f"PULUMI_RUNTIME_{key.upper()}": str(value) for key, value in options.items()}
    if "virtualenv" in options:
        env["PULUMI_RUNTIME_VIRTUALENV"] = str(project_dir / options["virtualenv"])
    return env


def has_cli() -> bool:
    return installed_bin() is not None or shutil.which("pulumi") is not None


def missing_cli() -> OpsError:
    return OpsError(f"the pulumi CLI is not on PATH nor in {engine_root() / 'bin'}: run `invoke "
                    "engine` (builds the pinned CLI from the Go module proxy), or install it "
                    "with `curl -fsSL https://get.pulumi.com | sh` (or `brew install pulumi`), "
                    "then retry")


def install_engine(out: TextIO = sys.stdout) -> Path:
    """Build and install the pinned engine unless it is installed already; its bin folder.

    The build goes to a temporary folder beside `bin` that is renamed into place once whole,
    so an interrupted build leaves nothing that looks installed."""
    version = pinned_version()
    installed = installed_bin()
    if installed is not None:
        return installed
    if shutil.which("go") is None:
        raise OpsError("`go` is not on PATH: install Go (engine/go.mod names the version "
                       "needed), then run `invoke engine` again")
    root = engine_root(version)
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="bin.partial-", dir=root))
    try:
        print(f"building pulumi v{version} from the Go module proxy into {root / 'bin'} "
              "(a cold build is about 9 CPU-minutes)", file=out, flush=True)
        began = time.monotonic()
        _go("build", "-trimpath", "-ldflags", f"-s -w -X {VERSION_VARIABLE}=v{version}",
            "-o", str(staging / "pulumi"), CLI_PACKAGE)
        sdk_dir = Path(_go("list", "-m", "-f", "{{.Dir}}", SDK_MODULE, capture=True).strip())
        for script in PLUGIN_SCRIPTS:
            target = staging / script
            shutil.copyfile(sdk_dir / "python" / "dist" / script, target)
            target.chmod(0o755)  # the module cache is read-only
        staging.chmod(0o755)
        try:
            staging.rename(root / "bin")
        except OSError:
            if installed_bin() is None:  # not a parallel install that finished first
                raise
        print(f"built in {time.monotonic() - began:.0f}s", file=out, flush=True)
    except OSError as exc:
        raise OpsError(f"cannot install the engine into {root}: {exc}") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return root / "bin"


def _go(*args: str, capture: bool = False) -> str:
    """Run `go` in the wrapper module; its own output streams to the terminal unless
    captured. A failure ends with one line naming the command."""
    result = subprocess.run(
        ["go", *args], cwd=GO_MODULE_DIR, env={**os.environ, **GO_ENV},
        stdout=subprocess.PIPE if capture else None, text=True, check=False,
    )
    if result.returncode != 0:
        raise OpsError(f"`go {' '.join(args[:1])}` in {GO_MODULE_DIR} failed (exit "
                       f"{result.returncode}): see go's messages above")
    return result.stdout or ""
