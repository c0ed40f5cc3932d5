"""A fake of the Compute v1 / TPU v2 REST APIs on 127.0.0.1, with fault injection.

The real client libraries are pointed at it, so tests exercise what goes over the wire.
Every call is judged for who makes it (identity.py: tokens, scopes, the role table; access.py:
each route's permission): the session's user (tests/conftest.py) or a VM's service account.
"""

from tests.fakes.compute.faults import Faults
from tests.fakes.compute.server import FakeComputeServer

__all__ = ["FakeComputeServer", "Faults"]
