"""One-line errors for problems a user can fix, and the bridge that turns them into exits."""

from __future__ import annotations

import logging
import os
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

TRACEBACK_ENV = "RAY_GCP_TRACEBACK"
# Errors of other layers that are the user's to fix, by module (imported only if it was used).
_USER_ERRORS = (
    ("model.config.errors", "ConfigError"),
    ("model.stack_config", "StackFileError"),
    ("model.stack_config", "StateDirError"),
    ("bootstrap.local_cluster", "LocalClusterError"),
)


# The roles docs/security.md ("Who can do what" -> "You, running the tasks") asks of whoever
# runs the tasks, by the permission a 403 names (the first prefix that matches).
_ROLE_OF_PERMISSION = (
    ("iam.serviceAccounts.actAs", "roles/iam.serviceAccountUser"),
    ("iam.serviceAccounts.", "roles/iam.serviceAccountAdmin"),
    ("resourcemanager.projects.", "roles/resourcemanager.projectIamAdmin"),
    ("compute.", "roles/compute.admin"),
    ("secretmanager.", "roles/secretmanager.admin"),
    ("storage.", "roles/storage.admin"),
    ("tpu.", "roles/tpu.admin"),
    ("serviceusage.", "roles/serviceusage.serviceUsageAdmin"),
)
# How Google's APIs name the permission in a 403: Compute "Required 'compute.x.y' permission",
# IAM, Secret Manager, TPU "Permission 'x.y.z' denied", Cloud Storage "does not have x.y.z".
_DENIED = re.compile(r"(?:Required '|Permission '|does not have )([a-z]+\.[A-Za-z]+\.[A-Za-z]+)")


def missing_role(message: str) -> str:
    """For an API's refusal that names a permission: which role of the docs' list grants it
    (" (your Google account needs roles/...)"), else ""."""
    found = _DENIED.search(message)
    if found is None:
        return ""
    role = next((role for prefix, role in _ROLE_OF_PERMISSION
                 if found[1].startswith(prefix)), None)
    return (f" (your Google account needs {role} for {found[1]}: "
            "docs/security.md, \"Who can do what\")") if role else ""


class OpsError(Exception):
    """A problem the user can fix; shown as one line (plus context lines) without a traceback."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@contextmanager
def user_errors() -> Iterator[None]:
    """Inside a task: OpsError and the user errors of other layers (a cluster YAML's
    ConfigError, a stack file's StackFileError, a local cluster that did not start) become
    invoke's Exit, so the user sees the message, not a trace. Anything else is a bug: one
    line says so, and $RAY_GCP_TRACEBACK=1 shows its traceback; but a problem of this
    machine's set-up (`environment_fix`: no pulumi backend, no or expired Google credentials,
    a provider plugin missing, a wrong passphrase) is one line with its fix."""
    from invoke.exceptions import Exit, UnexpectedExit

    quiet_library_logs()
    try:
        yield
    except (Exit, UnexpectedExit):
        raise  # invoke's own: it prints them without a trace
    except OpsError as exc:
        raise Exit(f"error: {exc}", code=exc.exit_code) from None
    except KeyboardInterrupt:
        raise Exit("interrupted: the engine finishes the calls in flight and records them; run "
                   "the same command again to resume (README: Working as a team)",
                   code=130) from None
    except Exception as exc:
        if is_user_error(exc):
            raise Exit(f"error: {exc}", code=1) from None
        fix = environment_fix(f"{type(exc).__name__}: {exc}")
        if fix and not os.environ.get(TRACEBACK_ENV):
            raise Exit(f"error: {fix}", code=1) from None
        if os.environ.get(TRACEBACK_ENV):
            raise
        raise Exit(f"error: unexpected {type(exc).__name__}: {exc} (a bug: rerun with "
                   f"{TRACEBACK_ENV}=1 and report the traceback)", code=1) from None


_INSTALL_PLUGIN = re.compile(r"pulumi plugin install resource ([\w-]+) (v?[\w.+-]+)")
_NO_PLUGIN = re.compile(r"no resource plugin '?pulumi-resource-([\w-]+)'? found.*?"
                        r"(?:version|at version) (v?\d[\w.+-]*)", re.DOTALL)
_ADC_FIX = ("run `gcloud auth application-default login`, or set provider.gcp_credentials in "
            "the cluster YAML")
ENVIRONMENT_FIXES: tuple[tuple[re.Pattern[str], Callable[[re.Match[str]], str]], ...] = (
    (re.compile(r"incorrect passphrase"),
     lambda _: "the passphrase does not open this stack's secrets: set "
               "PULUMI_CONFIG_PASSPHRASE or PULUMI_CONFIG_PASSPHRASE_FILE to the one the stack "
               "was created with (a stack `invoke up -c` created uses .pulumi-passphrase in "
               "the state folder: set RAY_GCP_STATE_DIR to that folder if it moved)"),
    (re.compile(r"passphrase must be set with PULUMI_CONFIG_PASSPHRASE"),
     lambda _: "the stack keeps its secrets under a passphrase and none was given: set "
               "PULUMI_CONFIG_PASSPHRASE or PULUMI_CONFIG_PASSPHRASE_FILE (the team's, from your "
               "secret manager), or make new stacks under your key service with "
               "RAY_GCP_SECRETS_PROVIDER or the stack file's secretsprovider (docs/team.md)"),
    (re.compile(r"open keeper|failed to connect to gcpkms|missing google credentials|"
                r"/v1/transit/(?:en|de)crypt/|cloudkms\.googleapis\.com"),
     lambda _: "the stack's secrets provider (the key service its stack file's "
               "secretsprovider names) could not be reached or refused this machine: for "
               "gcpkms:// run `gcloud auth application-default login` as an account with "
               "roles/cloudkms.cryptoKeyEncrypterDecrypter on the key; for hashivault:// set "
               "VAULT_ADDR and VAULT_TOKEN to a token that may use the key"),
    (re.compile(r"PULUMI_ACCESS_TOKEN must be set for login|not logged in|"
                r"run `pulumi login`", re.IGNORECASE),
     lambda _: "pulumi has no backend to keep the stack's state in: run `pulumi login` "
               "(Pulumi Cloud) or `pulumi login --local`, or set PULUMI_BACKEND_URL (e.g. "
               "file://~/.pulumi-state); a stack `invoke up -c` created keeps its state in the "
               "state folder: if that folder moved, set RAY_GCP_STATE_DIR to where it is now"),
    (_INSTALL_PLUGIN,
     lambda found: f"the {found[1]} provider plugin {found[2]} is not installed and could not "
                   f"be downloaded: run `pulumi plugin install resource {found[1]} "
                   f"{found[2]}` where the network is reachable, then run this again"),
    (_NO_PLUGIN,
     lambda found: f"the {found[1]} provider plugin {found[2]} is not installed and could not "
                   f"be downloaded: run `pulumi plugin install resource {found[1]} "
                   f"{found[2].removeprefix('v')}` where the network is reachable, then run "
                   "this again"),
    (re.compile(r"invalid_grant|expired or revoked|Reauthentication is needed|"
                r"invalid authentication credentials|UNAUTHENTICATED|RefreshError",
                re.IGNORECASE),
     lambda _: "Google refused the credentials (expired or revoked): run `gcloud auth "
               "application-default login` again, or renew provider.gcp_credentials"),
    (re.compile(r"DefaultCredentialsError|could not find default credentials|default "
                r"credentials were not found", re.IGNORECASE),
     lambda _: f"no Google credentials on this machine: {_ADC_FIX}"),
)
"""Problems of this machine's set-up, known by what the pulumi CLI or Google's libraries say
(the real texts: tests/ops/stacks/test_environment_fixes.py), each with the line that fixes it."""


def environment_fix(text: str) -> str | None:
    """The fix of the first set-up problem `text` (an error's text) shows, else None."""
    for pattern, fix in ENVIRONMENT_FIXES:
        found = pattern.search(text)
        if found:
            return fix(found)
    return None


QUIET_LOGGERS = ("paramiko",)
"""Libraries that log a failure they also raise: paramiko's transport thread logs "Error
reading SSH protocol banner" with its traceback (ERROR, which Python's last-resort handler
prints to the terminal when nothing is configured) and then raises it to the caller, which says
it in one line."""


def quiet_library_logs() -> None:
    """The logging set-up of a task: the QUIET_LOGGERS' records go nowhere (the errors they
    describe reach the task as exceptions)."""
    for name in QUIET_LOGGERS:
        logger = logging.getLogger(name)
        logger.propagate = False
        if not any(isinstance(handler, logging.NullHandler) for handler in logger.handlers):
            logger.addHandler(logging.NullHandler())


def is_user_error(exc: BaseException) -> bool:
    """OpsError, or a user error of a layer this process has loaded."""
    if isinstance(exc, OpsError):
        return True
    # Only a task that loaded a layer can raise its errors: `exec` never pays for importing
    # pydantic just to check.
    for module, name in _USER_ERRORS:
        loaded = sys.modules.get(module)
        if loaded is not None and isinstance(exc, getattr(loaded, name)):
            return True
    return False


def exit_status(status: int) -> None:
    """Leave the task with the remote command's status (0 returns normally)."""
    if status:
        from invoke.exceptions import Exit

        raise Exit(code=status)
