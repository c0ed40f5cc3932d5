"""One-line errors for problems a user can fix, and the bridge that turns them into exits."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager

TRACEBACK_ENV = "RAY_GCP_TRACEBACK"
# Errors of other layers that are the user's to fix, by module (imported only if it was used).
_USER_ERRORS = (
    ("infra.config.errors", "ConfigError"),
    ("infra.stack_config", "StackFileError"),
    ("infra.stack_config", "StateDirError"),
    ("bootstrap.local_cluster", "LocalClusterError"),
)


# The roles README.md ("Who can do what" -> "You, running the tasks") asks of whoever runs the
# tasks, by the permission a 403 names (the first prefix that matches).
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
    """For an API's refusal that names a permission: which role of the README's list grants it
    (" (your Google account needs roles/...)"), else ""."""
    found = _DENIED.search(message)
    if found is None:
        return ""
    role = next((role for prefix, role in _ROLE_OF_PERMISSION
                 if found[1].startswith(prefix)), None)
    return (f" (your Google account needs {role} for {found[1]}: README, "
            "\"Who can do what\")") if role else ""


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
    line says so, and $RAY_GCP_TRACEBACK=1 shows its traceback."""
    from invoke.exceptions import Exit, UnexpectedExit

    try:
        yield
    except (Exit, UnexpectedExit):
        raise  # invoke's own: it prints them without a trace
    except OpsError as exc:
        raise Exit(f"error: {exc}", code=exc.exit_code) from None
    except KeyboardInterrupt:
        raise Exit("interrupted", code=130) from None
    except Exception as exc:
        if _is_user_error(exc):
            raise Exit(f"error: {exc}", code=1) from None
        if os.environ.get(TRACEBACK_ENV):
            raise
        raise Exit(f"error: unexpected {type(exc).__name__}: {exc} (a bug: rerun with "
                   f"{TRACEBACK_ENV}=1 and report the traceback)", code=1) from None


def _is_user_error(exc: Exception) -> bool:
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
