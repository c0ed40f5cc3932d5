"""Run a rendered startup script for real, with stub `ray`, `docker`, `getent` and `pip` on PATH.

Each stub appends one line `<name> <args>` to a calls file, so tests read back exactly which
commands the script ran and in what order. User commands in the test configs call `record`.
`FakeGoogle` stands in, on 127.0.0.1, for the metadata server, Secret Manager, Cloud Storage's
object reads and Compute's guest attributes, each checking the node's identity as Google does.

Ray's token auth is on by default: `run_script` (local mode) gives the node a token file in
RAY_AUTH_TOKEN_PATH as the local cluster does; `gce_env` serves the token from the fake's Secret
Manager under the metadata key the program sets.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import subprocess
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from bootstrap.file_mounts import pack_file_mounts
from bootstrap.node_metadata import RAY_AUTH_TOKEN_SECRET_KEY, node_metadata
from model.config import ClusterConfig, parse_cluster_config
from tests.fakes.compute.cloud import ApiError
from tests.fakes.compute.identity import IDENTITIES, ROLE_PERMISSIONS, discovery_scopes

REPO = Path(__file__).resolve().parents[2]
SHIPPED_STACKS = sorted((REPO / "stacks" / "clusters").glob("*.yaml"))
HEAD_INTERNAL_IP = "10.128.0.7"
# The Ray auth token the stubbed nodes get, and its secret version on the fake Secret Manager.
STUB_RAY_TOKEN = "f00d" * 16
STUB_TOKEN_VERSION = "projects/my-gcp-project/secrets/ray-stubbed-auth-token/versions/1"
# The account a stubbed node runs as, as the program gives one to the cluster's workers.
STUB_ACCOUNT = "ray-stubbed-worker@my-gcp-project.iam.gserviceaccount.com"
SECRET_ACCESSOR = "roles/secretmanager.secretAccessor"
OBJECT_VIEWER = "roles/storage.objectViewer"

_RECORD = 'printf \'%s\\n\' "$(basename "$0") $*" >> "$STUB_CALLS"\n'
STUBS = {
    "record": "#!/bin/sh\n" + _RECORD,
    # Ray's default head setup command is a `pip install`: recorded, never run against PyPI.
    "pip": "#!/bin/sh\n" + _RECORD,
    # `ray` also leaves its whole environment (the last call's) in $STUB_CALLS.env, and each
    # call's Ray auth settings, `<subcommand> <RAY_AUTH_MODE> <RAY_AUTH_TOKEN_PATH>` ("-" for
    # unset), in $STUB_CALLS.auth.
    "ray": "#!/bin/sh\n" + _RECORD + 'printf \'ray-env HEAD=%s RES=%s\\n\' '
    '"${RAY_HEAD_IP:-}" "${RAY_OVERRIDE_RESOURCES:-}" >> "$STUB_CALLS"\n'
    'env -0 > "$STUB_CALLS.env"\n'
    'printf \'%s %s %s\\n\' "$1" "${RAY_AUTH_MODE:--}" "${RAY_AUTH_TOKEN_PATH:--}" '
    '>> "$STUB_CALLS.auth"\n',
    # `docker inspect` answers from STUB_CONTAINER ("true <image>" = running); `image
    # inspect` fails unless STUB_IMAGE_PRESENT=1; `exec [-u U] <name> /bin/bash --login -c CMD`
    # runs CMD here. The container's user (`id -u`, `id -g`) is
    # STUB_CONTAINER_UID:STUB_CONTAINER_GID, root by default. With STUB_CONTAINER_ROOT, that
    # folder is the container's filesystem: `cp` copies into it (the mode kept, as docker cp
    # keeps it), `exec` runs `mkdir`, `chmod` and `mv` there; `chown` is only recorded (the
    # test's user may not give files away).
    "docker": "#!/bin/sh\n" + _RECORD + """case $1 in
  inspect) [ -n "${STUB_CONTAINER:-}" ] && printf '%s\\n' "$STUB_CONTAINER" && exit 0; exit 1 ;;
  image) [ "${STUB_IMAGE_PRESENT:-}" = 1 ] && exit 0; exit 1 ;;
  cp) [ -z "${STUB_CONTAINER_ROOT:-}" ] || cp -p "$2" "$STUB_CONTAINER_ROOT${3#*:}" ;;
  exec)
    shift
    [ "$1" = -u ] && shift 2
    shift
    root=${STUB_CONTAINER_ROOT:-}
    case $1 in
      /bin/bash) exec bash -c "$4" ;;  # keep the stub PATH
      id) [ "$2" = -g ] && echo "${STUB_CONTAINER_GID:-0}" || echo "${STUB_CONTAINER_UID:-0}" ;;
      mkdir) [ -z "$root" ] || mkdir -p "$root$3" ;;
      chmod) [ -z "$root" ] || chmod "$2" "$root$3" ;;
      mv) [ -z "$root" ] || mv "$2" "$root$3" "$root$4" ;;
    esac ;;
esac
""",
    "getent": "#!/bin/sh\n" + _RECORD + f"""[ "$2" = "$STUB_HEAD_NAME" ] || exit 2
printf '%s     %s\\n' {HEAD_INTERNAL_IP} "$2"
""",
}


def cluster(**overrides: Any) -> ClusterConfig:
    """A small two-type cluster whose commands only call the `record` stub."""
    data: dict[str, Any] = {
        "cluster_name": "stubbed",
        "provider": {"type": "gcp", "region": "us-west1", "availability_zone": "us-west1-a",
                     "project_id": "my-gcp-project"},
        "available_node_types": {
            "head_t": {"resources": {"CPU": 2}, "node_config": {"machineType": "n1-standard-2"}},
            "worker_t": {"resources": {"CPU": 4, "custom": 1}, "min_workers": 1,
                         "node_config": {"machineType": "n1-standard-2"}},
        },
        "head_node_type": "head_t",
        "initialization_commands": ["record init-1"],
        "setup_commands": ["record setup-common"],
        "head_setup_commands": ["record setup-head"],
        "worker_setup_commands": ["record setup-worker"],
        "head_start_ray_commands": ["ray start --head --port=6379"],
        "worker_start_ray_commands": ["ray start --address=$RAY_HEAD_IP:6379"],
    }
    data.update(overrides)
    return parse_cluster_config(data)


MOUNTS_KEY = "5e" * 32  # a stack's secret that names its file_mounts archive (infra/stack_secret)


def node_entries(config: ClusterConfig, role: str, node_type: str, tmp_path: Path,
                 request: str = "") -> dict[str, str]:
    """A node's metadata with its file_mounts packed from `tmp_path` (relative sources) and
    the archive put where `run_script` keeps the cluster's bucket (`tmp_path/bucket`)."""
    packed = pack_file_mounts(config, tmp_path)
    mounts = packed.keyed(MOUNTS_KEY) if packed is not None else None
    if mounts is not None:
        mounts.write(tmp_path / "bucket" / Path(mounts.object_name).parent)
    return node_metadata(config, role, node_type, mounts, request)  # type: ignore[arg-type]


@dataclass
class ScriptRun:
    returncode: int
    calls: list[str]
    log: str
    status: str
    home: Path
    ray_env: dict[str, str] = field(default_factory=dict)  # the last `ray` call's environment
    # Each `ray` call's (subcommand, RAY_AUTH_MODE, RAY_AUTH_TOKEN_PATH); "-" for unset.
    ray_auth: list[list[str]] = field(default_factory=list)


def run_script(
    script: str,
    tmp_path: Path,
    metadata: dict[str, str] | None = None,
    env: dict[str, str] | None = None,
    keep_watcher: bool = False,
) -> ScriptRun:
    """Run `script` in local mode (metadata from a directory, the cluster's bucket a folder,
    `tmp_path/bucket`) with the stubs first on PATH. Nodes start a detached node watcher (the
    head a config watcher too): they are stopped here unless `keep_watcher`."""
    stub_dir, metadata_dir = tmp_path / "stubs", tmp_path / "metadata"
    stub_dir.mkdir(exist_ok=True)
    metadata_dir.mkdir(exist_ok=True)
    for name, text in STUBS.items():
        (stub_dir / name).write_text(text)
        (stub_dir / name).chmod(0o755)
    for key, value in {"startup-script": script, **(metadata or {})}.items():
        (metadata_dir / key).write_text(value)
    calls, log, home = tmp_path / "calls", tmp_path / "bootstrap.log", tmp_path / "home"
    full_env = {k: v for k, v in os.environ.items()
                if k != "RAY_HEAD_IP" and not k.startswith("RAY_AUTH_")}
    full_env.update({
        "RAY_AUTH_TOKEN_PATH": str(write_token(tmp_path / "local_auth_token")),
        "PATH": f"{stub_dir}:{os.environ['PATH']}",
        "STUB_CALLS": str(calls),
        "STUB_HEAD_NAME": "ray-stubbed-head-1a2b3c4d-compute",
        "RAY_BOOTSTRAP_METADATA_DIR": str(metadata_dir),
        "RAY_BOOTSTRAP_HOME": str(home),
        "RAY_BOOTSTRAP_LOG": str(log),
        "RAY_BOOTSTRAP_STATUS_DIR": str(tmp_path / "guest-attributes"),
        "RAY_BOOTSTRAP_RESOLVE_DELAY": "0",
        "RAY_BOOTSTRAP_BUCKET_DIR": str(tmp_path / "bucket"),
        **(env or {}),
    })
    try:
        result = subprocess.run(["sh", str(metadata_dir / "startup-script")], env=full_env,
                                capture_output=True, text=True, timeout=60)
    finally:
        if not keep_watcher:
            stop_watchers(tmp_path)
    status_file = tmp_path / "guest-attributes" / "ray-bootstrap" / "status"
    env_file = tmp_path / "calls.env"
    entries = env_file.read_text().split("\0") if env_file.exists() else []
    auth_file = tmp_path / "calls.auth"
    auth_lines = auth_file.read_text().splitlines() if auth_file.exists() else []
    return ScriptRun(
        result.returncode,
        calls.read_text().splitlines() if calls.exists() else [],
        log.read_text() if log.exists() else "",
        status_file.read_text() if status_file.exists() else "",
        home,
        dict(entry.split("=", 1) for entry in entries if "=" in entry),
        [line.split(" ", 2) for line in auth_lines],
    )


def watcher_pid_file(tmp_path: Path) -> Path:
    """Where a head run by `run_script` keeps its config watcher's pid (local mode)."""
    return tmp_path / "state" / "config-watcher.pid"


def stop_config_watcher(tmp_path: Path) -> None:
    """Stop the watcher's whole process group (it leads one: the script starts it with
    setsid), so no sleep or curl of it outlives the test."""
    pid_file = watcher_pid_file(tmp_path)
    with contextlib.suppress(OSError, ValueError):
        os.killpg(int(pid_file.read_text()), signal.SIGTERM)


def node_watcher_pid_file(tmp_path: Path) -> Path:
    """Where a node run by `run_script` keeps its re-apply watcher's pid (local mode)."""
    return tmp_path / "state" / "node-watcher.pid"


def stop_watchers(tmp_path: Path) -> None:
    """Stop every process a node run leaves: the config watcher, the node watcher (with a
    re-apply it may be running) and the head's autostop daemon. Each leads a process group
    of its own (the script starts them with setsid)."""
    stop_config_watcher(tmp_path)
    for name in ("node-watcher.pid", "autostop.pid"):
        with contextlib.suppress(OSError, ValueError):
            os.killpg(int((tmp_path / "state" / name).read_text()), signal.SIGTERM)


def write_token(path: Path) -> Path:
    """A Ray auth token file as the local cluster writes one: readable by this user only."""
    path.write_text(STUB_RAY_TOKEN)
    path.chmod(0o600)
    return path


def gce_env(tmp_path: Path, fake: FakeGoogle, head_name: str) -> dict[str, str]:
    """The environment of a node booted as on GCE: no metadata dir, so metadata (ETag long
    polls) and the head's guest attributes come from `fake`, which also serves the Ray auth
    token's secret; the stubs first on PATH, the node's log, state and guest attributes under
    tmp_path. Root: no user is created."""
    fake.secrets.setdefault(STUB_TOKEN_VERSION, STUB_RAY_TOKEN.encode())
    if fake.service_account:  # the program grants every node's account its token's secret
        fake.grant(secret_of(STUB_TOKEN_VERSION), SECRET_ACCESSOR)
    if RAY_AUTH_TOKEN_SECRET_KEY not in fake.attributes:
        fake.set_attribute(RAY_AUTH_TOKEN_SECRET_KEY, STUB_TOKEN_VERSION)
    stubs = tmp_path / "stubs"
    stubs.mkdir(exist_ok=True)
    for name, text in STUBS.items():
        (stubs / name).write_text(text)
        (stubs / name).chmod(0o755)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("RAY_BOOTSTRAP_", "RAY_AUTH_")) and k != "RAY_HEAD_IP"}
    env.update(fake.env(), PATH=f"{stubs}:{os.environ['PATH']}",
               STUB_CALLS=str(tmp_path / "calls"), STUB_HEAD_NAME=head_name,
               HOME=str(tmp_path), RAY_BOOTSTRAP_COMPUTE_URL=f"{fake.url}/compute/v1",
               RAY_BOOTSTRAP_LOG=str(tmp_path / "bootstrap.log"),
               RAY_BOOTSTRAP_STATE_DIR=str(tmp_path / "state"),
               RAY_BOOTSTRAP_STATUS_DIR=str(tmp_path / "guest-attributes"),
               RAY_BOOTSTRAP_FOLLOW_INTERVAL="1", RAY_BOOTSTRAP_WATCH_INTERVAL="0.1")
    return env


@dataclass
class FakeGoogle:
    """One GCE instance's view of Google, on 127.0.0.1: the metadata server (its token,
    attributes with ETag long polls), Secret Manager's `versions/*:access`, Cloud Storage's
    `objects.get` (`alt=media`) and Compute's `getGuestAttributes`. Point the script at it
    with `env()`.

    Identity as GCE gives it. The instance runs as `service_account` (None: none) with
    `scopes`; the metadata server hands out a token, its email and scopes only then, and 404s
    `service-accounts/default/*` otherwise, as GCE does for a VM created without a service
    account: its `instance/service-accounts/` lists none, so `default` is no entry
    (https://cloud.google.com/compute/docs/metadata/predefined-metadata-keys#instance-metadata,
    https://cloud.google.com/compute/docs/access/create-enable-service-accounts-for-instances).
    The token is bound to that account and those scopes: it is minted in the one token
    registry every fake shares (tests/fakes/compute/identity.py `vm_token`), so it works at the
    fake cloud APIs (tests/fakes/compute) too, by its own account's grants only, and a token
    minted there (the user's, another VM's) is judged here by its own principal and scopes.

    Each API checks, as Google does
    (https://cloud.google.com/compute/docs/access/service-accounts#accesscopesiam: a call
    needs both the scope and the IAM permission): first the token (401 UNAUTHENTICATED), then
    its scopes (403 with Google's ErrorInfo reason ACCESS_TOKEN_SCOPE_INSUFFICIENT,
    https://cloud.google.com/apis/design/errors#error_info), then a permission the IAM
    bindings give the account on the resource or an ancestor (the project), 403
    PERMISSION_DENIED naming the permission
    (https://cloud.google.com/iam/docs/troubleshooting-access), through the role table of
    tests/fakes/compute/identity.py (`ROLE_PERMISSIONS`, cited per role). `bindings` are
    (resource, role, member): `projects/P`, `projects/P/secrets/S`, `projects/_/buckets/B`.
    """

    service_account: str | None = None
    scopes: tuple[str, ...] = ()
    bindings: list[tuple[str, str, str]] = field(default_factory=list)
    secrets: dict[str, bytes] = field(default_factory=dict)
    objects: dict[tuple[str, str], bytes] = field(default_factory=dict)
    """(bucket, object name) -> content: the buckets Cloud Storage serves."""
    attributes: dict[str, str] = field(default_factory=dict)
    denials: int = 0  # answer the next N access calls 403, as before IAM has propagated
    requests: list[str] = field(default_factory=list)
    # Other instances' guest attributes, as the Compute API's getGuestAttributes reads them:
    # instance name -> {"ray-bootstrap/status": ..., ...}
    guest_attributes: dict[str, dict[str, str]] = field(default_factory=dict)
    project: str = "my-gcp-project"
    zone: str = "us-west1-a"

    def __post_init__(self) -> None:
        self._versions: dict[str, int] = dict.fromkeys(self.attributes, 1)
        self._changed = threading.Condition()
        self._closing = False
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self.token = IDENTITIES.vm_token(self.service_account, frozenset(self.scopes)) \
            if self.service_account else None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def env(self) -> dict[str, str]:
        return {
            "RAY_BOOTSTRAP_METADATA_URL": f"{self.url}/computeMetadata/v1",
            "RAY_BOOTSTRAP_SECRET_MANAGER_URL": f"{self.url}/v1",
            "RAY_BOOTSTRAP_STORAGE_URL": f"{self.url}/storage/v1",
        }

    def grant(self, resource: str, role: str, member: str | None = None) -> None:
        """Bind `role` on `resource` to `member` (default: this instance's account)."""
        self.bindings.append((resource, role, member or f"serviceAccount:{self.service_account}"))

    def permitted(self, permission: str, resource: str, member: str | None = None) -> bool:
        """Whether `member` (default: this instance's account) holds `permission` on
        `resource` or its project."""
        member = member or f"serviceAccount:{self.service_account}"
        held = {resource, f"projects/{self.project}"}
        return any(where in held and who == member and permission in ROLE_PERMISSIONS.get(role, ())
                   for where, role, who in self.bindings)

    def set_attribute(self, key: str, value: str) -> None:
        with self._changed:
            self.attributes[key] = value
            self._versions[key] = self._versions.get(key, 0) + 1
            self._changed.notify_all()

    def etag(self, key: str) -> str:
        return f"{self._versions.get(key, 0):016x}"

    def __enter__(self) -> FakeGoogle:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        with self._changed:
            self._closing = True
            self._changed.notify_all()
        self._server.shutdown()
        self._server.server_close()

    def wait_for_change(self, key: str, last_etag: str, timeout: float) -> None:
        with self._changed:
            self._changed.wait_for(
                lambda: self._closing or self.etag(key) != last_etag, timeout=timeout
            )


def secret_of(version: str) -> str:
    """`projects/P/secrets/S` of a version name `projects/P/secrets/S/versions/V`."""
    return version.split("/versions/")[0]


def granted_node(**fields: Any) -> FakeGoogle:
    """A node as the program makes one: running as STUB_ACCOUNT with the cloud-platform
    scope, which may access each secret in `secrets` and read each bucket in `objects` (the
    program's SecretIamMember and BucketIAMMember for the node's account)."""
    fake = FakeGoogle(service_account=STUB_ACCOUNT, scopes=(CLOUD_PLATFORM,), **fields)
    for version in fake.secrets:
        fake.grant(secret_of(version), SECRET_ACCESSOR)
    for bucket in {bucket for bucket, _ in fake.objects}:
        fake.grant(f"projects/_/buckets/{bucket}", OBJECT_VIEWER)
    return fake


def grant_head_reader(fake: FakeGoogle, head_name: str) -> None:
    """Let the node read the head's guest attributes (a worker's re-apply follows the head
    through them). The program grants no such role to the worker account yet: on Google a
    worker's re-apply then neither waits for the head nor follows its restarts
    (docs/security.md)."""
    fake.grant(f"projects/{fake.project}/zones/{fake.zone}/instances/{head_name}",
               "roles/compute.viewer")


CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform"
# The scopes each API accepts for the call: the method's `scopes` in the discovery document
# google-api-python-client ships (e.g. Secret Manager's access takes cloud-platform alone).
SECRET_ACCESS = ("secretmanager.v1", "secretmanager.projects.secrets.versions.access")
OBJECT_GET = ("storage.v1", "storage.objects.get")
GUEST_ATTRIBUTES = ("compute.v1", "compute.instances.getGuestAttributes")


def _handler(fake: FakeGoogle) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_: object) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            fake.requests.append(self.path)
            url = urlsplit(self.path)
            query = {k: v[0] for k, v in parse_qs(url.query).items()}
            if url.path.startswith("/computeMetadata/v1/"):
                if self.headers.get("Metadata-Flavor") != "Google":
                    return self._send(403, "Missing Metadata-Flavor:Google header.")
                return self._metadata(url.path.removeprefix("/computeMetadata/v1/"), query)
            if url.path.startswith("/v1/") and url.path.endswith(":access"):
                return self._access(url.path.removeprefix("/v1/").removesuffix(":access"))
            if url.path.startswith("/storage/v1/b/") and query.get("alt") == "media":
                return self._object(url.path.removeprefix("/storage/v1/b/"))
            if url.path.startswith("/compute/v1/") and url.path.endswith("/getGuestAttributes"):
                return self._guest_attribute(url.path, query.get("variableKey", ""))
            return self._send(404, "not found")

        def _refused(self, service: str, method: tuple[str, str], permission: str,
                     resource: str) -> bool:
            """Answer the first check the call fails (token, scope, IAM) and say so."""
            try:
                token = IDENTITIES.who(self.headers.get("Authorization"))
            except ApiError as refused:
                self._send(refused.status, json.dumps(refused.body()))
                return True
            if not discovery_scopes(*method) & token.scopes:
                self._send(403, _scope_error(service))
                return True
            if not fake.permitted(permission, resource, token.principal):
                self._send(403, _error(
                    403, f"Permission '{permission}' denied for resource '{resource}' (or it "
                    "may not exist).", "PERMISSION_DENIED",
                    [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                      "reason": "IAM_PERMISSION_DENIED", "domain": "iam.googleapis.com",
                      "metadata": {"permission": permission, "resource": resource}}]))
                return True
            return False

        def _guest_attribute(self, path: str, key: str) -> None:
            """compute.instances.getGuestAttributes with variableKey (one value)."""
            parts = path.split("/")  # /compute/v1/projects/P/zones/Z/instances/NAME/get...
            instance = parts[-2]
            resource = f"projects/{parts[4]}/zones/{parts[6]}/instances/{instance}"
            if self._refused("compute.googleapis.com", GUEST_ATTRIBUTES,
                             "compute.instances.getGuestAttributes", resource):
                return None
            values = fake.guest_attributes.get(instance, {})
            if parts[4] != fake.project or parts[6] != fake.zone or key not in values:
                return self._send(404, _error(404, f"The resource '{key}' was not found",
                                              "NOT_FOUND"))
            return self._send(200, json.dumps({"kind": "compute#guestAttributes",
                                               "variableKey": key,
                                               "variableValue": values[key]}))

        def _metadata(self, path: str, query: dict[str, str]) -> None:
            if path == "project/project-id":
                return self._send(200, fake.project)
            if path == "instance/zone":
                return self._send(200, f"projects/123456789/zones/{fake.zone}")
            if path.startswith("instance/service-accounts/"):
                return self._account(path.removeprefix("instance/service-accounts/"))
            key = path.removeprefix("instance/attributes/")
            if query.get("wait_for_change") == "true":
                fake.wait_for_change(key, query.get("last_etag", ""),
                                     float(query.get("timeout_sec", "60")))
            if key not in fake.attributes:
                return self._send(404, "not found")
            return self._send(200, fake.attributes[key], {"ETag": fake.etag(key)})

        def _account(self, path: str) -> None:
            """`default/token|email|scopes`: only for an instance with a service account."""
            if fake.service_account is None or fake.token is None:
                return self._send(404, "not found")
            answers = {
                "default/token": json.dumps({"access_token": fake.token, "expires_in": 3599,
                                             "token_type": "Bearer"}),
                "default/email": fake.service_account,
                "default/scopes": "".join(f"{scope}\n" for scope in fake.scopes),
            }
            if path not in answers:
                return self._send(404, "not found")
            return self._send(200, answers[path])

        def _access(self, name: str) -> None:
            if self._refused("secretmanager.googleapis.com", SECRET_ACCESS,
                             "secretmanager.versions.access", secret_of(name)):
                return None
            if fake.denials > 0:
                fake.denials -= 1
                return self._send(403, _error(403, f"Permission 'secretmanager.versions."
                                              f"access' denied for resource '{name}'",
                                              "PERMISSION_DENIED"))
            if name not in fake.secrets:
                return self._send(404, _error(404, f"Secret [{name}] not found",
                                              "NOT_FOUND"))
            data = base64.b64encode(fake.secrets[name]).decode()
            return self._send(200, json.dumps({"name": name, "payload": {"data": data}}))

        def _object(self, path: str) -> None:
            """objects.get with alt=media: `b/{bucket}/o/{object, /-escaped}`."""
            bucket, _, name = path.partition("/o/")
            name = unquote(name)
            if self._refused("storage.googleapis.com", OBJECT_GET,
                             "storage.objects.get", f"projects/_/buckets/{bucket}"):
                return None
            if (bucket, name) not in fake.objects:
                return self._send(404, _error(404, "No such object: "
                                              f"{bucket}/{name}", "NOT_FOUND"))
            encoded = fake.objects[(bucket, name)]
            self.send_response(200)
            self.send_header("Content-Length", str(len(encoded)))
            self.end_headers()
            self.wfile.write(encoded)
            return None

        def _send(self, code: int, body: str, headers: dict[str, str] | None = None) -> None:
            encoded = body.encode()
            self.send_response(code)
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(encoded)))
            self.end_headers()
            self.wfile.write(encoded)

    return Handler


def _scope_error(service: str) -> str:
    """What a Google API answers a token whose scopes do not cover the call."""
    return _error(403, "Request had insufficient authentication scopes.", "PERMISSION_DENIED",
                  [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": "ACCESS_TOKEN_SCOPE_INSUFFICIENT", "domain": "googleapis.com",
                    "metadata": {"service": service}}])


def _error(code: int, message: str, status: str, details: list[dict[str, Any]] | None = None
           ) -> str:
    """Google's error body (https://cloud.google.com/apis/design/errors#http_mapping)."""
    return json.dumps({"error": {"code": code, "message": message, "status": status,
                                 **({"details": details} if details else {})}})
