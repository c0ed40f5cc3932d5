"""The engine `invoke engine` builds: pinned, installed once, and able to run this project's
dynamic providers in the environment Pulumi.yaml names (the Automation API path the lifecycle
tasks take)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from tests.conftest import PROJECT_ROOT

PINNED = "3.276.0"  # engine/go.mod's pulumi/pkg and pulumi/sdk, and what `pulumi version` says
VENV_BIN = Path(sys.executable).parent


def test_go_mod_pins_cli_and_sdk_at_the_version_the_engine_reports(engine_bin):
    go_mod = (PROJECT_ROOT / "engine" / "go.mod").read_text()
    for module in ("github.com/pulumi/pulumi/pkg/v3", "github.com/pulumi/pulumi/sdk/v3"):
        assert re.search(rf"^\s*{re.escape(module)} v{re.escape(PINNED)}\b", go_mod, re.M), module
    env = {**os.environ, "PULUMI_SKIP_UPDATE_CHECK": "true"}
    shown = subprocess.run([engine_bin / "pulumi", "version"], env=env, capture_output=True,
                           text=True, timeout=60, check=True).stdout.strip()
    assert shown == f"v{PINNED}"


def test_engine_task_again_changes_nothing_and_prints_the_bin_folder(engine_bin):
    """Without `go` on PATH: a second run that tried to build would fail."""
    before = {path.name: path.stat().st_mtime_ns for path in engine_bin.iterdir()}
    env = {**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}/usr/bin:/bin"}
    assert shutil.which("go", path=env["PATH"]) is None
    result = subprocess.run([VENV_BIN / "invoke", "engine"], cwd=PROJECT_ROOT, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == str(engine_bin)
    assert {path.name: path.stat().st_mtime_ns for path in engine_bin.iterdir()} == before


def test_installed_under_the_user_cache_with_the_dynamic_provider_plugin(engine_bin):
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    assert engine_bin == cache / "ray-gcp-pulumi" / "engine" / PINNED / "bin"
    plugin = engine_bin / "pulumi-resource-pulumi-python"
    assert os.access(plugin, os.X_OK)
    assert "-u -m pulumi.dynamic" in plugin.read_text()


def test_dynamic_provider_plugin_runs_the_python_of_the_virtualenv_pulumi_yaml_names(
        engine_bin, tmp_path):
    """As the engine starts it: runtime options become PULUMI_RUNTIME_<OPTION> (pulumi's
    provider_plugin.go), the working directory is the project's, and PATH has no python of
    ours. The plugin prints its port once serving."""
    options = yaml.safe_load((PROJECT_ROOT / "Pulumi.yaml").read_text())["runtime"]["options"]
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
           **{f"PULUMI_RUNTIME_{key.upper()}": str(value) for key, value in options.items()}}
    plugin = subprocess.Popen([engine_bin / "pulumi-resource-pulumi-python"], cwd=PROJECT_ROOT,
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert plugin.stdout is not None
        port = plugin.stdout.readline().strip()
        assert port.isdigit(), plugin.stderr.read() if plugin.stderr else port
        (python,) = _children(plugin.pid) or [plugin.pid]  # unless sh exec'd it
        argv = Path(f"/proc/{python}/cmdline").read_bytes().split(b"\0")[:-1]
        assert [arg.decode() for arg in argv[:4]] == [
            str(PROJECT_ROOT / options["virtualenv"] / "bin" / "python"), "-u", "-m",
            "pulumi.dynamic"]
    finally:
        for pid in _children(plugin.pid):
            os.kill(pid, 15)
        plugin.kill()
        plugin.wait(timeout=30)


def _children(pid: int) -> list[int]:
    text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    return [int(child) for child in text.split()]


def test_engine_runs_a_dynamic_provider_in_its_plugin_process_with_the_projects_env(
        engine_bin, engine_env, tmp_path):
    """The path `invoke up` takes: the Automation API drives the engine with an inline
    program and Pulumi.yaml's runtime options in its environment (the CLI hands an inline
    program's plugins none); the engine finds `pulumi-resource-pulumi-python` beside itself
    (ambient plugins ignored) and the provider runs there, not here, in that virtualenv."""
    from pulumi import automation as auto

    from ops.engine import pulumi_command, runtime_env

    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(PROJECT_ROOT / "Pulumi.yaml", project / "Pulumi.yaml")
    settings = yaml.safe_load((project / "Pulumi.yaml").read_text())
    virtualenv = settings["runtime"]["options"]["virtualenv"]
    (project / virtualenv).symlink_to(PROJECT_ROOT / virtualenv)
    (project / settings["main"]).mkdir()  # the CLI checks it exists, even for inline programs

    def program() -> None:
        import pulumi

        from tests.support.engine_probe import Where

        where = Where("where")
        pulumi.export("pid", where.pid)
        pulumi.export("prefix", where.prefix)

    env = {**engine_env, **runtime_env(project), "PULUMI_IGNORE_AMBIENT_PLUGINS": "true",
           "PYTHONPATH": str(PROJECT_ROOT)}
    stack = auto.create_stack("probe", project_name="ray-gcp", program=program,
                              opts=auto.LocalWorkspaceOptions(
                                  work_dir=str(project), env_vars=env,
                                  pulumi_command=pulumi_command()))
    outputs = stack.up().outputs
    assert outputs["pid"].value != os.getpid()
    assert Path(outputs["prefix"].value).resolve() == (PROJECT_ROOT / virtualenv).resolve()
    stack.destroy()


def test_a_state_of_the_shared_dynamic_type_previews_as_the_same_resource(
        engine_bin, engine_env, tmp_path):
    """Created as `pulumi-python:dynamic:Resource` (a release before the own types), then
    declared with its own type and the project's legacy alias: the engine sees no change."""
    from pulumi import automation as auto

    from ops.engine import pulumi_command, runtime_env

    def program_of(kind: str):
        def program() -> None:
            from tests.support import engine_probe

            getattr(engine_probe, kind)("where")

        return program

    env = {**engine_env, **runtime_env(), "PYTHONPATH": str(PROJECT_ROOT)}
    work = tmp_path / "work"
    work.mkdir()

    def stack(kind: str) -> auto.Stack:
        return auto.create_or_select_stack(
            "old", project_name="probe", program=program_of(kind),
            opts=auto.LocalWorkspaceOptions(work_dir=str(work), env_vars=env,
                                            pulumi_command=pulumi_command(),
                                            project_settings=auto.ProjectSettings(
                                                name="probe", runtime="python")))

    stack("LegacyWhere").up()
    (old,) = [r["urn"] for r in stack("LegacyWhere").export_stack().deployment["resources"]
              if r["urn"].endswith("::where")]
    assert "::pulumi-python:dynamic:Resource::" in old
    assert stack("Where").preview().change_summary == {"same": 2}


def test_no_stack_given_never_asks_pulumi_for_its_selected_one(engine_bin, tmp_path):
    """The engine installed, but no stack named in a folder of several: the task lists them
    in one line (issue 43: a bare `down` once deleted pulumi's selected stack unasked)."""
    env = {key: value for key, value in os.environ.items()
           if not key.startswith("PULUMI_") and key != "RAY_GCP_STACK_OUTPUTS"}
    env.update(PULUMI_HOME=str(tmp_path), PULUMI_SKIP_UPDATE_CHECK="true")
    result = subprocess.run([VENV_BIN / "invoke", "plan"], cwd=PROJECT_ROOT, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: which cluster? this folder has"), lines
    assert "full, gpu-docker, head-only" in lines[0]


def test_a_stack_the_backend_does_not_have_is_named_in_one_line(engine_bin, tmp_path):
    """A day-two task on a stack file whose stack was never created where pulumi looks: the
    outputs read through the CLI say so, with what to run."""
    env = {key: value for key, value in os.environ.items()
           if not key.startswith("PULUMI_") and key != "RAY_GCP_STACK_OUTPUTS"}
    env.update(PULUMI_HOME=str(tmp_path), PULUMI_SKIP_UPDATE_CHECK="true",
               PULUMI_BACKEND_URL=f"file://{tmp_path}", PULUMI_CONFIG_PASSPHRASE="x")
    result = subprocess.run([VENV_BIN / "invoke", "get-head-ip", "-s", "minimal"],
                            cwd=PROJECT_ROOT, env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "error: no such stack 'minimal' in the backend: see `pulumi stack ls`, or create it "
        "with `up -s minimal`"]


def test_a_task_drives_the_pinned_engine_without_asking_its_version(engine_bin, tmp_path,
                                                                     monkeypatch):
    """`pulumi_command` gives the Automation API the version `invoke engine` stamped, so no
    task spends a `pulumi version` run on it; the CLI it then runs says that very version."""
    from ops.engine import pulumi_command

    calls = tmp_path / "calls"
    root = tmp_path / "cache" / "ray-gcp-pulumi" / "engine" / PINNED
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "pulumi").write_text(
        f'#!/bin/sh\necho "$*" >> {calls}\nexec {engine_bin / "pulumi"} "$@"\n')
    (root / "bin" / "pulumi").chmod(0o755)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    command = pulumi_command()
    assert not calls.exists()
    assert str(command.version) == PINNED
    said = command.run(["version"], str(tmp_path), {"PULUMI_SKIP_UPDATE_CHECK": "true"})
    assert said.stdout.strip() == f"v{PINNED}"
    assert calls.read_text().split() == ["--non-interactive", "version"]
