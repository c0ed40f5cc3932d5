"""tests/support/warm_python.py: a run forked from the warm interpreter is the process a cold
`python -m MODULE` would be (its argv, folder, environment, stdin, output, exit status and CPU
time), or it is started cold."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import grpc
import pytest
from google.protobuf import empty_pb2
from pulumi.runtime.proto import provider_pb2_grpc

from tests.support import warm_python
from tests.support.waiting import wait_for
from tests.support.warm_python import run_module

PROJECT_ROOT = Path(__file__).resolve().parents[2]

PROBE = '''
import json, os, signal, subprocess, sys, time
root = sys.argv[1]
seen = {
    "argv": sys.argv, "cwd": os.getcwd(), "path0": sys.path[0],
    "cmdline": " ".join(open("/proc/self/cmdline").read().replace(chr(0), " ").split()),
    "probe_env": os.environ.get("PROBE"), "server_only": "WARM_ONLY" in os.environ,
    "child_env": subprocess.run(["sh", "-c", "echo $PROBE"], capture_output=True,
                                text=True).stdout,
    "stdin": sys.stdin.read(), "main": __name__, "main_file": sys.modules["__main__"].__file__,
    "project_modules": sorted(
        name for name, module in sys.modules.items()
        if (getattr(module, "__file__", None) or "").startswith(root)
        and not module.__file__.startswith(os.path.join(root, ".venv"))),
    "mp_main_is_main": sys.modules.get("__mp_main__", sys.modules["__main__"])
                       is sys.modules["__main__"],
}
print(json.dumps(seen))
print("to stderr", file=sys.stderr)
how = os.environ.get("END", "")
if how == "code":
    sys.exit(3)
if how == "raise":
    raise ValueError("boom")
if how == "signal":
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)
if how == "spin":
    while time.process_time() < 0.3:
        pass
    print(time.process_time())
if how == "hang":
    time.sleep(600)
'''


@pytest.fixture(autouse=True)
def _warm_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The runs here are warm even when the suite runs every other one cold."""
    monkeypatch.delenv(warm_python.COLD_ENV, raising=False)


@pytest.fixture
def probe(tmp_path: Path) -> Path:
    (tmp_path / "probe.py").write_text(PROBE)
    return tmp_path


def both(folder: Path, env: dict[str, str], stdin: str = ""
         ) -> tuple[subprocess.CompletedProcess[str], subprocess.CompletedProcess[str]]:
    """The probe run warm and cold, with the same folder, environment and stdin."""
    args = ["probe", str(PROJECT_ROOT), "x y"]
    warm = run_module(args, cwd=folder, env=env, input=stdin, timeout=120)
    cold = subprocess.run([sys.executable, "-m", *args], cwd=folder, env=env, input=stdin,
                          capture_output=True, text=True, timeout=120, check=False)
    return warm, cold


def test_a_warm_run_sees_what_a_cold_run_sees(probe, monkeypatch):
    monkeypatch.setenv("WARM_ONLY", "1")  # in the test process, not in the run's environment
    warm_python.stop()  # the next run starts a server with WARM_ONLY in its own environment
    env = {key: value for key, value in os.environ.items() if key != "WARM_ONLY"}
    warm, cold = both(probe, {**env, "PROBE": "given"}, stdin="typed\nlines\n")

    assert (warm.returncode, warm.stdout, warm.stderr) == (cold.returncode, cold.stdout,
                                                           cold.stderr)
    seen = json.loads(warm.stdout)
    assert seen["argv"] == [str(probe / "probe.py"), str(PROJECT_ROOT), "x y"]
    assert seen["cwd"] == seen["path0"] == str(probe)
    assert (seen["probe_env"], seen["child_env"], seen["server_only"]) == ("given", "given\n",
                                                                           False)
    assert seen["stdin"] == "typed\nlines\n" and seen["main"] == "__main__"
    assert seen["main_file"] == str(probe / "probe.py") and seen["mp_main_is_main"]
    assert seen["project_modules"] == []  # nothing of the project was loaded before the fork


@pytest.mark.parametrize(("end", "code"), [("code", 3), ("raise", 1),
                                           ("signal", -signal.SIGKILL)])
def test_a_warm_run_ends_as_a_cold_run_ends(probe, end, code):
    warm, cold = both(probe, {**os.environ, "END": end})

    assert warm.returncode == cold.returncode == code
    assert warm.stdout == cold.stdout
    if end == "raise":
        assert warm.stderr.endswith("ValueError: boom\n") and cold.stderr.endswith(
            "ValueError: boom\n")


def test_a_warm_runs_cpu_counts_for_the_test_that_ran_it(probe):
    before = warm_python.child_cpu_s
    done = run_module(["probe", str(PROJECT_ROOT)], cwd=probe, env={**os.environ, "END": "spin"},
                      timeout=120)

    assert done.returncode == 0
    assert warm_python.child_cpu_s - before >= float(done.stdout.splitlines()[-1])


def test_a_warm_run_over_its_timeout_is_killed(probe):
    with pytest.raises(subprocess.TimeoutExpired) as raised:
        run_module(["probe", str(PROJECT_ROOT)], cwd=probe, env={**os.environ, "END": "hang"},
                   timeout=3)

    assert b"to stderr" in raised.value.stderr  # bytes, as subprocess.run's timeout gives
    assert run_module(["probe", str(PROJECT_ROOT)], cwd=probe, timeout=120).returncode == 0


def test_a_run_with_other_interpreter_settings_starts_cold(probe, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("on-its-path")
    (elsewhere / "only_on_pythonpath.py").write_text("print('found')\n")
    env = {**os.environ, "PYTHONPATH": str(elsewhere)}

    done = run_module(["only_on_pythonpath"], cwd=probe, env=env, timeout=120)

    assert (done.returncode, done.stdout) == (0, "found\n")


def test_a_warm_run_is_seen_as_a_spawn(probe):
    seen: list[list[str]] = []
    watching = [True]

    def hook(event: str, args: tuple[object, ...]) -> None:
        if watching[0] and event == "subprocess.Popen":
            seen.append(list(args[1]))  # type: ignore[call-overload]

    sys.addaudithook(hook)  # hooks cannot be removed: it stops listening below
    try:
        run_module(["probe", str(PROJECT_ROOT)], cwd=probe, timeout=120)
    finally:
        watching[0] = False

    assert [sys.executable, "-m", "probe", str(PROJECT_ROOT)] in seen



def ended(pid: str) -> bool:
    """Gone, or a zombie: whoever the orphan was handed to reaps it when it will."""
    try:
        status = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return status.rsplit(")", 1)[1].split()[0] == "Z"


def test_the_warm_interpreter_ends_with_the_process_that_started_it(probe):
    script = ("import os, sys; from tests.support import warm_python as w; "
              f"w.run_module(['probe', {str(PROJECT_ROOT)!r}], cwd={str(probe)!r}); "
              "print(w._server.process.pid, w._server.folder, flush=True); os._exit(0)")
    done = subprocess.run([sys.executable, "-c", script], cwd=PROJECT_ROOT, capture_output=True,
                          text=True, timeout=120, check=True)
    pid, folder = done.stdout.split()

    wait_for(lambda: ended(pid) and not Path(folder).exists(),
             "the warm interpreter of a process that ended has ended, its folder removed")


ATTACHED_CLIENT = (f"import os, sys; sys.path.insert(0, {str(PROJECT_ROOT)!r}); "
                   "from tests.support.warm_python import run_script_attached; "
                   "code = run_script_attached(sys.argv[1], sys.argv[2], sys.argv[3:], "
                   "cwd=os.getcwd(), env=dict(os.environ)); "
                   "sys.exit(99 if code is None else code % 256)")
"""A process of its own (a language host, say) running a script attached to its own stdio; 99
when it was told to start the script cold itself."""


def attached(python: str, script: Path, args: list[str], env: dict[str, str], stdin: str = ""
             ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", ATTACHED_CLIENT, python, str(script), *args],
                          cwd=script.parent, env=env,
                          input=stdin, capture_output=True, text=True, timeout=120, check=False)


def test_an_attached_script_run_sees_what_a_cold_run_sees(probe):
    env = {**os.environ, **warm_python.socket_env(), "PROBE": "given"}
    script = probe / "probe.py"
    args = [str(PROJECT_ROOT), "x y"]

    warm = attached(sys.executable, script, args, env, stdin="typed\n")
    cold = subprocess.run([sys.executable, "-u", str(script), *args], cwd=probe, env=env,
                          input="typed\n", capture_output=True, text=True, timeout=120,
                          check=False)

    assert (warm.returncode, warm.stdout, warm.stderr) == (cold.returncode, cold.stdout,
                                                           cold.stderr)
    seen = json.loads(warm.stdout)
    assert seen["argv"] == [str(script), *args] and seen["path0"] == str(probe)
    assert (seen["probe_env"], seen["stdin"], seen["project_modules"]) == ("given", "typed\n", [])


@pytest.mark.parametrize(("end", "code"), [("code", 3), ("raise", 1)])
def test_an_attached_script_run_ends_as_a_cold_run_ends(probe, end, code):
    env = {**os.environ, **warm_python.socket_env(), "END": end}

    warm = attached(sys.executable, probe / "probe.py", [str(PROJECT_ROOT)], env)

    assert warm.returncode == code
    if end == "raise":
        assert warm.stderr.endswith("ValueError: boom\n")


def test_an_attached_run_of_another_environment_or_other_settings_is_left_to_start_cold(
        probe, tmp_path):
    env = {**os.environ, **warm_python.socket_env()}
    other_venv = tmp_path / "venv" / "bin" / "python"  # the same interpreter, another venv
    other_venv.parent.mkdir(parents=True)
    other_venv.symlink_to(sys.executable)

    assert attached(str(other_venv), probe / "probe.py", [str(PROJECT_ROOT)],
                    env).returncode == 99
    assert attached(sys.executable, probe / "probe.py", [str(PROJECT_ROOT)],
                    {**env, "PYTHONHASHSEED": "7"}).returncode == 99
    assert attached(sys.executable, probe / "probe.py", [str(PROJECT_ROOT)],
                    os.environ.copy()).returncode == 99  # no warm interpreter named


def test_an_attached_run_ends_when_the_process_that_asked_for_it_is_killed(tmp_path):
    script = tmp_path / "hang.py"
    script.write_text("import os, time\nprint(os.getpid(), flush=True)\ntime.sleep(600)\n")
    client = subprocess.Popen(
        [sys.executable, "-c", ATTACHED_CLIENT, sys.executable, str(script)], cwd=tmp_path,
        env={**os.environ, **warm_python.socket_env()},
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    run = client.stdout.readline().strip()  # the run is under way, in a process of its own
    assert run and int(run) != client.pid

    client.kill()
    client.wait()

    wait_for(lambda: ended(run), "the run of a killed client has ended")


def launched(folder: Path, env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    """A launcher as the engine starts the stand-in plugin's: `--attach MODULE ARGS`."""
    return subprocess.Popen(
        [sys.executable, "-I", "-S", str(PROJECT_ROOT / "tests/support/warm_python.py"),
         "--attach", "probe", *args], cwd=folder, env=env, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("warm", [True, False])
def test_a_launcher_stands_for_the_run_it_attaches_to(probe, warm):
    env = {**os.environ, "PROBE": "given", **(warm_python.socket_env() if warm else {})}
    cold = subprocess.run([sys.executable, "-u", "-m", "probe", str(PROJECT_ROOT), "x y"],
                          cwd=probe, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=120, check=False)

    launcher = launched(probe, env, str(PROJECT_ROOT), "x y")
    stdout, stderr = launcher.communicate(timeout=120)

    assert (launcher.returncode, stdout, stderr) == (cold.returncode, cold.stdout, cold.stderr)


def test_a_launcher_passes_an_interrupt_on_and_ends_as_its_run_does(probe):
    env = {**os.environ, **warm_python.socket_env(), "END": "hang"}
    launcher = launched(probe, env, str(PROJECT_ROOT))
    seen = json.loads(launcher.stdout.readline())  # the run is under way
    assert seen["argv"][0] == str(probe / "probe.py")

    launcher.send_signal(signal.SIGINT)  # as the engine closes a plugin: its process group's

    assert launcher.wait(timeout=60) == -signal.SIGINT  # a cold run's end on SIGINT
    interrupted = launcher.stderr.read()  # the run's own traceback: it was the run's interrupt
    assert f'File "{probe / "probe.py"}"' in interrupted  # the run's, forked from the server's:
    assert 'warm_python.py", line' in interrupted.split(str(probe))[0]
    assert interrupted.endswith("KeyboardInterrupt\n")


def dynamic_plugin(launcher: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    """The dynamic-provider plugin as the engine starts it: in the program's folder, the
    project's virtualenv named relative to it, in a process group of its own."""
    return subprocess.Popen(
        [str(launcher)], cwd=PROJECT_ROOT / "infra",
        env={**env, "PULUMI_RUNTIME_VIRTUALENV": "../.venv"}, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def children_of(pid: int) -> dict[int, str]:
    """pid -> command line of every process whose parent is `pid`."""
    found = {}
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError, IndexError):
            if entry.name.isdigit() and int(
                    (entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found[int(entry.name)] = " ".join(
                    (entry / "cmdline").read_text().replace("\0", " ").split())
    return found


def test_the_dynamic_plugin_launcher_serves_the_providers_from_a_warm_fork(engine_bin):
    folder = warm_python.warm_engine_root(engine_bin) / "bin"
    env = {**os.environ, **warm_python.socket_env()}
    server = warm_python._warm_server().process.pid  # noqa: SLF001
    before = set(children_of(server))

    plugin = dynamic_plugin(Path(folder) / warm_python.DYNAMIC_PLUGIN, env)
    port = int(plugin.stdout.readline())  # the engine reads the port the provider serves on

    # The SDK's provider answers the engine's protocol, from a process forked from the warm
    # interpreter, showing the command line the SDK's script would have run.
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        grpc.channel_ready_future(channel).result(timeout=60)
        stub = provider_pb2_grpc.ResourceProviderStub(channel)
        assert stub.GetPluginInfo(empty_pb2.Empty(), timeout=60).version
    (run,) = {pid: line for pid, line in children_of(server).items() if pid not in before}.items()
    assert run[1].endswith("/.venv/bin/python -u -m pulumi.dynamic"), run

    os.killpg(plugin.pid, signal.SIGINT)  # as the engine closes a plugin (TerminateProcessGroup)
    plugin.wait(timeout=60)
    wait_for(lambda: ended(str(run[0])), "the forked provider ended with its launcher")


@pytest.mark.parametrize("venv", ["missing", "not-a-venv"])
def test_the_dynamic_plugin_launcher_refuses_what_the_sdks_script_refuses(
        engine_bin, tmp_path, venv):
    folder = warm_python.warm_engine_root(engine_bin) / "bin"
    if venv == "not-a-venv":
        (tmp_path / venv).mkdir()
    env = {**os.environ, **warm_python.socket_env(),
           "PULUMI_RUNTIME_VIRTUALENV": str(tmp_path / venv)}
    ran = [subprocess.run([str(launcher)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=60, check=False)
           for launcher in (Path(folder) / warm_python.DYNAMIC_PLUGIN,
                            engine_bin / warm_python.DYNAMIC_PLUGIN)]

    ours, theirs = ((done.returncode, done.stdout, done.stderr) for done in ran)
    assert ours == theirs and theirs[0] == 1 and str(tmp_path / venv) in theirs[2]


def test_the_warm_engine_is_the_install_the_tasks_find_under_its_cache_folder(
        engine_bin, monkeypatch):
    """What an `invoke` task's Automation API runs, under the XDG_CACHE_HOME the engine tests
    give it: the installed engine itself (a hard link on one file system, so the engine finds
    the plugin script beside its own path, symlinks resolved, and warns of none "from $PATH";
    a symlink across two), the warm plugin script beside it, and the real cache's plan keys."""
    from ops.engine import cache_root, installed_bin

    real_plans = cache_root() / "plans"
    root = warm_python.warm_engine_root(engine_bin)
    assert warm_python.warm_engine_root(engine_bin) == root  # one per worker, made once
    monkeypatch.setenv("XDG_CACHE_HOME", str(root.parents[2]))

    assert installed_bin() == root / "bin"
    engine = root / "bin" / "pulumi"
    across = os.stat(root).st_dev != os.stat(engine_bin).st_dev
    assert engine.is_symlink() == across and engine.samefile(engine_bin / "pulumi")
    script = (root / "bin" / warm_python.DYNAMIC_PLUGIN).read_text()
    assert "--attach pulumi.dynamic" in script and "-m pulumi.dynamic" not in script
    assert (cache_root() / "plans").resolve() == real_plans.resolve()
