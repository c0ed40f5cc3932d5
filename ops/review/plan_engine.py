"""Run the real Pulumi program offline under a recording mock engine.

No pulumi CLI and no cloud: `pulumi.runtime.set_mocks` stands in for the engine, answers the
program's look-ups with plausible values, and records every resource the program registers
(type token, logical name, parent, inputs with secrets masked) plus the stack's exports.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import hashlib
import logging
import os
import pickle
import secrets
import tempfile
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
from google.protobuf import struct_pb2
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import rpc
from pulumi.runtime.settings import SETTINGS, get_root_resource, set_root_resource
from pulumi.runtime.stack import run_pulumi_func
from pulumi.runtime.sync_await import _sync_await

from infra.dynamic_types import DYNAMIC_TYPES, STACK_SECRET_TYPE
from infra.stack_secret import ARCHIVE_KEY_PURPOSE
from model.stack_config import STATE_DIR_ENV, writable_folder
from ops.engine import cache_root
from ops.errors import OpsError
from ops.paths import open_no_follow

SECRET_MASK = "[secret]"
KNOWN_AFTER_UP = "[known after up]"
PLAN_SECRET_FILE = "plan-secret"
PLANNED_PRIVATE_KEY = "planned-private-key"  # the generated key's stand-in in a plan
PROJECT_NAME = "ray-gcp"


@dataclass
class RecordedResource:
    type: str
    name: str
    parent: str | None
    inputs: dict[str, Any]
    custom: bool
    dependencies: list[str] = field(default_factory=list)
    aliases: list[dict[str, str]] = field(default_factory=list)
    """Earlier identities, `{"type": ..., "name": ...}` (a rename, or a type of its own)."""
    urn: str = ""


@dataclass
class ProgramRun:
    resources: list[RecordedResource] = field(default_factory=list)
    outputs: dict[str, Any] = field(default_factory=dict)
    urns: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    """What the program said with `pulumi.log.warn` (an engine shows it as a diagnostic), once
    each, in order: the plan shows them, nothing prints them to stderr."""

    def of_type(self, type_token: str) -> list[RecordedResource]:
        return [r for r in self.resources if r.type == type_token]

    def named(self, name: str) -> RecordedResource:
        return next(r for r in self.resources if r.name == name)


def _mask_secrets(value: Any) -> Any:
    if isinstance(value, dict):
        if value.get(rpc._special_sig_key) == rpc._special_secret_sig:
            return SECRET_MASK
        return {k: _mask_secrets(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_mask_secrets(v) for v in value]
    return value


def _recorded(value: Any) -> Any:
    """A serialized input as plain values, each secret masked where it is marked. (Pulumi's
    `deserialize_properties` pushes a nested secret's mark up to its whole mapping or list:
    one secret metadata entry would hide all of the head's metadata.)"""
    if isinstance(value, struct_pb2.Struct):
        if rpc._special_sig_key in value:
            if value[rpc._special_sig_key] == rpc._special_secret_sig:
                return SECRET_MASK
            return _asset_shown(_mask_secrets(rpc.deserialize_properties(value)))
        items = {key: _recorded(item) for key, item in value.items()}
        return {key: item for key, item in items.items() if item is not None}
    if isinstance(value, struct_pb2.ListValue):
        return [_recorded(item) for item in value]
    return _known_after_up(rpc.deserialize_property(value))


def _known_after_up(value: Any) -> Any:
    """A value a plan cannot know (another stack's output: ray-gcp:networkStack) as the text
    a reader sees, in place of pulumi's Unknown, at any depth."""
    if isinstance(value, pulumi.output.Unknown):
        return KNOWN_AFTER_UP
    if isinstance(value, dict):
        return {key: _known_after_up(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_known_after_up(item) for item in value]
    return value


def _asset_shown(value: Any) -> Any:
    """An asset as a reviewer reads it: a text asset (the head's autoscaler config) as its
    text, a file asset (the file_mounts archive, named by its content's HMAC under the stack's
    plan secret, `plan_secret`) by its file name; anything else (a resource reference) as it
    is."""
    if isinstance(value, pulumi.StringAsset):
        return value.text
    if isinstance(value, pulumi.FileAsset):
        return f"[file {Path(value.path).name}]"
    return value


def _unwrap(value: Any) -> Any:
    if isinstance(value, dict):
        if value.get(rpc._special_sig_key) == rpc._special_secret_sig:
            return _unwrap(value["value"])
        return {k: _unwrap(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unwrap(v) for v in value]
    return value


def _fake_ip(seed: str, prefix: str) -> str:
    digest = hashlib.sha256(seed.encode()).digest()
    return f"{prefix}.{digest[0] % 250 + 2}.{digest[1] % 250 + 2}"


def plan_secret(stack: str) -> str:
    """The stack's random secret as plans on this machine know it: made once, kept 0600 in
    this machine's cache (`~/.cache/ray-gcp-pulumi/plans/<stack>/plan-secret`, under
    $XDG_CACHE_HOME when set; a plan writes nothing into the stack's state folder), never in
    a plan. The real one is in the stack's Pulumi state, which a plan does not read; this one
    keys the file_mounts archive's name in plans the same way, so two plans of a stack here
    (the base and the head of `invoke diff`) name the same files alike and changed files
    differently, and a published plan lets nobody test guesses of a secret file's content."""
    folder = writable_folder(cache_root() / "plans" / stack)
    path = folder / PLAN_SECRET_FILE
    if not os.path.lexists(path):
        # Written whole, then linked into place: the two sides of `invoke diff` start at once,
        # and neither may read a file the other has created but not yet written.
        partial = path.with_name(f"{PLAN_SECRET_FILE}.{os.getpid()}")
        with open_no_follow(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC) as handle:
            handle.write(secrets.token_hex(32).encode())
        try:
            os.link(partial, path)
        except FileExistsError:
            pass  # the other side's is in place: both use it
        finally:
            partial.unlink(missing_ok=True)
    with open_no_follow(path, os.O_RDONLY) as handle:
        value = handle.read().decode().strip()
    if len(value) < 32:
        raise OpsError(f"{path} holds no key: delete it and plan again")
    return value


@contextlib.contextmanager
def _scratch_state() -> Iterator[None]:
    """What the program stores for the engine (the file_mounts archive it uploads, under the
    state folder: infra.bucket.stored_archive) goes to a temporary folder while a plan runs,
    removed after it: a plan names the archive, it keeps nothing."""
    saved = os.environ.get(STATE_DIR_ENV)
    with tempfile.TemporaryDirectory(prefix="ray-gcp-plan-") as scratch:
        os.environ[STATE_DIR_ENV] = scratch
        try:
            yield
        finally:
            if saved is None:
                os.environ.pop(STATE_DIR_ENV, None)
            else:
                os.environ[STATE_DIR_ENV] = saved


class RecordingMocks(pulumi.runtime.Mocks):
    """Answers like GCP would, deterministically, so two runs record the same plan."""

    def __init__(self, run: ProgramRun, stack: str = "plan") -> None:
        self.run = run
        self.stack = stack
        self.names: dict[str, str] = {}

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict]:
        inputs = _unwrap(args.inputs)
        state = dict(inputs)
        if args.typ == "pulumi:pulumi:StackReference":
            # Another stack's outputs (ray-gcp:networkStack) are not read offline: a plan
            # shows them as known only after `pulumi up`.
            return str(inputs["name"]), {**inputs, "outputs": rpc.UNKNOWN,
                                         "secretOutputNames": []}
        if args.typ == "gcp:serviceaccount/account:Account":
            state["email"] = f"{inputs['accountId']}@{inputs['project']}.iam.gserviceaccount.com"
        elif args.typ == "gcp:compute/instance:Instance":
            state["currentStatus"] = "RUNNING"
            # Unknown (not a list) while a network stack's outputs are (above): so it stays.
            state["networkInterfaces"] = inputs.get("networkInterfaces") if not isinstance(
                inputs.get("networkInterfaces"), list) else [
                {
                    **nic,
                    "networkIp": _fake_ip(args.name, "10.128"),
                    "accessConfigs": [
                        {**a, "natIp": _fake_ip(args.name, "203.0")}
                        for a in nic.get("accessConfigs", [])
                    ],
                }
                for nic in inputs["networkInterfaces"]
            ]
        elif args.typ == "gcp:tpu/v2Vm:V2Vm":
            external = (inputs.get("networkConfig") or {}).get("enableExternalIps")
            state["state"] = "READY"
            state["networkEndpoints"] = [
                {
                    "ipAddress": _fake_ip(args.name, "10.130"),
                    "accessConfigs": [{"externalIp": _fake_ip(args.name, "198.51")}]
                    if external
                    else [],
                }
            ]
        elif args.typ == "gcp:compute/disk:Disk":
            state["selfLink"] = (
                f"projects/{inputs['project']}/zones/{inputs['zone']}/disks/{inputs['name']}"
            )
        elif args.typ == "gcp:secretmanager/secret:Secret":
            secret_path = f"projects/{inputs['project']}/secrets/{inputs['secretId']}"
            return secret_path, {**state, "name": secret_path}
        elif args.typ == "gcp:secretmanager/secretVersion:SecretVersion":
            state["name"] = f"{inputs['secret']}/versions/1"
        elif args.typ == STACK_SECRET_TYPE:
            # Only the archive's key shows in a plan, through the names it keys: it is this
            # stack's, kept on this machine. Any other (Ray's token) shows only as a secret,
            # so a plan makes and keeps nothing for it.
            keyed = inputs.get("purpose") == ARCHIVE_KEY_PURPOSE
            state = {**inputs, "value": plan_secret(self.stack) if keyed else "0" * 64}
        elif args.typ in DYNAMIC_TYPES:
            state = self._dynamic(args.name, inputs)
        return f"{args.name}-id", state

    @staticmethod
    def _dynamic(name: str, inputs: dict[str, Any]) -> dict[str, Any]:
        if "comment" in inputs:  # the generated SSH key pair
            return {
                **inputs,
                "public_key": f"ssh-ed25519 AAAAplanned{name} {inputs['comment']}",
                "private_key": PLANNED_PRIVATE_KEY,
            }
        if "wait_minutes" in inputs:  # a queued TPU slice, once GCP has filled it
            return {
                **inputs,
                "queued_state": "ACTIVE",
                "status": "READY",
                "internal_ip": _fake_ip(name, "10.130"),
                "external_ip": _fake_ip(name, "198.51"),
            }
        prefix = inputs.get("name_prefix", name)
        count = int(inputs.get("count") or 0)
        names = [
            f"{prefix}-{hashlib.sha256(f'{name}{i}'.encode()).hexdigest()[:8]}-compute"
            for i in range(count)
        ]
        instances = [
            {
                "name": n,
                "internal_ip": _fake_ip(n, "10.128"),
                "external_ip": None,
                "status": "RUNNING",
            }
            for n in names
        ]
        return {**inputs, "instance_names": names, "instances": instances}

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict, list] | dict:
        token, a = args.token, _unwrap(args.args)
        if token == "gcp:organizations/getProject:getProject":
            return {"projectId": a.get("projectId"), "number": "123456789012", "name": "p"}
        if token == "gcp:compute/getSubnetworks:getSubnetworks":
            base = f"https://www.googleapis.com/compute/v1/projects/{a.get('project')}"
            return {
                "subnetworks": [
                    {
                        "name": "default",
                        "selfLink": f"{base}/regions/{a.get('region')}/subnetworks/default",
                        "network": f"{base}/global/networks/default",
                        "networkSelfLink": f"{base}/global/networks/default",
                        "networkName": "default",
                        "ipCidrRange": "10.138.0.0/20",
                        "description": "",
                        "privateIpGoogleAccess": False,
                    }
                ]
            }
        if token == "gcp:compute/getSubnetwork:getSubnetwork":
            link = a.get("selfLink", "")
            project = link.split("projects/")[-1].split("/")[0] if "projects/" in link else "p"
            return {
                "network": f"https://www.googleapis.com/compute/v1/projects/{project}"
                "/global/networks/default",
                "selfLink": link,
            }
        return {}


class _RecordingMonitor(pulumi_mocks.MockMonitor):
    """Keeps the inputs as sent (secrets still marked) and the stack's exports."""

    def __init__(self, mocks: RecordingMocks) -> None:
        super().__init__(mocks)
        self.run = mocks.run
        self.urn_names: dict[str, str] = {}
        self.thread_loops: set[asyncio.AbstractEventLoop] = set()
        """The loops pulumi's mock monitor makes in the worker threads it is called on (one
        a thread, never closed by pulumi): `_own_event_loop` closes them."""

    def _thread_loop(self) -> None:
        with contextlib.suppress(RuntimeError):  # this thread has none
            self.thread_loops.add(asyncio.get_event_loop_policy().get_event_loop())

    def Invoke(self, request):  # noqa: N802  (the gRPC method name)
        try:
            return super().Invoke(request)
        finally:
            self._thread_loop()

    def ReadResource(self, request):  # noqa: N802  (the gRPC method name)
        try:
            return super().ReadResource(request)
        finally:
            self._thread_loop()

    def RegisterResource(self, request):  # noqa: N802  (the gRPC method name)
        try:
            response = super().RegisterResource(request)
        finally:
            self._thread_loop()
        self.urn_names[response.urn] = request.name
        self.run.urns[request.name] = response.urn
        if request.type != "pulumi:pulumi:Stack":
            inputs = _recorded(request.object)
            inputs.pop("__provider", None)
            self.run.resources.append(
                RecordedResource(
                    type=request.type,
                    name=request.name,
                    parent=self.urn_names.get(request.parent),
                    inputs=inputs,
                    custom=bool(request.custom),
                    dependencies=sorted(request.dependencies),
                    aliases=_aliases(request),
                    urn=response.urn,
                )
            )
        return response


def _aliases(request: Any) -> list[dict[str, str]]:
    """The old (type, name)s a resource's aliases give: a spec's, the resource's own where the
    spec leaves one out, or a URN's last two parts (its type is the last of the chain)."""
    found = set()
    for alias in request.aliases:
        if alias.HasField("spec"):
            found.add((alias.spec.type or request.type, alias.spec.name or request.name))
        elif alias.urn:
            qualified_type, name = alias.urn.split("::")[-2:]
            found.add((qualified_type.rsplit("$", 1)[-1], name))
    return [{"type": type_, "name": name} for type_, name in sorted(found)]


@contextlib.contextmanager
def _pickler_restored() -> Iterator[None]:
    """Pulumi's `serialize_provider` wraps `pickle._Pickler._batch_setitems` in a sorting
    wrapper on every dynamic resource and never unwraps it, so each program run in one process
    nests the last run's wrappers once more: a few hundred plans in a process (a benchmark, a
    property test) end in RecursionError. Put the pickler back as it was after each run."""
    saved = {name: pickle._Pickler.__dict__.get(name) for name in _PATCHED_PICKLER}
    try:
        yield
    finally:
        for name, method in saved.items():
            if method is None:
                if name in pickle._Pickler.__dict__:
                    delattr(pickle._Pickler, name)
            else:
                setattr(pickle._Pickler, name, method)


_PATCHED_PICKLER = ("_batch_setitems", "save_dict")


class _WarningsKept(logging.Handler):
    """The mock engine's log (`pulumi.log.warn` and above) into `ProgramRun.warnings`."""

    def __init__(self, run: ProgramRun) -> None:
        super().__init__(logging.WARNING)
        self.run = run

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message not in self.run.warnings:
            self.run.warnings.append(message)


@contextlib.contextmanager
def _own_event_loop(monitor: _RecordingMonitor) -> Iterator[None]:
    """The run on an event loop of its own, closed after it with those `monitor` made in its
    worker threads. Pulumi's `_sync_await` makes loops and leaves them open: at exit their
    `__del__` warns of unclosed loops, and while the interpreter shuts down that can end
    `invoke plan` with "Exception ignored in: <function BaseEventLoop.__del__ ...>" and a
    traceback. A fresh event loop policy after the run forgets the closed loops, so a later
    run in this process (a test's, a benchmark's) makes new ones."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    failed = True
    try:
        yield
        failed = False
    finally:
        try:
            for used in (loop, *monitor.thread_loops):
                _end_left_work(used)
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            asyncio.set_event_loop(None)
            for used in {loop, *monitor.thread_loops}:
                if not used.is_running():
                    used.close()
            asyncio.set_event_loop_policy(None)
            if failed:
                _collect_left_coroutines()


def _collect_left_coroutines() -> None:
    """A failed run's coroutines that never ran, collected now and quietly: collected later,
    their "never awaited" warnings can fire inside a compile() (pytest rewriting a module),
    which CPython 3.11 ends with "SystemError: AST constructor recursion depth mismatch"."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        gc.collect()


def _end_left_work(loop: asyncio.AbstractEventLoop) -> None:
    """What a run ended by an error (one raised in an apply) left: its tasks cancelled, its
    worker threads finished, the outputs pulumi still tracks forgotten. Left alone, a later run
    in this process would wait on them on a closed loop, and the threads would still run."""
    if loop.is_running() or loop.is_closed():
        return
    loop.run_until_complete(_cancel_pending())
    loop.run_until_complete(loop.shutdown_default_executor())
    SETTINGS.outputs.clear()


async def _cancel_pending() -> None:
    """Every other task of the running loop cancelled and awaited."""
    pending = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)


def _program_log(run: ProgramRun) -> logging.Logger:
    """A logger of this run alone (not the root logger, which prints to stderr)."""
    logger = logging.getLogger(f"{__name__}.program")
    logger.propagate = False
    logger.setLevel(logging.WARNING)
    logger.handlers = [_WarningsKept(run)]
    return logger


def run_program(config: dict[str, Any], stack: str = "plan", preview: bool = True) -> ProgramRun:
    """Run `infra` under the recording engine with the given stack config (`ray-gcp:...`
    keys, values as pulumi gives them: strings, objects as JSON text)."""
    from infra.program import define_cluster

    run = ProgramRun()

    async def program() -> None:
        define_cluster()
        exports = dict(get_root_resource().outputs)
        for name, value in exports.items():
            output = pulumi.Output.from_input(value)
            secret = await output.is_secret()
            run.outputs[name] = SECRET_MASK if secret else _known_after_up(
                await output.future(with_unknowns=True))

    mocks = RecordingMocks(run, stack)
    monitor = _RecordingMonitor(mocks)
    # The loop first: the mocks' root stack already makes futures on it.
    with _own_event_loop(monitor), _pickler_restored(), _scratch_state():
        set_root_resource(None)  # a fresh root stack: exports of an earlier run do not leak in
        pulumi.runtime.set_mocks(
            mocks, project=PROJECT_NAME, stack=stack, preview=preview, monitor=monitor,
            logger=_program_log(run),
        )
        pulumi.runtime.set_all_config(config, [])
        _sync_await(run_pulumi_func(program))
    run.resources.sort(key=lambda r: (r.type, r.name))
    return run
