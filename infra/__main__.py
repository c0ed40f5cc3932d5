"""Pulumi entry point: a config error ends the run with its message, not a traceback."""

import pulumi

from infra.config import ConfigError
from infra.program import define_cluster

try:
    define_cluster()
except ConfigError as error:
    raise pulumi.RunError(str(error)) from None
