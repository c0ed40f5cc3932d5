"""`python -m MODULE ARGS...` for tests, run as a fork of an interpreter that has already
imported the heavy third-party libraries (pulumi, pulumi-gcp's compute classes, grpc,
google-auth, pydantic, invoke), so each run skips the ~3 CPU-s a cold start spends importing
them: the suite starts a few hundred `invoke up` and engine-driver runs.

Each run is still a process of its own, as `subprocess.run` would start it: its own argv
(`sys.argv` as `-m` sets it), working folder (first on `sys.path`, as `-m` puts it), environment
(`os.environ` replaced whole, so what it starts inherits it), stdin/stdout/stderr, exit status
(a signal's as a negative number) and CPU time (added to `child_cpu_s`, which the suite's
fast-tier accounting reads beside its own children's). Nothing of this project is imported
before the fork: the project's modules load in the run, from its working folder, as in a cold
start. A run whose interpreter settings (`PYTHON*`, the locale) differ from the warm
interpreter's starts cold instead, through `subprocess.run`. Each run raises the
`subprocess.Popen` audit event a cold start would, so tests/support/spawn_watch.py still sees
what a test starts.

The server (`python tests/support/warm_python.py SOCKET`) is one per process that uses it (a
pytest worker, a benchmark run by a test), started on first use and stopped by `stop()`
(tests/conftest.py, before the session's leftover-process check; at exit otherwise); it also
ends when the process that started it is gone. Requests arrive over a Unix SOCK_SEQPACKET
socket: JSON with the run's stdio passed as file descriptors (SCM_RIGHTS); the reply is the
child's pid, then its exit status.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import hashlib
import io
import json
import os
import resource
import selectors
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

PRELOADED = ("pulumi", "pulumi.automation", "pulumi.dynamic", "pulumi.runtime", "grpc",
             "grpc.experimental.aio", "grpc_status.rpc_status", "google.api_core.exceptions",
             "google.auth", "google.auth.transport.requests", "google.oauth2.credentials",
             "requests", "yaml", "pydantic", "pydantic.main", "pydantic.json_schema",
             "pydantic._internal._generate_schema", "invoke", "paramiko", "tarfile", "zoneinfo")
"""Imported by the server before it forks: third-party libraries only (the project's own
modules must load from each run's working folder), with the parts of them that load on first
use (pydantic's model machinery, grpc's asyncio API) when a plan or an up uses them."""
PRELOADED_CLASSES = (("pulumi_gcp.compute", "Instance"), ("pulumi_gcp.storage", "Bucket"),
                     ("pulumi_gcp.serviceaccount", "Account"), ("pulumi_gcp.projects", "IAMMember"),
                     ("pulumi_gcp.tpu", "V2Vm"), ("pulumi_gcp.secretmanager", "Secret"),
                     ("pulumi_gcp.organizations", "get_project_output"))
"""pulumi-gcp loads a module's classes on first attribute access: one each loads it whole."""
INTERPRETER_SETTINGS = ("LANG", "LC_ALL", "LC_CTYPE")
"""Read once at interpreter start, with every PYTHON* variable: a run that sets them
differently cannot share the warm interpreter."""
MESSAGE_BYTES = 1 << 20
SOCKET_ENV = "RAY_GCP_TESTS_WARM_SOCKET"
"""Set in the engine's environment (`socket_env`): what the engine starts runs through this
process's warm interpreter: the language host double's program runs (`run_script_attached`),
the stand-in gcp plugin and the SDK's dynamic-provider plugin (`--attach`, `warm_engine_root`)."""
COLD_ENV = "RAY_GCP_TESTS_COLD"
"""Set to 1, every run starts cold (to measure what the warm interpreter saves, or to rule it
out)."""

child_cpu_s = 0.0
"""CPU-seconds of the warm runs this process waited for (their own children's included)."""

_server: _Server | None = None
_lock = threading.Lock()


def _settings(env: dict[str, str]) -> dict[str, str]:
    return {key: value for key, value in env.items()
            if key.startswith("PYTHON") or key in INTERPRETER_SETTINGS}


class _Server:
    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="warm-python-"))
        self.path = self.folder / "socket"
        self.settings = _settings(dict(os.environ))
        self.process = subprocess.Popen(
            [sys.executable, __file__, str(self.path)], cwd=self.folder,
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=(self.folder / "server.log").open("wb"))

    def ready(self) -> Path:
        """The socket's path, once the server listens on it (it appears then, renamed)."""
        deadline = time.monotonic() + 120
        while not self.path.exists():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the warm interpreter did not start: "
                                   + (self.folder / "server.log").read_text()[-2000:])
            time.sleep(0.05)
        return self.path

    def connect(self) -> socket.socket:
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        connection.connect(str(self.ready()))
        return connection

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


def stop() -> None:
    """Stop this process's warm interpreter, if one was started. Reaping it adds its CPU and
    its runs' to this process's children's: its runs' were counted in `child_cpu_s` already,
    so the whole is taken off there again."""
    global _server, child_cpu_s
    with _lock:
        if _server is not None:
            before = _reaped_cpu_s()
            _server.stop()
            child_cpu_s -= _reaped_cpu_s() - before
            _server = None


def _reaped_cpu_s() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def run_module(args: list[str], *, cwd: Path | str, env: dict[str, str] | None = None,
               input: str | None = None, timeout: float | None = None  # noqa: A002
               ) -> subprocess.CompletedProcess[str]:
    """`subprocess.run([sys.executable, "-m", *args], cwd=cwd, env=env, input=input,
    capture_output=True, text=True, timeout=timeout)`, on a warm interpreter when it can."""
    global child_cpu_s
    env = dict(os.environ if env is None else env)
    argv = [sys.executable, "-m", *args]
    server = _wanted_server()
    if server is None or _settings(env) != server.settings:
        return subprocess.run(argv, cwd=cwd, env=env, input=input, capture_output=True,
                              text=True, timeout=timeout, check=False)
    sys.audit("subprocess.Popen", sys.executable, argv, str(cwd), env)
    with contextlib.ExitStack() as files:
        stdin = files.enter_context(tempfile.TemporaryFile())
        stdout = files.enter_context(tempfile.TemporaryFile())
        stderr = files.enter_context(tempfile.TemporaryFile())
        stdin.write((input or "").encode())
        stdin.flush()
        stdin.seek(0)
        connection = files.enter_context(server.connect())
        request = {"module": args[0], "argv": args[1:], "cwd": str(Path(cwd).resolve()),
                   "env": env}
        socket.send_fds(connection, [json.dumps(request).encode()],
                        [stdin.fileno(), stdout.fileno(), stderr.fileno()])
        pid = json.loads(connection.recv(MESSAGE_BYTES))["pid"]
        connection.settimeout(timeout)
        try:
            ended = json.loads(connection.recv(MESSAGE_BYTES))
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            connection.settimeout(None)
            connection.recv(MESSAGE_BYTES)
            # bytes, as subprocess.run gives them with a timeout even under text=True
            raise subprocess.TimeoutExpired(argv, timeout or 0.0, _bytes(stdout),
                                            _bytes(stderr)) from None
        child_cpu_s += ended["cpu_s"]
        return subprocess.CompletedProcess(argv, ended["returncode"], _text(stdout),
                                           _text(stderr))


def _warm_server() -> _Server:
    """This process's server, started on first use."""
    global _server
    with _lock:
        if _server is None:
            _server = _Server()
            atexit.register(stop)
        return _server


def _wanted_server() -> _Server | None:
    """This process's server (started on first use), or None when runs are to start cold."""
    return None if os.environ.get(COLD_ENV) == "1" else _warm_server()


def socket_env() -> dict[str, str]:
    """The environment entry that lets the processes a test starts (and theirs) reach this
    process's warm interpreter; none when runs are to start cold."""
    server = _wanted_server()
    return {} if server is None else {SOCKET_ENV: str(server.ready())}


DYNAMIC_PLUGIN = "pulumi-resource-pulumi-python"
DYNAMIC_RUN = "-u -m pulumi.dynamic $@"
"""How the SDK's dynamic-provider plugin script runs the provider, in both of its branches
(the virtualenv's python, else PULUMI_PYTHON_CMD's)."""


def warm_engine_root(bin_dir: Path) -> Path | None:
    """An install of the engine in `bin_dir` (`<cache>/ray-gcp-pulumi/engine/<version>/bin`,
    as `invoke engine` lays it out) whose dynamic-provider plugin runs warm: `<folder>/cache/
    ray-gcp-pulumi/engine/<version>` in this process's server folder, the same layout under a
    cache folder of its own (pass its `parents[2]` as XDG_CACHE_HOME, ops.engine.cache_root).
    Its `bin/pulumi` is the engine, hard-linked; its `bin/pulumi-resource-pulumi-python` is the
    SDK's script word for word but for the one command that runs `python -u -m pulumi.dynamic`,
    which runs it through `--attach` (forked from this process's warm interpreter, else cold,
    as written): the SDK's choice of interpreter, its PATH and its refusals stay theirs. The
    cache's other entries (plans' keys, the stand-in's schemas) are the real cache's, linked.

    Both ways the engine runs find that script first: the Automation API (every `invoke`
    task) puts the folder of the CLI it runs first on PATH (pulumi/automation/_cmd.py), and the
    engine takes the plugin beside its own path, symlinks resolved, when none on PATH comes
    before it (pulumi/sdk/go/common/workspace/plugins.go): a hard link is that path, so nothing
    warns of a plugin "from $PATH". Where the server's folder is on another file system than
    `bin_dir`, the engine is symlinked instead: the script first on PATH still runs, and the
    engine warns that it is not the one beside it. None when runs are to start cold, or when
    `bin_dir` is not laid out so."""
    server = _wanted_server()
    if server is None:
        return None
    bin_dir = bin_dir.resolve()
    version_dir = bin_dir.parent
    tool_cache = version_dir.parent.parent
    if (bin_dir.name, version_dir.parent.name, tool_cache.name) != (
            "bin", "engine", "ray-gcp-pulumi"):
        return None
    named = hashlib.sha256(str(bin_dir).encode()).hexdigest()[:16]
    cache = server.folder / "engines" / named / "cache" / tool_cache.name
    root = cache / "engine" / version_dir.name
    if (root / "bin" / DYNAMIC_PLUGIN).exists():
        return root
    script = (bin_dir / DYNAMIC_PLUGIN).read_text()
    if script.count(DYNAMIC_RUN) != 2:
        raise RuntimeError(f"{bin_dir / DYNAMIC_PLUGIN} no longer runs `python {DYNAMIC_RUN}` "
                           "in its two branches: tests/support/warm_python.py must follow it")
    partial = Path(tempfile.mkdtemp(prefix="engine-", dir=server.folder))
    for entry in bin_dir.iterdir():
        if entry.name != DYNAMIC_PLUGIN:
            try:
                os.link(entry, partial / entry.name)
            except OSError:  # another file system: the engine then warns, as said above
                (partial / entry.name).symlink_to(entry)
    attached = f"-I -S {shlex.quote(__file__)} --attach pulumi.dynamic $@"
    launcher = partial / DYNAMIC_PLUGIN
    launcher.write_text(script.replace(DYNAMIC_RUN, attached))
    launcher.chmod(0o755)
    root.mkdir(parents=True, exist_ok=True)
    # Plans keep their stack's key there (ops.review.plan_engine.plan_secret): one for the
    # plans this process makes and those of the runs it starts, made now if none made it yet.
    (tool_cache / "plans").mkdir(mode=0o700, exist_ok=True)
    for entry in tool_cache.iterdir():
        if entry.name != "engine" and not os.path.lexists(cache / entry.name):
            (cache / entry.name).symlink_to(entry)
    try:
        partial.rename(root / "bin")  # whole or absent, for an engine looking at the same time
    except OSError:  # another thread's is in place
        shutil.rmtree(partial, ignore_errors=True)
    return root


def run_script_attached(python: str, script: str, args: list[str], *, cwd: str,
                        env: dict[str, str]) -> int | None:
    """`subprocess.run([python, "-u", script, *args], cwd=cwd, env=env).returncode` with this
    process's own stdin, stdout and stderr, forked from the warm interpreter `env` names; None
    when it cannot be (no warm interpreter named, or `python` is another environment or its
    settings differ: the caller starts it cold). The run is killed if this process ends first,
    as a child in its process group would be by the signal that ended it."""
    return _attached_run(env.get(SOCKET_ENV, ""), {
        "script": script, "argv": args, "cwd": str(Path(cwd).resolve()), "env": env,
        "python": python, "unbuffered": True})


def _attached_run(path: str, request: dict[str, Any],
                  started: Callable[[int], None] = lambda pid: None) -> int | None:
    """`request` run by the server at `path` on this process's stdin, stdout and stderr (the
    server kills it if this process ends first; `started` gets its pid): its exit status, or
    None when no server answers there or it leaves the run to start cold."""
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with connection:
        try:
            connection.connect(path)
        except OSError:
            return None
        socket.send_fds(connection, [json.dumps(request).encode()], [0, 1, 2])
        reply = json.loads(connection.recv(MESSAGE_BYTES))
        if "pid" not in reply:
            return None
        started(reply["pid"])
        return int(json.loads(connection.recv(MESSAGE_BYTES))["returncode"])


def _bytes(captured: Any) -> bytes:
    captured.seek(0)
    return captured.read()


def _text(captured: Any) -> str:
    """What the run wrote, as `text=True` gives it (universal newlines)."""
    return _bytes(captured).decode().replace("\r\n", "\n").replace("\r", "\n")


# The server side: runs as a script, so that no package of the project is imported in it.

def _preload() -> None:
    import importlib

    for name in PRELOADED:
        importlib.import_module(name)
    for module, attribute in PRELOADED_CLASSES:
        getattr(importlib.import_module(module), attribute)
    if threading.active_count() != 1 or len(os.listdir("/proc/self/task")) != 1:
        raise RuntimeError("a preloaded library started a thread: forking would be unsafe")
    gc.freeze()  # out of every run's collections, and out of its interpreter's teardown


def _become(request: dict[str, Any], fds: list[int]) -> None:
    """In the forked child: take the run's stdio, folder, environment and argv, then run the
    module as `-m` does (`runpy._run_module_as_main` is the function the interpreter's `-m`
    calls), or the script as `python SCRIPT` does. Never returns: the module's exit (or a final
    SystemExit) ends the interpreter the normal way (atexit handlers, thread joins, flushed
    stdio)."""
    import setproctitle

    # The command line a cold start would show (/proc, `ps`, a fake that records its caller),
    # set while the process's own environment block is still whole (setproctitle needs it).
    python = request.get("python") or sys.executable
    flags = ["-u"] if request.get("unbuffered") else []
    started = [request["script"]] if "script" in request else ["-m", request["module"]]
    setproctitle.setproctitle(" ".join([python, *flags, *started, *request["argv"]]))
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    if request.get("unbuffered"):  # `-u`: stdout and stderr written through, unbuffered
        sys.stdout, sys.stderr = (
            io.TextIOWrapper(io.FileIO(fd, "w", closefd=False), encoding=stream.encoding,
                             errors=stream.errors, write_through=True)
            for fd, stream in ((1, sys.stdout), (2, sys.stderr)))
    sys.executable = python
    import importlib.machinery
    import runpy
    import types

    # A fresh __main__ (and multiprocessing's alias of it), then what `-m` itself calls, or
    # what `python SCRIPT` does: the script's code in __main__, its folder first on sys.path.
    main = types.ModuleType("__main__")
    sys.modules["__main__"] = main
    if "__mp_main__" in sys.modules:
        sys.modules["__mp_main__"] = main
    if "script" in request:
        script = request["script"]
        sys.path[0] = os.path.dirname(os.path.realpath(script))
        sys.argv = [script, *request["argv"]]
        main.__file__, main.__cached__ = script, None
        main.__loader__ = importlib.machinery.SourceFileLoader("__main__", script)
        with open(script, "rb") as source:
            exec(compile(source.read(), script, "exec"), main.__dict__)  # noqa: S102
        sys.exit(0)
    sys.path[0] = request["cwd"]
    sys.argv = [request["module"], *request["argv"]]
    runpy._run_module_as_main(request["module"])  # type: ignore[attr-defined]  # noqa: SLF001
    sys.exit(0)


def _same_interpreter(request: dict[str, Any]) -> bool:
    """A run that names its interpreter (`run_script_attached`) is forked only when that is
    this environment's (its virtualenv, through any link to it) with the same settings."""
    if "python" not in request:
        return True
    venv = os.path.dirname(os.path.dirname(request["python"]))
    return (os.path.realpath(venv) == os.path.realpath(sys.prefix)
            and _settings(request["env"]) == _settings(dict(os.environ)))


def _serve(path: str) -> None:
    parent = os.getppid()
    _preload()
    me = os.getpid()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(path + ".binding")
    listener.listen(64)
    os.rename(path + ".binding", path)  # the path appears once connecting to it works
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    running: dict[int, socket.socket] = {}  # child pid -> its client's connection
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        while os.getppid() == parent:  # a client that ended without `stop()` ends it too
            for key, _ in selector.select(timeout=0.05):
                if key.fileobj is not listener:  # a client: its run ends with it
                    pid = key.data
                    with contextlib.suppress(OSError):
                        if key.fileobj.recv(MESSAGE_BYTES) == b"":
                            selector.unregister(key.fileobj)
                            os.kill(pid, signal.SIGKILL)
                    continue
                connection, _ = listener.accept()
                message, fds, _, _ = socket.recv_fds(connection, MESSAGE_BYTES, 3)
                request = json.loads(message)
                if not _same_interpreter(request):
                    for fd in fds:
                        os.close(fd)
                    with connection:
                        connection.sendall(json.dumps({"cold": True}).encode())
                    continue
                sys.stdout.flush()
                sys.stderr.flush()
                pid = os.fork()
                if pid == 0:
                    selector.close()
                    listener.close()
                    connection.close()
                    for other in running.values():
                        other.close()
                    _become(request, fds)
                for fd in fds:
                    os.close(fd)
                connection.sendall(json.dumps({"pid": pid}).encode())
                running[pid] = connection
                selector.register(connection, selectors.EVENT_READ, pid)
            for pid, connection in list(running.items()):
                done, status, usage = os.wait4(pid, os.WNOHANG)
                if done == 0:
                    continue
                del running[pid]
                with contextlib.suppress(KeyError, ValueError):
                    selector.unregister(connection)
                with contextlib.suppress(OSError), connection:
                    connection.sendall(json.dumps({
                        "returncode": os.waitstatus_to_exitcode(status),
                        "cpu_s": usage.ru_utime + usage.ru_stime}).encode())
    finally:
        if os.getpid() == me:
            for pid in running:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            shutil.rmtree(os.path.dirname(path), ignore_errors=True)


def _attach(module: str, args: list[str]) -> NoReturn:
    """`python warm_python.py --attach MODULE ARGS...`, run by a launcher the engine starts (the
    stand-in gcp plugin's): this process stands for `python -u -m MODULE ARGS...` forked from
    the warm interpreter SOCKET_ENV names, on this process's stdio, folder and environment. It
    passes SIGINT and SIGTERM on (the engine interrupts a plugin's process group before it
    kills it), ends with the run's status, and the run is killed if this process is; where the
    run cannot be forked (no warm interpreter, another environment, other settings) it becomes
    the cold run itself."""
    def passing_signals_on(pid: int) -> None:
        for passed in (signal.SIGINT, signal.SIGTERM):
            signal.signal(passed, lambda number, _: os.kill(pid, number))

    code = _attached_run(os.environ.get(SOCKET_ENV, ""), {
        "module": module, "argv": args, "cwd": os.getcwd(), "env": dict(os.environ),
        "python": sys.executable, "unbuffered": True}, passing_signals_on)
    if code is None:
        os.execv(sys.executable, [sys.executable, "-u", "-m", module, *args])
    if code < 0:  # ended by a signal: so is this process, as the run's parent sees it
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    sys.exit(code)


if __name__ == "__main__":
    if sys.argv[1] == "--attach":
        _attach(sys.argv[2], sys.argv[3:])
    _serve(sys.argv[1])
