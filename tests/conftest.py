"""Shared test set-up: every test runs from the project root with no pulumi stack selected and
the state folder of its own worker (never the checkout's `.ray-gcp/`).

The tiers. A test that needs a real Ray, a real sshd or the pinned pulumi engine gets it from
a fixture, and the fixture marks it (`pytest_collection_modifyitems` below): `ray_head` and
`ray_processes` mark `ray`, `sshd`, `home_stack` and `local_sshd` mark `sshd`, `engine_bin`
marks `engine` (and so does every fixture built on them, such as `stack`). The fast tier is
`-m "not ray and not sshd and not engine and not slow"`; `slow` (a test over 60 s, its set-up
and teardown included, or one whose own processes take over 5 CPU-seconds) is set by hand
where the test is, and the session names each unmarked test over either line. A test that
starts ray, sshd or the engine without its marker fails (`_started_only_what_it_says`).

The workers (`-n N --dist loadgroup`, as .ci/run runs it): the tests marked `ray` all run on
one worker, one Ray at a time (two Ray clusters starting at once on a loaded 2-core machine
miss Ray's own 30 s startup wait); any other test using a module-scoped fixture (a planned set
of stacks, an engine workspace) is grouped with the rest of its module on one worker, so the
fixture starts once; session fixtures (the sshd) start once per worker. Ports are free ones
taken at start, temp folders per test or per worker.

`engine_bin` is the pinned pulumi engine `invoke engine` installed; `engine_env` the
environment that keeps such a test to itself (its own PULUMI_HOME, a file backend and a
passphrase in a temp dir, no update check, no plugin download). At the session's end, a
process the session started and left running fails it (`_no_process_left_behind`)."""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.compute.identity import signed_in_user
from tests.fakes.standin_gcp import schema as standin_schema
from tests.support import warm_python
from tests.support.leftover_processes import leftover_processes
from tests.support.spawn_watch import SpawnWatch

pytest_plugins = ["tests.support.sshd_fixture", "tests.support.local_ray_head"]

PROJECT_ROOT = Path(__file__).resolve().parents[1]
# gRPC's fork support off for the session and every process it starts, before any test imports
# grpc (nothing above does). grpcio >= 1.81 restarts its poller in a forked child; a child that
# closes its descriptors before exec, as pexpect's pty fork does, can then die on EBADF before it
# runs anything (grpc/grpc#43055, open: "fails with epoll EBADF after subprocess.Popen"; the
# workaround named since grpc/grpc#13873). A `pexpect.spawn` of `invoke attach` from a worker
# whose earlier tests had used grpc got EOF and gRPC's "epoll_wait error: Bad file descriptor".
# The tests' forks all exec at once (or, tests/support/other_user.py, never touch gRPC).
os.environ["GRPC_ENABLE_FORK_SUPPORT"] = "false"
# A suite started in the background by a shell without job control (`pytest ... &` in a
# script) inherits SIGINT ignored, and so would every process it starts: the tests that press
# Ctrl-C (`invoke dashboard`, a lock wait, a run killed half way) met tasks that could not hear
# it. Python's own handler here gives the processes started after it SIGINT's default, as a
# terminal gives them.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
# The stand-in gcp plugin keeps the shapes it reads from pulumi-gcp's input types in the cache
# of the user running the suite, whatever HOME a test gives its processes: a test of a Ray user
# with a home of their own (tests/support/adoption.py) had each first stand-in import pulumi_gcp
# to read them again (2 CPU-s).
os.environ.setdefault(standin_schema.CACHE_ENV, str(standin_schema.default_cache()))
ENGINE_PASSPHRASE = "engine-tests-passphrase"

# marker -> the fixtures that start what it names (a test using one, even through another
# fixture, carries the marker)
NEEDS = {
    "ray": ("ray_head", "ray_processes"),
    "sshd": ("sshd", "home_stack", "local_sshd"),
    "engine": ("engine_bin",),
}
# A test over this many seconds, its set-up and teardown included, carries `slow`, outside the
# fast tier.
SLOW_S = float(os.environ.get("RAY_GCP_TESTS_SLOW_S", "60"))
# A fast-tier test whose own child processes (a CLI run of the tool, a planner interpreter, a
# node's script) take over this many CPU-seconds, its shared fixture's included, carries
# `slow` too: the fast tier is the inner loop.
CHILD_CPU_S = float(os.environ.get("RAY_GCP_TESTS_CHILD_CPU_S", "5"))
_WATCH = SpawnWatch()


@pytest.hookimpl(tryfirst=True)  # before `-m` selects and xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        names = set(item.fixturenames)
        for marker, fixtures in NEEDS.items():
            if names.intersection(fixtures):
                item.add_marker(marker)
        if item.get_closest_marker("xdist_group"):
            pass
        elif item.get_closest_marker("ray"):
            item.add_marker(pytest.mark.xdist_group("ray"))  # one Ray at a time
        elif _uses_module_fixture(item):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))
        if config.getoption("dist", "no") == "loadgroup" or getattr(config.option, "loadgroup",
                                                                      False):
            _group_in_nodeid(item)
    _longest_first(items)


# What a test costs, roughly, by its markers (seconds on the loaded 2-core machine): the
# scheduler hands out work in collection order, so the long groups start first and the short
# tests fill the workers' gaps at the end instead of a long test starting last.
COST_S = {"slow": 90.0, "engine": 40.0, "ray": 10.0, "sshd": 4.0}


def _cost(item: pytest.Item) -> float:
    return max([cost for marker, cost in COST_S.items() if item.get_closest_marker(marker)],
               default=0.5)


def _longest_first(items: list[pytest.Item]) -> None:
    """Sort the tests by their group's (xdist scope's) estimated cost, longest first; the
    order within a group, and among equal costs, stays the collection's."""
    def scope(item: pytest.Item) -> str:
        groups = sorted(str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
                        for mark in item.iter_markers("xdist_group"))
        return "_".join(groups) or item.nodeid

    totals: dict[str, float] = {}
    first: dict[str, int] = {}
    for index, item in enumerate(items):
        totals[scope(item)] = totals.get(scope(item), 0.0) + _cost(item)
        first.setdefault(scope(item), index)
    items.sort(key=lambda item: (-totals[scope(item)], first[scope(item)]))


def pytest_configure(config: pytest.Config) -> None:
    """xdist's loadgroup hands out groups by their number of tests unless told to keep the
    collection's order, which `_longest_first` made: cost, not count, decides."""
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def _group_in_nodeid(item: pytest.Item) -> None:
    """`test@group`, the form xdist's loadgroup scheduler groups by. xdist 3.8 writes it to
    `item._nodeid`, which pytest 9.2's structured node ids no longer read, so every test went
    to any worker (pytest-dev/pytest-xdist#1386): written here into the id pytest reads."""
    groups = sorted({str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
                     for mark in item.iter_markers("xdist_group")})
    if not groups or "@" in item.nodeid.rsplit("]", 1)[-1] or not hasattr(item, "_id"):
        return
    from _pytest.nodeid import NodeId

    item._id = NodeId.parse(f"{item.nodeid}@{'_'.join(groups)}")


def _uses_module_fixture(item: pytest.Item) -> bool:
    """Whether a fixture of the test lives for its module (or class): its tests share it."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    return any(definitions[-1].scope in ("module", "class", "package")
               for name, definitions in info.name2fixturedefs.items()
               if definitions and name in item.fixturenames)


_CHILD_CPU_AT = pytest.StashKey[float]()
_OUT_OF_THE_FAST_TIER = ("ray", "sshd", "engine", "slow")
_HEAVY_RAN = False
"""Whether this worker has run an out-of-tier test: a process one of them left behind may be
reaped (and its CPU counted) during any later test, so after one, none is measured."""


def _children_cpu_s() -> float:
    """CPU-seconds of this process's children that have been waited for, the runs forked
    for it by its warm interpreter (tests/support/warm_python.py) included."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime + warm_python.child_cpu_s


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    global _HEAVY_RAN
    _WATCH.begin()
    if not _HEAVY_RAN:
        item.stash[_CHILD_CPU_AT] = _children_cpu_s()
    try:
        return (yield)
    finally:
        _WATCH.end()
        if any(item.get_closest_marker(marker) for marker in _OUT_OF_THE_FAST_TIER):
            _HEAVY_RAN = True


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]
                              ) -> Iterator[pytest.TestReport]:
    """The teardown's report carries the CPU its test's child processes took (to the
    controller too, under xdist), measured until the worker first runs an out-of-tier test:
    `pytest_runtest_logreport` names the fast-tier ones over CHILD_CPU_S."""
    report = yield
    if call.when == "teardown" and _CHILD_CPU_AT in item.stash:
        report.user_properties.append(
            ("child_cpu_s", _children_cpu_s() - item.stash[_CHILD_CPU_AT]))
    return report


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    """Fail a test that started ray, an sshd or the engine without carrying the marker its
    fixture gives (it would run in the fast tier, which promises none of them)."""
    result = yield
    started = _WATCH.started()
    unmarked = sorted(kind for kind in started if item.get_closest_marker(kind) is None)
    if unmarked:
        needed = "; ".join(f"{kind} ({started[kind]}): use one of the fixtures "
                           f"{', '.join(NEEDS[kind])}" for kind in unmarked)
        pytest.fail(f"{item.nodeid} started what its markers do not say: {needed}",
                    pytrace=False)
    return result


_SPENT: dict[str, float] = {}  # nodeid -> seconds of its phases so far
_DURATIONS: dict[str, float] = {}
_CHILD_CPU: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # A test's time is its set-up, call and teardown together, as the JUnit report gives it:
    # a shared fixture's start counts for the test that starts it.
    spent = _SPENT[report.nodeid] = _SPENT.get(report.nodeid, 0.0) + report.duration
    if report.when != "teardown":
        return
    del _SPENT[report.nodeid]
    if spent > SLOW_S and "slow" not in report.keywords:
        _DURATIONS[report.nodeid] = spent
    child_cpu_s = dict(report.user_properties).get("child_cpu_s", 0.0)
    if child_cpu_s > CHILD_CPU_S and not any(m in report.keywords for m in _OUT_OF_THE_FAST_TIER):
        _CHILD_CPU[report.nodeid] = child_cpu_s


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for title, unit, found in (
            (f"over {SLOW_S:g} s without the slow marker", "s", _DURATIONS),
            (f"fast-tier tests whose processes took over {CHILD_CPU_S:g} CPU-s: mark them slow",
             "CPU-s", _CHILD_CPU)):
        if found:
            terminalreporter.section(title)
            for nodeid, seconds in sorted(found.items(), key=lambda entry: -entry[1]):
                terminalreporter.write_line(f"{seconds:6.1f} {unit} {nodeid}")


@pytest.fixture(scope="session")
def _worker_state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This worker's state folder ($RAY_GCP_STATE_DIR): the local-cluster records, stacks'
    keys and pins of one worker never meet another's (or the checkout's `.ray-gcp/`)."""
    return tmp_path_factory.mktemp("ray-gcp-state")


@pytest.fixture(autouse=True)
def _project_root_cwd(monkeypatch: pytest.MonkeyPatch, _worker_state: Path) -> None:
    monkeypatch.chdir(PROJECT_ROOT)
    monkeypatch.delenv("PULUMI_STACK", raising=False)
    monkeypatch.setenv("RAY_GCP_STATE_DIR", str(_worker_state))


@pytest.fixture(scope="session", autouse=True)
def _user_credentials(_no_process_left_behind: None) -> Iterator[None]:
    """The user's own Google credentials, as `gcloud auth application-default login` leaves
    them for a workforce user (GOOGLE_APPLICATION_CREDENTIALS), refreshing at a fake
    OAuth endpoint: every call the product makes to the fake APIs (tests/fakes/compute)
    presents the user's identity, which the fakes check (tests/fakes/compute/identity.py)."""
    with signed_in_user():
        yield


@pytest.fixture(scope="session")
def engine_bin() -> Path:
    """The bin folder of the pinned engine (marks the test `engine`). Missing, the test
    fails under CI=true (CI runs `invoke engine` first: a missing engine there is a broken
    CI) and is skipped elsewhere."""
    from tests.support.engine_stack import require_engine

    return require_engine()


@pytest.fixture
def engine_env(engine_bin: Path, tmp_path: Path) -> dict[str, str]:
    """Environment variables for the engine (pass as the Automation API's `env_vars`, or
    over os.environ to a CLI subprocess): everything it writes goes under `tmp_path`."""
    home, state = tmp_path / "pulumi-home", tmp_path / "state"
    home.mkdir()
    state.mkdir()
    return {
        "PULUMI_HOME": str(home),
        "PULUMI_BACKEND_URL": state.as_uri(),
        "PULUMI_CONFIG_PASSPHRASE": ENGINE_PASSPHRASE,
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
    }


@pytest.fixture(scope="session")
def ray_processes() -> str:
    """For a test that starts Ray itself (a local cluster, Ray's monitor, `ray start`): the
    `ray` command of this environment; marks the test `ray`."""
    from tests.support.tools import env_tool

    return env_tool("ray")


@pytest.fixture(scope="session", autouse=True)
def _no_process_left_behind(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Set up first, so torn down last (after the sshd and other session fixtures): the
    session fails if a process it started is still running (a head's watchers or autostop
    daemon, a server a test forgot), naming each; they are ended so the next run starts
    clean."""
    yield
    basetemp = tmp_path_factory.getbasetemp()
    deadline = time.monotonic() + 10  # a SIGTERM just sent takes a moment to land
    while (left := leftover_processes(basetemp)) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid in left:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    assert not left, "the test session left these processes running: " + "; ".join(
        f"pid {pid}: {command[:200]}" for pid, command in left.items())


@pytest.fixture(scope="session", autouse=True)
def _warm_python_stopped(_no_process_left_behind: None) -> Iterator[None]:
    """The worker's warm interpreter (started on first use) ends before the session looks
    for processes left behind."""
    yield
    warm_python.stop()


sys.addaudithook(_WATCH.audit)
