"""What the dynamic providers' plugin process imports: importing infra.workers (as every
preview does) loads no google-cloud client library; a worker group's whole life against the
fake (create, read, update, stop, delete: every Compute call it makes) never loads
google-cloud-compute, whose package loads every Compute service client (1.5-2 s of CPU); only
a TPU client, built when a TPU is asked, loads google-cloud-tpu."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import PROJECT_ROOT
from tests.fakes.compute import FakeComputeServer, Faults

COMPUTE, TPU = "google.cloud.compute_v1", "google.cloud.tpu_v2"

IMPORT_ONLY = """
import json, sys
import infra.workers
from infra.workers import ClusterSweeper, WorkerGroup
at_import = [m for m in {heavy} if m in sys.modules]
from infra.workers.clients import ApiClients, build_credentials
clients = ApiClients(build_credentials(None, "127.0.0.1:1"), "127.0.0.1:1")
clients.compute.session
after_compute = [m for m in {heavy} if m in sys.modules]
clients.tpu
after_tpu = [m for m in {heavy} if m in sys.modules]
print(json.dumps([at_import, after_compute, after_tpu]))
"""

A_GROUPS_LIFE = """
import json, sys
from tests.fakes.compute.helpers import fast_provider, group_props
provider = fast_provider()
props = group_props({endpoint!r}, 2, cache_stopped_nodes=True)
made = provider.create(props)
provider.read(made.id, made.outs)
smaller = provider.update(made.id, made.outs, group_props({endpoint!r}, 1,
                                                        cache_stopped_nodes=True))
provider.delete(made.id, smaller.outs)
print(json.dumps([m for m in {heavy} if m in sys.modules]))
"""


def _probe(code: str) -> list:
    result = subprocess.run([sys.executable, "-c", code], cwd=PROJECT_ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])


def test_importing_infra_workers_loads_no_client_library_and_compute_never_does():
    at_import, after_compute, after_tpu = _probe(IMPORT_ONLY.format(heavy=(COMPUTE, TPU)))

    assert at_import == []
    assert after_compute == []
    assert after_tpu == [TPU], "the probe must see the TPU library once its client exists"


def test_a_worker_groups_whole_life_never_imports_google_cloud_compute():
    with FakeComputeServer(Faults(operation_s=0.0)) as fake:
        loaded = _probe(A_GROUPS_LIFE.format(endpoint=fake.endpoint, heavy=(COMPUTE,)))
        assert len(fake.instances("my-proj", "us-west1-a")) == 0
        assert fake.cloud.calls["bulkInsert"] == 1
    assert loaded == []
