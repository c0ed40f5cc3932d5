"""One-line errors for problems a user can fix, and the bridge that turns them into exits."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager


class OpsError(Exception):
    """A problem the user can fix; shown as one line (plus context lines) without a traceback."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@contextmanager
def user_errors() -> Iterator[None]:
    """Inside a task: OpsError, a cluster YAML's ConfigError and a stack file's StackFileError
    become invoke's Exit, so the user sees the message, not a trace."""
    from invoke.exceptions import Exit

    try:
        yield
    except OpsError as exc:
        raise Exit(f"error: {exc}", code=exc.exit_code) from None
    except KeyboardInterrupt:
        raise Exit("interrupted", code=130) from None
    except Exception as exc:
        if _is_config_error(exc):
            raise Exit(f"error: {exc}", code=1) from None
        raise


def _is_config_error(exc: Exception) -> bool:
    # Only a task that loaded the config model (or read a stack file) can raise their errors:
    # `exec` never pays for importing pydantic just to check.
    for module, name in (("infra.config.errors", "ConfigError"),
                         ("infra.stack_config", "StackFileError")):
        loaded = sys.modules.get(module)
        if loaded is not None and isinstance(exc, getattr(loaded, name)):
            return True
    return False


def exit_status(status: int) -> None:
    """Leave the task with the remote command's status (0 returns normally)."""
    if status:
        from invoke.exceptions import Exit

        raise Exit(code=status)
