"""OS Login for the tasks: the stack's public key goes into your OS Login profile, and the
tasks log in as the POSIX user name OS Login gives you (e.g. `alice_example_com`).

`users.importSshPublicKey` through google-api-python-client and the `oslogin` v1 discovery
document it ships, with Application Default Credentials. Importing the same key again changes
nothing, so every task may ask. The account is the stack's `os_login_account` output (the
principal's email), or `RAY_GCP_OS_LOGIN_ACCOUNT` when the principal is a group.
`RAY_GCP_OSLOGIN_ENDPOINT` (host:port) points it at an emulator or the tests' fake, over http.
"""

from __future__ import annotations

import os
from typing import Any

from ops.errors import OpsError
from ops.stack import StackOutputs

ACCOUNT_ENV = "RAY_GCP_OS_LOGIN_ACCOUNT"
ENDPOINT_ENV = "RAY_GCP_OSLOGIN_ENDPOINT"
CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform"


def os_login_user(outputs: StackOutputs, public_key: str) -> str:
    """Import `public_key` (`ssh-ed25519 AAAA...`) into the account's OS Login profile for the
    stack's project; the profile's primary POSIX user name."""
    account = os.environ.get(ACCOUNT_ENV) or outputs.os_login_account
    if not account:
        raise OpsError(
            "provider.os_login.principal is not one account (a group?): set "
            f"{ACCOUNT_ENV} to the Google account you log in with, e.g. alice@example.com"
        )
    answer = _import_key(account, outputs.project, public_key)
    accounts = (answer.get("loginProfile") or {}).get("posixAccounts") or []
    primary = next((a for a in accounts if a.get("primary")), accounts[0] if accounts else None)
    if not primary or not primary.get("username"):
        raise OpsError(f"OS Login gave {account} no POSIX account for project "
                       f"{outputs.project}: is OS Login enabled there?")
    return primary["username"]


def _import_key(account: str, project: str, public_key: str) -> dict[str, Any]:
    from google.auth.exceptions import GoogleAuthError
    from googleapiclient.errors import HttpError

    try:
        request = _service().users().importSshPublicKey(
            parent=f"users/{account}", projectId=project, body={"key": public_key}
        )
        return request.execute()
    except HttpError as exc:
        raise OpsError(
            f"OS Login did not take the stack's key for {account} in project {project} "
            f"(HTTP {exc.status_code}: {exc.reason}): that account needs "
            "roles/compute.osAdminLogin (provider.os_login.principal, granted by `invoke up`)"
        ) from None
    except GoogleAuthError as exc:
        raise OpsError(f"OS Login needs your Google credentials: run `gcloud auth "
                       f"application-default login` ({exc})") from None
    except OSError as exc:
        raise OpsError(f"cannot reach the OS Login API: {exc}") from None


def _service() -> Any:
    """The `oslogin` v1 client from the discovery document google-api-python-client ships."""
    import google.auth
    from googleapiclient.discovery import build

    credentials, _ = google.auth.default(scopes=[CLOUD_PLATFORM])
    endpoint = os.environ.get(ENDPOINT_ENV)
    options = {"api_endpoint": f"http://{endpoint}/"} if endpoint else None
    return build("oslogin", "v1", credentials=credentials, static_discovery=True,
                 client_options=options)
