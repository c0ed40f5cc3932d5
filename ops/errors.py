"""One-line errors for problems a user can fix, and the bridge that turns them into exits."""

from __future__ import annotations

import os
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
        if is_user_error(exc):
            raise Exit(f"error: {exc}", code=1) from None
        if os.environ.get(TRACEBACK_ENV):
            raise
        raise Exit(f"error: unexpected {type(exc).__name__}: {exc} (a bug: rerun with "
                   f"{TRACEBACK_ENV}=1 and report the traceback)", code=1) from None


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
