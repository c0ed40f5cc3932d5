"""The LanguageRuntime service the engine calls (pulumi's proto/pulumi/language.proto).

The engine starts `pulumi-language-python [-flags] ENGINE_ADDRESS`, reads the port from the
first line of its stdout, then calls: Handshake (the engine's address and the project's
folders), GetPluginInfo, GetRequiredPackages (GetRequiredPlugins for older engines), Run (the
program), and for `pulumi about` / `pulumi install` About, GetProgramDependencies and
InstallDependencies. Each request carries the project's ProgramInfo: root folder (where
Pulumi.yaml is), program folder and entry point (Pulumi.yaml's `main`), and the runtime
`options` (`toolchain`, `virtualenv`), which pick the Python that runs the program.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import json_format

from tests.fakes.pulumi_protos import proto_modules
from tests.support.warm_python import run_script_attached

language_pb2, language_pb2_grpc, plugin_pb2 = proto_modules(
    "language_pb2", "language_pb2_grpc", "plugin_pb2")
RUNNER = Path(__file__).with_name("program.py")
BAILED = 32  # program.py's exit code after the SDK reported the failure to the engine

# The resource plugins the project's packages name, found as pulumi-language-python finds them
# (sdk/python/cmd/pulumi-language-python/main.go: readPulumiPluginJSON,
# determinePluginDependency), run in the project's own Python: each installed package's
# `pulumi-plugin.json` in `<its location>/<its name, - as _>/` (pulumi_gcp ships one);
# `resource: false` names no plugin (pulumi_policy's); a missing name is the package's without
# `pulumi-`, a missing version the package's; `v` before the version. The real host lists the
# packages with `pip list -v --format json`, which the locked environment does not install:
# importlib.metadata reads the same records. (It also takes a `pulumi-*` package without the
# file, deriving its plugin from its name; the locked environment has none.)
PLUGINS_SCRIPT = """
import importlib.metadata, json, os
found = []
for dist in importlib.metadata.distributions():
    name = dist.metadata["Name"] or ""
    where = os.path.join(str(dist.locate_file("")), name.replace("-", "_"), "pulumi-plugin.json")
    try:
        with open(where, encoding="utf-8") as file:
            plugin = json.loads(file.read() or "{}")
    except FileNotFoundError:
        continue
    if plugin.get("resource"):
        version = plugin.get("version") or dist.version
        found.append({"name": plugin.get("name") or name.removeprefix("pulumi-"),
                      "version": version if version.startswith("v") else "v" + version,
                      "server": plugin.get("server", "")})
print(json.dumps(found))
"""
DISTRIBUTIONS_SCRIPT = """
import importlib.metadata, json
found = {(dist.metadata["Name"], dist.version) for dist in importlib.metadata.distributions()}
print(json.dumps(sorted(found)))
"""


class ProjectError(Exception):
    """The project's runtime settings cannot run it; the message names the setting and fix."""


def program_options(info: Any) -> dict[str, Any]:
    return json_format.MessageToDict(info.options) if info.HasField("options") else {}


def project_python(info: Any) -> str:
    """The Python that runs the program: Pulumi.yaml's `virtualenv` option (relative to the
    project root), `.venv` for `toolchain: uv`, else PULUMI_PYTHON_CMD or python3."""
    options = program_options(info)
    toolchain = options.get("toolchain", "pip")
    if toolchain not in ("pip", "uv"):
        raise ProjectError(f"Pulumi.yaml: runtime option toolchain: {toolchain!r} is not "
                           "supported by this test host (use uv or pip)")
    virtualenv = options.get("virtualenv") or (".venv" if toolchain == "uv" else "")
    if not virtualenv:
        return os.environ.get("PULUMI_PYTHON_CMD") or "python3"
    folder = Path(info.root_directory or ".") / virtualenv
    python = folder / "bin" / "python"
    if not python.is_file():
        raise ProjectError(f"Pulumi.yaml: runtime option virtualenv: {virtualenv} — {folder} is "
                           "not a virtual environment: run `uv sync --locked` in the project")
    return str(python)


def program_env(python: str) -> dict[str, str]:
    """The engine's environment as it started the host (its PYTHONPATH back), with the
    virtualenv's bin first on PATH as an activated virtualenv has it."""
    env = dict(os.environ)
    given = env.pop("LANGUAGE_HOST_GIVEN_PYTHONPATH", None)
    env.pop("PYTHONPATH", None)
    if given:
        env["PYTHONPATH"] = given
    env.pop("PYTHONHOME", None)
    env["PATH"] = os.pathsep.join([str(Path(python).parent), env.get("PATH", "")])
    return env


def ask_python(python: str, script: str) -> Any:
    done = subprocess.run([python, "-c", script], capture_output=True, text=True, check=True,
                          env=program_env(python), timeout=120)
    return json.loads(done.stdout)


class PythonLanguageHost(language_pb2_grpc.LanguageRuntimeServicer):
    def __init__(self, engine_address: str) -> None:
        self.engine_address = engine_address

    def Handshake(self, request: Any, context: Any) -> Any:  # noqa: N802
        self.engine_address = request.engine_address or self.engine_address
        return language_pb2.LanguageHandshakeResponse()

    def GetPluginInfo(self, request: Any, context: Any) -> Any:  # noqa: N802
        return plugin_pb2.PluginInfo(version=importlib.metadata.version("pulumi"))

    def _plugins(self, info: Any, context: Any) -> list[dict[str, str]]:
        try:
            return list(ask_python(project_python(info), PLUGINS_SCRIPT))
        except ProjectError as error:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(error))
            raise

    def GetRequiredPackages(self, request: Any, context: Any) -> Any:  # noqa: N802
        return language_pb2.GetRequiredPackagesResponse(packages=[
            plugin_pb2.PackageDependency(kind="resource", **plugin)
            for plugin in self._plugins(request.info, context)])

    def GetRequiredPlugins(self, request: Any, context: Any) -> Any:  # noqa: N802
        return language_pb2.GetRequiredPluginsResponse(plugins=[
            plugin_pb2.PluginDependency(kind="resource", **plugin)
            for plugin in self._plugins(request.info, context)])

    def Run(self, request: Any, context: Any) -> Any:  # noqa: N802
        info = request.info
        try:
            python = project_python(info)
        except ProjectError as error:
            return language_pb2.RunResponse(error=str(error))
        flags = {"monitor": request.monitor_address, "engine": self.engine_address,
                 "project": request.project, "stack": request.stack,
                 "organization": request.organization, "root_directory": info.root_directory,
                 "pwd": request.pwd, "dry_run": "true" if request.dryRun else "false",
                 "parallel": str(request.parallel)}
        program = str(Path(info.program_directory) / (info.entry_point or "."))
        args = [*[part for name, value in flags.items() if value
                  for part in (f"--{name}", value)],
                program, *request.args]
        env = program_env(python)
        env["PULUMI_CONFIG"] = json.dumps(dict(request.config))
        env["PULUMI_CONFIG_SECRET_KEYS"] = json.dumps(list(request.configSecretKeys))
        # The program's output goes where the host's does: the engine shows it. Forked from the
        # test's warm interpreter when the engine's environment names one and the project's
        # python is that environment (tests/support/warm_python.py), else started here.
        code = run_script_attached(python, str(RUNNER), args, cwd=request.pwd or ".", env=env)
        if code is None:
            code = subprocess.run([python, "-u", str(RUNNER), *args], env=env,
                                  cwd=request.pwd or None, check=False).returncode
        sys.stdout.flush()
        if code == BAILED:
            return language_pb2.RunResponse(bail=True)
        if code != 0:
            return language_pb2.RunResponse(error=f"program exited with non-zero exit code: {code}")
        return language_pb2.RunResponse()

    def InstallDependencies(self, request: Any, context: Any) -> Iterator[Any]:  # noqa: N802
        """`pulumi install`: `uv sync --locked` for `toolchain: uv`, else a virtualenv and
        `pip install -r requirements.txt` when the project names one."""
        info = request.info
        root = Path(info.root_directory or request.directory or ".")
        options = program_options(info)
        if options.get("toolchain") == "uv":
            commands = [["uv", "sync", "--locked"]]
        elif options.get("virtualenv"):
            venv = root / options["virtualenv"]
            commands = [[sys.executable, "-m", "venv", str(venv)],
                        [str(venv / "bin" / "python"), "-m", "pip", "install", "-r",
                         "requirements.txt"]]
        else:
            return
        for command in commands:
            done = subprocess.run(command, cwd=root, capture_output=True, check=False)
            yield language_pb2.InstallDependenciesResponse(stdout=done.stdout, stderr=done.stderr)
            if done.returncode != 0:
                context.abort(grpc.StatusCode.UNKNOWN,
                              f"`{' '.join(command)}` failed in {root} (exit {done.returncode})")

    def About(self, request: Any, context: Any) -> Any:  # noqa: N802
        python = project_python(request.info) if request.HasField("info") else sys.executable
        version = subprocess.run(
            [python, "-c", "import platform; print(platform.python_version())"],
            capture_output=True, text=True, check=True).stdout.strip()
        return language_pb2.AboutResponse(executable=python, version=version)

    def GetProgramDependencies(self, request: Any, context: Any) -> Any:  # noqa: N802
        try:
            found = ask_python(project_python(request.info), DISTRIBUTIONS_SCRIPT)
        except ProjectError as error:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(error))
            raise
        return language_pb2.GetProgramDependenciesResponse(dependencies=[
            language_pb2.DependencyInfo(name=name, version=version) for name, version in found])


def serve(argv: list[str]) -> None:
    """Serve on a free port of 127.0.0.1, printing it; flags (-tracing ...) are ignored, the
    last non-flag argument is the engine's address."""
    positional = [arg for arg in argv if not arg.startswith("-")]
    flagged = {argv[i + 1] for i, arg in enumerate(argv[:-1])
               if arg.startswith("-") and "=" not in arg}
    engine = next((arg for arg in reversed(positional) if arg not in flagged), "")
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    language_pb2_grpc.add_LanguageRuntimeServicer_to_server(PythonLanguageHost(engine), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    sys.stdout.write(f"{port}\n")
    sys.stdout.flush()
    try:
        server.wait_for_termination()
    except KeyboardInterrupt:  # the engine interrupts its plugins when it is done with them
        server.stop(grace=None)
