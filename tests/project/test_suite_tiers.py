"""The suite's tiers and workers (tests/conftest.py), on a small suite of its own run by pytest:
a fixture that starts sshd, Ray or the engine marks its tests (so `-m "not sshd"` leaves them
out), a test that starts one without its marker fails, and a module's shared fixture keeps its
tests on one xdist worker."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.spawn_watch import kind_of

PROJECT_ROOT = Path(__file__).resolve().parents[2]

CONFTEST = '''
from tests.conftest import (  # the suite's own hooks and fixtures
    engine_bin, pytest_collection_modifyitems, pytest_configure, pytest_runtest_logreport,
    pytest_runtest_makereport, pytest_runtest_protocol, pytest_runtest_teardown,
    pytest_terminal_summary, ray_processes,
)
from tests.support.sshd_fixture import local_sshd
'''

TIERS = '''
import json, os, subprocess
from pathlib import Path

import pytest

FAKE_SSHD = Path(os.environ["FAKE_SSHD"])


def record(name):
    out = Path(os.environ["RECORD"]) / name
    out.write_text(json.dumps(os.environ.get("PYTEST_XDIST_WORKER", "main")))


@pytest.fixture(scope="module")
def shared():
    return object()


@pytest.mark.parametrize("n", range(6))
def test_shares_the_module_fixture(shared, n):
    record(f"shared-{n}")


@pytest.mark.parametrize("n", range(6))
def test_on_its_own(n):
    record(f"own-{n}")


def test_starts_sshd_through_its_fixture(local_sshd):
    subprocess.run([FAKE_SSHD], check=True)


def test_starts_sshd_unmarked():
    subprocess.run([FAKE_SSHD], check=True)


@pytest.mark.slow
def test_takes_long():
    record("long")
'''


@pytest.fixture
def small_suite(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "conftest.py").write_text(CONFTEST)
    (suite / "test_tiers.py").write_text(TIERS)
    (suite / "pytest.ini").write_text("[pytest]\nmarkers =\n    ray\n    sshd\n    engine\n"
                                      "    slow\n")
    fake_sshd = tmp_path / "bin" / "sshd"  # a program named sshd that starts nothing
    fake_sshd.parent.mkdir()
    fake_sshd.write_text("#!/bin/sh\nexit 0\n")
    fake_sshd.chmod(0o755)
    record = tmp_path / "record"
    record.mkdir()
    env = {**os.environ, "FAKE_SSHD": str(fake_sshd), "RECORD": str(record),
           "PYTHONPATH": str(PROJECT_ROOT)}
    return suite, env


def run_suite(suite: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                           "-rA", *args], cwd=suite, env=env, capture_output=True, text=True,
                          timeout=300)


def test_a_fixture_that_starts_sshd_marks_its_test_out_of_the_fast_tier(small_suite):
    suite, env = small_suite
    listed = run_suite(suite, env, "--collect-only", "-m", "not sshd")
    assert "test_starts_sshd_through_its_fixture" not in listed.stdout
    assert "test_starts_sshd_unmarked" in listed.stdout
    assert "14/15 tests collected (1 deselected)" in listed.stdout


def test_a_test_that_starts_sshd_without_its_marker_fails_naming_the_fixtures(small_suite):
    suite, env = small_suite
    done = run_suite(suite, env, "-k", "starts_sshd")
    assert done.returncode == 1, done.stdout
    assert "PASSED test_tiers.py::test_starts_sshd_through_its_fixture" in done.stdout
    assert ("test_starts_sshd_unmarked started what its markers do not say: sshd"
            in done.stdout)
    assert "use one of the fixtures sshd, home_stack, local_sshd" in done.stdout


def test_a_modules_shared_fixture_keeps_its_tests_on_one_worker(small_suite):
    suite, env = small_suite
    done = run_suite(suite, env, "-n", "2", "--dist", "loadgroup", "-k", "not starts_sshd")
    assert done.returncode == 0, done.stdout + done.stderr
    record = Path(env["RECORD"])
    workers = {path.name: json.loads(path.read_text()) for path in record.iterdir()}
    assert len({workers[f"shared-{n}"] for n in range(6)}) == 1, workers


def test_the_longest_tests_are_handed_out_first(small_suite):
    """xdist hands out work in collection order (its reordering by count turned off): the slow
    test, collected last, comes first, the sshd one next, then the module's group (its six
    tests together), the plain tests last in their own order."""
    suite, env = small_suite
    listed = run_suite(suite, env, "--collect-only").stdout.splitlines()
    order = [line.split("::")[1].split("[")[0] for line in listed if "::" in line]
    assert order[:2] == ["test_takes_long", "test_starts_sshd_through_its_fixture"], order
    assert order[2:8] == ["test_shares_the_module_fixture"] * 6, order
    assert order[8:] == ["test_on_its_own"] * 6 + ["test_starts_sshd_unmarked"], order


CHILDREN = '''
import subprocess, sys, time

import pytest

BURN = [sys.executable, "-c", "import time\\nend = time.process_time() + 0.6\\n"
        "while time.process_time() < end: pass"]


@pytest.fixture(scope="module")
def planned_once():
    subprocess.run(BURN, check=True)  # a shared fixture's processes count for its first test


def test_runs_a_busy_child(planned_once):
    pass


def test_shares_the_busy_fixture(planned_once):
    pass


def test_runs_a_quick_child():
    subprocess.run([sys.executable, "-c", "pass"], check=True)


@pytest.mark.slow
def test_runs_a_busy_child_marked_slow():
    subprocess.run(BURN, check=True)


@pytest.mark.slow
def test_leaves_a_busy_child_running():
    subprocess.Popen(BURN)  # not waited for: reaped at a later test's next Popen


def test_starts_a_quick_child_after_it():
    time.sleep(1.5)  # the busy child is done by now
    subprocess.run([sys.executable, "-c", "pass"], check=True)  # and reaped here
'''


@pytest.mark.slow  # a small suite on two workers: its three interpreters reach 5 CPU-s
def test_fast_tier_tests_whose_processes_burn_cpu_are_named_to_mark_slow(small_suite):
    """On the controller, from the workers' reports: the test whose child processes (its
    shared fixture's among them) took over the threshold, not the quick one, not the one
    already marked `slow`."""
    suite, env = small_suite
    (suite / "test_children.py").write_text(CHILDREN)
    env = {**env, "RAY_GCP_TESTS_CHILD_CPU_S": "0.4"}
    done = run_suite(suite, env, "-n", "2", "--dist", "loadgroup", "test_children.py", "-k",
                     "not leaves_a_busy_child and not after_it")
    assert done.returncode == 0, done.stdout + done.stderr
    section = done.stdout.split("fast-tier tests whose processes took over 0.4 CPU-s: "
                                "mark them slow")[1].split("=====")[1]
    named = [line.split()[-1].split("@")[0]  # less its xdist group
             for line in section.splitlines() if "CPU-s" in line]
    assert named == ["test_children.py::test_runs_a_busy_child"], done.stdout


def test_a_process_an_out_of_tier_test_left_is_not_counted_for_a_later_test(small_suite):
    """A child a `slow` (or Ray, sshd, engine) test left running is reaped, its CPU with it,
    whenever a later test starts a process: after such a test, the worker measures no more."""
    suite, env = small_suite
    (suite / "test_children.py").write_text(CHILDREN)
    done = run_suite(suite, {**env, "RAY_GCP_TESTS_CHILD_CPU_S": "0.4"}, "test_children.py",
                     "-k", "leaves_a_busy_child or after_it")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout
    assert "mark them slow" not in done.stdout, done.stdout


LONG = '''
import time

import pytest


@pytest.fixture(scope="module")
def started_once():
    time.sleep(1.2)  # a shared fixture's start counts for the test that starts it


def test_starts_the_long_fixture(started_once):
    pass


def test_shares_the_long_fixture(started_once):
    pass


@pytest.mark.slow
def test_takes_long_marked_slow():
    time.sleep(1.2)
'''


def test_a_test_over_the_line_with_its_fixtures_start_is_named_to_mark_slow(small_suite):
    """The time the JUnit report gives a test (set-up, call and teardown): the test that
    started the slow shared fixture is named, not the one that shared it, not one already
    marked `slow`."""
    suite, env = small_suite
    (suite / "test_long.py").write_text(LONG)
    done = run_suite(suite, {**env, "RAY_GCP_TESTS_SLOW_S": "1"}, "test_long.py")
    assert done.returncode == 0, done.stdout + done.stderr
    section = done.stdout.split("over 1 s without the slow marker")[1]
    named = re.findall(r"^ *[\d.]+ s (\S+)$", section, re.M)
    assert named == ["test_long.py::test_starts_the_long_fixture"], done.stdout


@pytest.mark.parametrize(("argv", "kind"), [
    (["/usr/sbin/sshd", "-D", "-e", "-f", "x"], "sshd"),
    (["/venv/bin/ray", "start", "--head"], "ray"),
    (["bash", "-c", "ray start --head --port=1"], "ray"),
    (["/venv/lib/ray/core/src/ray/gcs/gcs_server", "--log_dir=x"], "ray"),
    (["/root/.cache/ray-gcp-pulumi/engine/3.276.0/bin/pulumi", "up"], "engine"),
    (["/root/.cache/ray-gcp-pulumi/engine/3.276.0/bin/pulumi-resource-pulumi-python"],
     "engine"),
    (["python", "-m", "tests.support.engine_driver", "ws", "s", "up"], "engine"),
    (["python", "-m", "invoke", "status"], None),
    (["tests/fakes/standin_gcp/pulumi-resource-gcp"], None),
    (["ssh", "-p", "22", "host"], None),
])
def test_what_counts_as_starting_ray_sshd_or_the_engine(argv, kind):
    assert kind_of(argv) == kind

