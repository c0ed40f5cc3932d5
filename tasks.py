"""invoke tasks: what users type. Each task is a few lines over a library function."""

from __future__ import annotations

from invoke import task  # noqa: F401  (tasks are added below, one section per room)
