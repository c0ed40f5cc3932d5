"""Importing infra.workers (as every preview does) must not load the google-cloud clients."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import PROJECT_ROOT

HEAVY = ("google.cloud.compute_v1", "google.cloud.tpu_v2")

PROBE = """
import json, sys
import infra.workers
from infra.workers import ClusterSweeper, WorkerGroup
at_import = [m for m in {heavy} if m in sys.modules]
from infra.workers.clients import ApiClients, build_credentials
clients = ApiClients(build_credentials(None, "127.0.0.1:1"), "127.0.0.1:1")
clients.instances, clients.tpu
after_clients = [m for m in {heavy} if m in sys.modules]
print(json.dumps([at_import, after_clients]))
"""


def test_importing_infra_workers_leaves_the_client_libraries_unloaded_until_a_client_is_built():
    result = subprocess.run(
        [sys.executable, "-c", PROBE.format(heavy=HEAVY)],
        cwd=PROJECT_ROOT, capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stderr
    at_import, after_clients = json.loads(result.stdout)

    assert at_import == []
    assert after_clients == list(HEAVY), "the probe must see the libraries once clients exist"
