"""tests/support/warm_python.py: a run forked from the warm interpreter is the process a cold
`python -m MODULE` would be (its argv, folder, environment, stdin, output, exit status and CPU
time), or it is started cold."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import warm_python
from tests.support.waiting import wait_for
from tests.support.warm_python import run_module

PROJECT_ROOT = Path(__file__).resolve().parents[2]

PROBE = '''
import json, os, signal, subprocess, sys, time
root = sys.argv[1]
seen = {
    "argv": sys.argv, "cwd": os.getcwd(), "path0": sys.path[0],
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
