"""The language host double (tests/fakes/language_host) answers the engine's LanguageRuntime calls
as the engine makes them: started as `pulumi-language-python ENGINE_ADDRESS`, its port on the
first line of stdout, then gRPC through the SDK's stubs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import grpc
import pulumi_gcp
import pytest
from google.protobuf import empty_pb2, struct_pb2
from pulumi.runtime.proto import language_pb2, language_pb2_grpc

from tests.fakes.language_host.host import PLUGINS_SCRIPT
from tests.support.engine_stack import PROJECT_ROOT

HOST = Path(__file__).parent / "language_host" / "pulumi-language-python"


@pytest.fixture(scope="module")
def host() -> Iterator[language_pb2_grpc.LanguageRuntimeStub]:
    process = subprocess.Popen([str(HOST), "127.0.0.1:1"], stdout=subprocess.PIPE, text=True)
    try:
        port = int(process.stdout.readline())
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            yield language_pb2_grpc.LanguageRuntimeStub(channel)
    finally:
        process.terminate()
        process.wait(timeout=30)


def program_info(root: Path, **options: str) -> language_pb2.ProgramInfo:
    struct = struct_pb2.Struct()
    struct.update(options)
    return language_pb2.ProgramInfo(root_directory=str(root),
                                    program_directory=str(root / "infra"), entry_point=".",
                                    options=struct)


def test_required_packages_are_the_resource_plugins_the_virtualenv_ships(host) -> None:
    """Exactly the plugins whose package says `resource: true` (pulumi_gcp's
    pulumi-plugin.json; pulumi_policy's `resource: false` names none), versions `v`-prefixed as
    the real host sends them."""
    answer = host.GetRequiredPackages(language_pb2.GetRequiredPackagesRequest(
        info=program_info(PROJECT_ROOT, toolchain="uv", virtualenv=".venv")))
    shipped = json.loads((Path(pulumi_gcp.__file__).parent / "pulumi-plugin.json").read_text())
    assert [(p.kind, p.name, p.version) for p in answer.packages] == [
        ("resource", "gcp", f"v{shipped['version']}")]
    assert host.GetPluginInfo(empty_pb2.Empty()).version


def test_a_plugin_file_outside_the_packages_own_module_folder_names_no_plugin(tmp_path) -> None:
    """Only `<location>/<name, - as _>/pulumi-plugin.json` counts; a missing name or version
    comes from the package's."""
    def package(name: str, module_file: str, plugin: dict[str, object]) -> None:
        info = tmp_path / f"{name.replace('-', '_')}-1.2.3.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.2.3\n")
        (tmp_path / module_file).parent.mkdir(parents=True)
        (tmp_path / module_file).write_text(json.dumps(plugin))

    package("pulumi-fake", "pulumi_fake/pulumi-plugin.json", {"resource": True})
    package("elsewhere", "elsewhere/nested/pulumi-plugin.json", {"resource": True, "name": "x"})
    done = subprocess.run([sys.executable, "-c", PLUGINS_SCRIPT], capture_output=True, text=True,
                          check=True, env={**os.environ, "PYTHONPATH": str(tmp_path)})
    found = [p for p in json.loads(done.stdout) if p["name"] in ("fake", "x")]
    assert found == [{"name": "fake", "version": "v1.2.3", "server": ""}]


def test_about_names_the_virtualenvs_python(host) -> None:
    answer = host.About(language_pb2.AboutRequest(info=program_info(PROJECT_ROOT,
                                                                    toolchain="uv")))
    assert answer.executable == str(PROJECT_ROOT / ".venv" / "bin" / "python")
    assert answer.version.startswith("3.")


def test_a_missing_virtualenv_fails_the_run_with_one_line_naming_the_setting(host,
                                                                             tmp_path) -> None:
    answer = host.Run(language_pb2.RunRequest(
        project="p", stack="s", pwd=str(tmp_path),
        info=program_info(tmp_path, toolchain="uv", virtualenv="venv")))
    assert answer.error.startswith("Pulumi.yaml: runtime option virtualenv: venv")
    assert "uv sync --locked" in answer.error and "\n" not in answer.error


def test_program_dependencies_are_the_virtualenvs_distributions(host) -> None:
    answer = host.GetProgramDependencies(language_pb2.GetProgramDependenciesRequest(
        info=program_info(PROJECT_ROOT, toolchain="uv")))
    assert "pulumi" in {d.name for d in answer.dependencies}


@pytest.mark.slow  # makes a virtualenv: its processes take over 5 CPU-s (tests/conftest.py)
def test_install_dependencies_makes_the_named_virtualenv(host, tmp_path) -> None:
    (tmp_path / "requirements.txt").write_text("")
    replies = list(host.InstallDependencies(language_pb2.InstallDependenciesRequest(
        directory=str(tmp_path), info=program_info(tmp_path, virtualenv="venv"))))
    assert replies  # the commands' output, streamed to the engine
    assert (tmp_path / "venv" / "bin" / "python").is_file()
