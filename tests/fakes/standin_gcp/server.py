"""The plugin process: a ResourceProvider gRPC server on 127.0.0.1, its port printed first on
stdout (the engine's plugin handshake), answering as pulumi-gcp would.

The engine (pkg/resource/plugin/provider_plugin.go) calls GetPluginInfo, Handshake (optional:
Unimplemented falls back), CheckConfig, DiffConfig, Configure, then per resource Check, Diff,
Create, Read, Update, Delete, and Invoke for data sources; Cancel at the end. Diff answers
with the bridge's detailed diff (nested paths, replace or not per path: replace_rules.py).
Secrets are not accepted (Configure answers acceptSecrets=false): the engine strips them
before each call and marks outputs secret where their inputs were, as it does for any such provider.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import traceback
from collections.abc import Callable
from concurrent import futures
from typing import Any

import grpc
from google.protobuf import empty_pb2, json_format, struct_pb2

from tests.fakes.pulumi_protos import proto_modules
from tests.fakes.standin_gcp import network, replace_rules, schema, storage
from tests.fakes.standin_gcp.api import ApiError, Apis
from tests.fakes.standin_gcp.resources import HANDLERS as RESOURCE_HANDLERS
from tests.fakes.standin_gcp.resources import Handler, invoke

plugin_pb2, provider_pb2, provider_pb2_grpc = proto_modules(
    "plugin_pb2", "provider_pb2", "provider_pb2_grpc")

VERSION = "10.2.0"  # what pulumi_gcp/pulumi-plugin.json asks for
PROVIDER_TOKEN = "pulumi:providers:gcp"
# Resources whose `name` pulumi-gcp fills in when the program gives none: the logical name, a
# dash and 7 random hex digits (the bridge's autonaming), kept from the old inputs on update.
AUTONAMED = frozenset({"gcp:compute/instance:Instance", "gcp:compute/firewall:Firewall",
                       "gcp:compute/disk:Disk", "gcp:tpu/v2Vm:V2Vm",
                       "gcp:compute/network:Network", "gcp:compute/subnetwork:Subnetwork"})
# Where every call is logged, one JSON line each (method, urn, pid), when set.
CALL_LOG_ENV = "STANDIN_GCP_CALL_LOG"
HANDLERS = {**RESOURCE_HANDLERS, **network.HANDLERS, **storage.HANDLERS}
_KIND = provider_pb2.PropertyDiff
_KINDS = {"add": _KIND.ADD, "add-replace": _KIND.ADD_REPLACE, "delete": _KIND.DELETE,
          "delete-replace": _KIND.DELETE_REPLACE, "update": _KIND.UPDATE,
          "update-replace": _KIND.UPDATE_REPLACE}
SIG_KEY, SECRET_SIG = "4dabf18193072939515e22adb298388d", "1b47061264138c4ac30d75fd1eb44270"


def _to_dict(struct: struct_pb2.Struct) -> dict[str, Any]:
    return json_format.MessageToDict(struct) if struct is not None else {}


def _to_struct(value: dict[str, Any]) -> struct_pb2.Struct:
    struct = struct_pb2.Struct()
    struct.update(_plain(value))
    return struct


def _plain(value: Any) -> Any:
    """JSON-safe (ints as floats are fine for a Struct)."""
    return json.loads(json.dumps(value))


def _revealed(value: Any) -> Any:
    """A config value as plain: Configure's args still carry a secret as the engine wraps it
    (an object with the signature key and the secret sig), acceptSecrets being answered later."""
    if isinstance(value, dict) and value.get(SIG_KEY) == SECRET_SIG:
        return value.get("value")
    return value


def _type_of(urn: str) -> str:
    return urn.split("::")[2].rsplit("$", 1)[-1]


def _aborting(method: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(self: StandInGcp, request: Any, context: grpc.ServicerContext) -> Any:
        self.log(method.__name__, getattr(request, "urn", ""))
        try:
            return method(self, request, context)
        except (ApiError, ValueError) as error:
            context.abort(grpc.StatusCode.UNKNOWN, str(error))
        except Exception:  # noqa: BLE001 - a bug here reaches the engine with its traceback
            context.abort(grpc.StatusCode.UNKNOWN, traceback.format_exc())
    wrapper.__name__ = method.__name__
    return wrapper


class StandInGcp(provider_pb2_grpc.ResourceProviderServicer):
    """pulumi-gcp's contract over fake APIs; configured once per provider instance."""

    def __init__(self) -> None:
        self.config: dict[str, Any] = {}
        self.apis = Apis({})
        self._log_lock = threading.Lock()

    def log(self, method: str, urn: str) -> None:
        path = os.environ.get(CALL_LOG_ENV)
        if path:
            with self._log_lock, open(path, "a") as log:
                log.write(json.dumps({"method": method, "urn": urn, "pid": os.getpid()}) + "\n")

    def handler(self, urn: str) -> Handler:
        token = _type_of(urn)
        if token not in HANDLERS:
            raise ValueError(f"the stand-in gcp provider has no resource {token}")
        return HANDLERS[token](self.apis, self.config)

    # ---------------------------------------------------------------- plugin and config

    def GetPluginInfo(self, request: Any, context: Any) -> plugin_pb2.PluginInfo:  # noqa: N802
        return plugin_pb2.PluginInfo(version=VERSION)

    @_aborting
    def CheckConfig(self, request: Any, context: Any) -> provider_pb2.CheckResponse:  # noqa: N802
        news = _to_dict(request.news)
        failures = schema.check(PROVIDER_TOKEN, {k: v for k, v in news.items() if k != "version"})
        return provider_pb2.CheckResponse(inputs=request.news, failures=[
            provider_pb2.CheckFailure(property=path, reason=reason) for path, reason in failures])

    @_aborting
    def DiffConfig(self, request: Any, context: Any) -> provider_pb2.DiffResponse:  # noqa: N802
        olds, news = _to_dict(request.olds), _to_dict(request.news)
        changed = sorted(k for k in set(olds) | set(news) if olds.get(k) != news.get(k))
        return provider_pb2.DiffResponse(
            changes=provider_pb2.DiffResponse.DIFF_SOME if changed
            else provider_pb2.DiffResponse.DIFF_NONE, diffs=changed)

    @_aborting
    def Configure(self, request: Any, context: Any) -> provider_pb2.ConfigureResponse:  # noqa: N802
        self.config = {key: _revealed(value) for key, value in _to_dict(request.args).items()}
        self.apis = Apis(self.config)
        return provider_pb2.ConfigureResponse(acceptSecrets=False, supportsPreview=True,
                                              acceptResources=False)

    # ---------------------------------------------------------------- resources

    @_aborting
    def Check(self, request: Any, context: Any) -> provider_pb2.CheckResponse:  # noqa: N802
        token = _type_of(request.urn)
        self.handler(request.urn)
        news, olds = _to_dict(request.news), _to_dict(request.olds)
        if token in AUTONAMED and not news.get("name"):
            news["name"] = olds.get("name") or (
                f"{request.urn.rsplit('::', 1)[1]}-{request.randomSeed.hex()[:7]}")
        failures = schema.check(token, news)
        return provider_pb2.CheckResponse(inputs=_to_struct(news), failures=[
            provider_pb2.CheckFailure(property=path, reason=reason) for path, reason in failures])

    @_aborting
    def Diff(self, request: Any, context: Any) -> provider_pb2.DiffResponse:  # noqa: N802
        token = _type_of(request.urn)
        olds = _to_dict(request.old_inputs) or _to_dict(request.olds)
        news = replace_rules.settled(token, olds, _to_dict(request.news))
        detailed = replace_rules.detailed_diff(token, olds, news)
        return provider_pb2.DiffResponse(
            changes=provider_pb2.DiffResponse.DIFF_SOME if detailed
            else provider_pb2.DiffResponse.DIFF_NONE,
            diffs=sorted({replace_rules.top_key(path) for path in detailed}),
            replaces=replace_rules.replaced_paths(token, olds, news),
            detailedDiff={path: provider_pb2.PropertyDiff(kind=_KINDS[kind])
                          for path, kind in detailed.items()},
            hasDetailedDiff=True)

    @_aborting
    def Create(self, request: Any, context: Any) -> provider_pb2.CreateResponse:  # noqa: N802
        handler = self.handler(request.urn)
        inputs = _to_dict(request.properties)
        if request.preview:
            return provider_pb2.CreateResponse(properties=_to_struct(handler.preview(inputs)))
        resource_id, outputs = handler.create(inputs)
        return provider_pb2.CreateResponse(id=resource_id, properties=_to_struct(outputs))

    @_aborting
    def Read(self, request: Any, context: Any) -> provider_pb2.ReadResponse:  # noqa: N802
        handler = self.handler(request.urn)
        state = _to_dict(request.properties) or _to_dict(request.inputs)
        if not state:  # an import: the id alone names what to read
            found = handler.imported(request.id)
            if found is None:
                return provider_pb2.ReadResponse()
            resource_id, inputs, outputs = found
            return provider_pb2.ReadResponse(id=resource_id, properties=_to_struct(outputs),
                                             inputs=_to_struct(inputs))
        outputs = handler.read(request.id, state)
        if outputs is None:
            return provider_pb2.ReadResponse()  # gone: the engine drops it from the state
        return provider_pb2.ReadResponse(id=request.id, properties=_to_struct(outputs),
                                         inputs=request.inputs)

    @_aborting
    def Update(self, request: Any, context: Any) -> provider_pb2.UpdateResponse:  # noqa: N802
        handler = self.handler(request.urn)
        olds = _to_dict(request.old_inputs) or _to_dict(request.olds)
        news, state = _to_dict(request.news), _to_dict(request.olds)
        if request.preview:
            return provider_pb2.UpdateResponse(properties=_to_struct({**state, **news}))
        outputs = handler.update(request.id, olds, news, state)
        return provider_pb2.UpdateResponse(properties=_to_struct(outputs))

    @_aborting
    def Delete(self, request: Any, context: Any) -> empty_pb2.Empty:  # noqa: N802
        self.handler(request.urn).delete(request.id, _to_dict(request.properties))
        return empty_pb2.Empty()

    @_aborting
    def Invoke(self, request: Any, context: Any) -> provider_pb2.InvokeResponse:  # noqa: N802
        result = invoke(self.apis, self.config, request.tok, _to_dict(request.args))
        return provider_pb2.InvokeResponse(**{"return": _to_struct(result)})

    def Cancel(self, request: Any, context: Any) -> empty_pb2.Empty:  # noqa: N802
        return empty_pb2.Empty()


def serve() -> None:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    provider_pb2_grpc.add_ResourceProviderServicer_to_server(StandInGcp(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    sys.stdout.write(f"{port}\n")
    sys.stdout.flush()
    server.wait_for_termination()
