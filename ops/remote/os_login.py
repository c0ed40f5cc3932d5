"""OS Login for the tasks: a key of your own, made on this machine, in your OS Login profile for
a few hours; the tasks log in with it as the POSIX user name OS Login gives you (e.g.
`alice_example_com`).

The key (`login_key`) is an ed25519 pair made here, kept 0600 in the stack's state folder
(`os_login_ed25519`): never in Pulumi state, on a node or in Secret Manager. The stack's own key
sits on the head (`~/ray_bootstrap_key.pem`, which every Ray job can read), so it must never be
in your profile: a job there would hold a login as you on every OS Login VM you can reach.

`os_login_user` reads your profile (`users.getLoginProfile`), imports the key
(`users.importSshPublicKey` with `expirationTimeUsec` KEY_LIFETIME from now) when it is not
there, or moves its expiry (`users.sshPublicKeys.patch`) when less than RENEW_WITHIN is left,
and removes the stack's key where a stack made before this change imported it (with no
expiry). `clean_profile` removes the stack's key on `up`, and on `down` your key too, from the
profile and this machine (`users.sshPublicKeys.delete`).

google-api-python-client with the `oslogin` v1 discovery document it ships, as your
Application Default Credentials: OS Login lets an account change only its own profile. The
account is the stack's `os_login_account` output (the principal's email), or
`RAY_GCP_OS_LOGIN_ACCOUNT` when the principal is a group. `RAY_GCP_OSLOGIN_ENDPOINT`
(host:port) points it at an emulator or the tests' fake, over http.
"""

from __future__ import annotations

import os
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from ops.errors import OpsError
from ops.paths import open_no_follow, state_dir, write_new_file
from ops.stacks.stack import StackOutputs

ACCOUNT_ENV = "RAY_GCP_OS_LOGIN_ACCOUNT"
ENDPOINT_ENV = "RAY_GCP_OSLOGIN_ENDPOINT"
CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform"
KEY_FILE = "os_login_ed25519"
KEY_LIFETIME = 4 * 3600
"""Seconds a key stays in the profile after a task imports or renews it."""
RENEW_WITHIN = 3600
"""A task renews the key when fewer seconds than this are left (a long task keeps its
connections: OS Login checks a key when a login starts)."""
API_HINT = ("your Application Default Credentials must be that account's own (OS Login "
            "changes only the caller's own profile; `gcloud auth application-default login` "
            "as it), with the cloud-platform scope")
STACK_KEY = ("the cluster's key (a stack made before per-user keys imported it; it sits on "
             "the head, where every Ray job can read it)")


@dataclass(frozen=True)
class LoginKey:
    """Your key for one stack's OS Login logins: its file, private text and public line."""

    path: Path
    public: str
    """`ssh-ed25519 AAAA...`: what goes into the profile."""
    private: str = field(repr=False)


def login_key(stack: str, create: bool = True) -> LoginKey | None:
    """The stack's login key from its state folder, made there first (with `create`) when
    missing; None when there is none and `create` is false."""
    path = state_dir(stack) / KEY_FILE
    if not os.path.lexists(path):
        if not create:
            return None
        write_new_file(path, _new_private_key(), 0o600)
    with open_no_follow(path, os.O_RDONLY) as handle:
        info = os.fstat(handle.fileno())
        if info.st_uid != os.getuid() or not stat.S_ISREG(info.st_mode):
            raise OpsError(f"{path} is not a file of yours: it must hold your OS Login key; "
                           "remove it and run again (a new key is made)")
        os.fchmod(handle.fileno(), 0o600)
        text = handle.read().decode("utf-8", errors="replace")
    public = public_line(text)
    if public is None:
        raise OpsError(f"{path} is not an OpenSSH private key: remove it and run again "
                       "(a new key is made and imported)")
    return LoginKey(path, public, text)


def _new_private_key() -> str:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    return Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption()).decode()


def public_line(private_text: str) -> str | None:
    """`type base64` of an OpenSSH or PEM private key; None when it is neither (or of a
    kind cryptography does not know, or encrypted)."""
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization

    data = private_text.encode()
    for load in (serialization.load_ssh_private_key, serialization.load_pem_private_key):
        try:
            key = load(data, None)
            return key.public_key().public_bytes(
                serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()
        except (ValueError, TypeError, UnsupportedAlgorithm):
            continue
    return None


def os_login_user(outputs: StackOutputs, key: LoginKey, announce: TextIO) -> str:
    """Make sure `key` is in the account's OS Login profile with more than RENEW_WITHIN
    left (and the stack's key is not); the POSIX user name it logs in as."""
    profile = Profile(outputs)
    profile.remove(_stack_key(outputs), STACK_KEY, announce)
    entry = profile.entry(key.public)
    expiry = time.time() + KEY_LIFETIME
    if entry is None or profile.posix_account() is None:  # the import makes the account
        profile.import_key(key.public, expiry)
    elif _expiry(entry) < time.time() + RENEW_WITHIN:
        profile.renew(entry, expiry)
    return profile.username()


def clean_profile(outputs: StackOutputs, out: TextIO, own_key: bool) -> None:
    """For `up` and `down`: the stack's key out of the account's profile where a stack made
    before per-user keys put it; with `own_key` (`down`) your login key too, from the profile
    and this machine (whatever the API said: the profile's copy expires within KEY_LIFETIME).
    A failure is one line on `out`, not an error: the cluster's change is done."""
    if not outputs.os_login:
        return
    key = None
    try:
        key = login_key(outputs.stack, create=False) if own_key else None
        profile = Profile(outputs)
        profile.remove(_stack_key(outputs), STACK_KEY, out)
        if key is not None:
            profile.remove(key.public, "your login key for this cluster", out)
    except OpsError as exc:
        left = (f"; your login key stays in the profile until it expires (within "
                f"{KEY_LIFETIME // 3600} hours), its private half deleted here") if key else ""
        print(f"warning: {exc}{left}", file=out, flush=True)
    if key is not None:
        key.path.unlink(missing_ok=True)


def _stack_key(outputs: StackOutputs) -> str | None:
    return public_line(outputs.ssh_private_key)


def _expiry(entry: dict[str, Any]) -> float:
    """Seconds since the epoch; a key without one counts as expired (renewed with one)."""
    try:
        return int(entry.get("expirationTimeUsec") or 0) / 1e6
    except ValueError:
        return 0.0


def _same_key(one: str, other: str) -> bool:
    return one.split()[:2] == other.split()[:2]


class Profile:
    """One account's OS Login profile for the stack's project, read once, then changed."""

    def __init__(self, outputs: StackOutputs) -> None:
        account = os.environ.get(ACCOUNT_ENV) or outputs.os_login_account
        if not account:
            raise OpsError(
                "provider.os_login.principal is not one account (a group?): set "
                f"{ACCOUNT_ENV} to the Google account you log in with, e.g. alice@example.com"
            )
        self.account = account
        self.project = outputs.project
        self._users = _service().users()
        self.profile: dict[str, Any] = self._call(
            "read the OS Login profile",
            self._users.getLoginProfile(name=f"users/{account}", projectId=self.project))

    def entry(self, public: str | None) -> dict[str, Any] | None:
        """The profile's entry for `public` (compared by type and base64, not comment)."""
        keys = self.profile.get("sshPublicKeys") or {}
        return next((entry for entry in keys.values()
                     if public and _same_key(entry.get("key", ""), public)), None)

    def import_key(self, public: str, expiry: float) -> None:
        answer = self._call("import your login key", self._users.importSshPublicKey(
            parent=f"users/{self.account}", projectId=self.project,
            body={"key": public, "expirationTimeUsec": str(int(expiry * 1e6))}))
        self.profile = answer.get("loginProfile") or self.profile

    def renew(self, entry: dict[str, Any], expiry: float) -> None:
        self._call("renew your login key", self._users.sshPublicKeys().patch(
            name=entry["name"], updateMask="expirationTimeUsec",
            body={"expirationTimeUsec": str(int(expiry * 1e6))}))

    def remove(self, public: str | None, what: str, announce: TextIO) -> None:
        """`public`'s entry out of the profile, said on `announce` as `what`."""
        entry = self.entry(public)
        if entry is None:
            return
        # Gone already (404) is what was wanted.
        self._call("remove a key", self._users.sshPublicKeys().delete(name=entry["name"]),
                   missing_ok=True)
        self.profile.get("sshPublicKeys", {}).pop(entry.get("fingerprint", ""), None)
        print(f"removed {what} from {self.account}'s OS Login profile", file=announce,
              flush=True)

    def posix_account(self) -> dict[str, Any] | None:
        """The account's POSIX account for the project (else its primary one)."""
        accounts = self.profile.get("posixAccounts") or []
        return next((a for a in accounts if a.get("accountId") == self.project), None) or \
            next((a for a in accounts if a.get("primary")), None)

    def username(self) -> str:
        chosen = self.posix_account()
        if not chosen or not chosen.get("username"):
            raise OpsError(f"OS Login gave {self.account} no POSIX account for project "
                           f"{self.project}: is OS Login enabled there?")
        return chosen["username"]

    def _call(self, what: str, request: Any, missing_ok: bool = False) -> dict[str, Any]:
        from google.auth.exceptions import GoogleAuthError
        from googleapiclient.errors import HttpError
        from httplib2 import HttpLib2Error

        try:
            return request.execute() or {}
        except HttpError as exc:
            if missing_ok and exc.status_code == 404:
                return {}
            raise OpsError(f"OS Login did not let us {what} for {self.account} in project "
                           f"{self.project} (HTTP {exc.status_code}: {exc.reason}): "
                           f"{API_HINT}") from None
        except GoogleAuthError as exc:
            raise OpsError(f"OS Login needs your Google credentials: run `gcloud auth "
                           f"application-default login` ({exc})") from None
        except (OSError, HttpLib2Error) as exc:  # httplib2's own: a name that does not resolve
            raise OpsError(f"cannot reach the OS Login API ({exc}): {_unreachable_fix()}") \
                from None


def _unreachable_fix() -> str:
    """What to check when the OS Login API cannot be reached: the endpoint the user set, else
    the network between here and Google."""
    endpoint = os.environ.get(ENDPOINT_ENV)
    if endpoint:
        return f"{ENDPOINT_ENV}={endpoint} names it: fix or unset it"
    return ("check this machine's network and proxy (HTTPS_PROXY) to oslogin.googleapis.com, "
            "then run again")


def _service() -> Any:
    """The `oslogin` v1 client from the discovery document google-api-python-client ships,
    as your Application Default Credentials."""
    import google.auth
    from google.auth.exceptions import DefaultCredentialsError
    from googleapiclient.discovery import build

    try:
        credentials, _ = google.auth.default(scopes=[CLOUD_PLATFORM])
    except DefaultCredentialsError as exc:
        raise OpsError(f"OS Login needs your Google credentials: run `gcloud auth "
                       f"application-default login` ({exc})") from None
    endpoint = os.environ.get(ENDPOINT_ENV)
    options = {"api_endpoint": f"http://{endpoint}/"} if endpoint else None
    return build("oslogin", "v1", credentials=credentials, static_discovery=True,
                 client_options=options)
