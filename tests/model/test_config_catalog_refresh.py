"""`invoke catalog-refresh` rebuilds the catalog and the price table from Google's list APIs,
here the fake's (tests/fakes/compute/listings.py), through a real HTTP session: every page of
each list is read, the curated parts are kept, and what the cluster model then checks
against is what the APIs said."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.catalog_refresh import (
    PRICE_FILE,
    CatalogRefreshError,
    Roots,
    live_getter,
    refresh,
)
from model.config.catalog import CATALOG_FILE
from tests.fakes.compute import FakeComputeServer
from tests.fakes.compute.identity import USER
from tests.support.warm_python import run_module


@pytest.fixture
def fake():
    with FakeComputeServer() as server:
        yield server


def _getter(tokens: list[str]):
    """The task's own getter, as the user (the session's credentials, tests/conftest.py: the
    fake checks each call's token, scope and IAM)."""
    live, _ = live_getter()

    def get(url: str, params: dict[str, Any]) -> dict[str, Any]:
        tokens.append(params.get("pageToken", ""))
        return live(url, params)

    return get


def _refreshed(fake: FakeComputeServer, folder: Path, page_size: int = 500
               ) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    folder.mkdir(exist_ok=True)
    catalog_file, price_file = folder / "catalog.yaml", folder / "price_table.yaml"
    catalog_file.write_text(CATALOG_FILE.read_text())
    price_file.write_text(PRICE_FILE.read_text())
    root = f"http://{fake.endpoint}"
    tokens: list[str] = []
    refresh(_getter(tokens), "my-proj",
            Roots(compute=f"{root}/compute/v1", tpu=f"{root}/v2", billing=f"{root}/v1",
                  page_size=page_size),
            catalog_file, price_file, today="2027-01-02")
    return (yaml.safe_load(catalog_file.read_text()), yaml.safe_load(price_file.read_text()),
            tokens)


def test_the_catalog_is_what_the_apis_list_with_the_curated_rules_kept(fake, tmp_path):
    catalog, _, _ = _refreshed(fake, tmp_path)

    assert catalog["as_of"] == "2027-01-02"
    assert catalog["regions"] == {"us-central1": ["a", "b", "c", "f"], "us-central2": ["b"],
                                  "us-west1": ["a", "b"]}
    series = catalog["machine_series"]
    assert series["n2"]["shapes"] == {"standard": [8, 16]}
    assert series["n2"]["custom"] == yaml.safe_load(CATALOG_FILE.read_text())[
        "machine_series"]["n2"]["custom"]
    assert series["e2"]["named"] == ["e2-medium"]
    assert series["c3"]["named"] == ["c3-standard-4-lssd"]
    assert series["g2"]["bundled"] == {"g2-standard-4": ["nvidia-l4", 1]}
    assert catalog["gpus"]["nvidia-tesla-t4"] == {"max_per_vm": 4, "counts": {"n1": [1, 2, 4]}}
    assert catalog["gpus"]["nvidia-l4"] == {"max_per_vm": 8}
    assert catalog["tpus"]["v4"] == {"config_type": "V4", "cores_per_chip": 2, "dimensions": 3,
                                     "sizes": [8, 16], "zones": ["us-central2-b"]}
    assert catalog["tpus"]["v5litepod"]["cores_per_chip"] == 1
    assert catalog["tpus"]["v5litepod"]["also_called"] == ["v5e", "v5lite"]
    assert catalog["tpus"]["v5litepod"]["zones"] == ["us-central1-a"]


def test_every_page_is_read_when_google_pages_the_lists(fake, tmp_path):
    whole, _, _ = _refreshed(fake, tmp_path / "whole")
    paged, _, tokens = _refreshed(fake, tmp_path / "paged", page_size=2)

    assert paged == whole
    assert any(tokens), "the fake answered in more than one page"


def test_compute_prices_come_from_the_reference_regions_skus(fake, tmp_path):
    _, prices, _ = _refreshed(fake, tmp_path)
    old = yaml.safe_load(PRICE_FILE.read_text())

    assert prices["as_of"] == "2027-01-02"
    assert prices["machine_families"]["c3"] == {"vcpu": 0.03465, "gib": 0.003938}
    assert prices["machine_families"]["n2"]["vcpu"] == 0.031611  # not Belgium's 0.034773
    assert prices["machine_families"]["c2"]["vcpu"] == 0.03398
    assert prices["gpus"]["nvidia-l4"] == {"on_demand": 0.5599, "spot": 0.2236}
    assert prices["machine_families"]["n2"]["spot_vcpu"] == 0.00768  # not the commitment's
    assert prices["gpus"]["nvidia-a100-80gb"]["on_demand"] == 3.92808
    assert prices["tpu_chips"] == old["tpu_chips"] and prices["disks"] == old["disks"]
    assert "Cloud Billing Catalog" in prices["source"]


def test_a_refreshed_catalog_is_one_the_cluster_model_reads(fake, tmp_path, monkeypatch):
    import model.config.catalog as catalog_module

    catalog, _, _ = _refreshed(fake, tmp_path)
    monkeypatch.setattr(catalog_module, "CATALOG_FILE", tmp_path / "catalog.yaml")
    for cached in (catalog_module.catalog, catalog_module._series_names,
                   catalog_module.machine_names, catalog_module._known_names):
        cached.cache_clear()
    try:
        assert catalog_module.check_machine_type("n2-standard-16").errors == []
        assert catalog_module.check_tpu_type("v4-8", "us-central1-a").errors
        assert catalog_module.as_of() == "2027-01-02"
    finally:
        for cached in (catalog_module.catalog, catalog_module._series_names,
                       catalog_module.machine_names, catalog_module._known_names):
            cached.cache_clear()


def test_a_read_that_fails_writes_neither_file(fake, tmp_path):
    fake.faults.error_statuses = [403]
    fake.faults.error_methods = {"listing.billing.skus.list"}
    before = CATALOG_FILE.read_text(), PRICE_FILE.read_text()

    with pytest.raises(CatalogRefreshError, match="answered 403"):
        _refreshed(fake, tmp_path)

    assert ((tmp_path / "catalog.yaml").read_text(),
            (tmp_path / "price_table.yaml").read_text()) == before


def test_the_task_without_credentials_says_how_to_get_them(tmp_path):
    import os

    root = Path(__file__).resolve().parents[2]
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("GOOGLE_", "CLOUDSDK_"))}
    env.update(HOME=str(tmp_path), CLOUDSDK_CONFIG=str(tmp_path / "gcloud"),
               PYTHONPATH=str(root), NO_GCE_CHECK="True",  # no metadata-server probe
               GOOGLE_APPLICATION_CREDENTIALS=str(tmp_path / "missing.json"))
    before = CATALOG_FILE.read_text()
    run = run_module(["invoke", "catalog-refresh"], cwd=root, env=env, timeout=120)

    assert run.returncode == 1
    assert run.stderr.strip().splitlines() == [
        "catalog-refresh: no Google application-default credentials: run `gcloud auth "
        "application-default login`, then `invoke catalog-refresh --project PROJECT`"]
    assert CATALOG_FILE.read_text() == before


def test_the_catalog_reads_need_your_compute_role(fake, tmp_path):
    """Compute's lists are read as you: without roles/compute.admin Google refuses them."""
    fake.platform.revoke("my-proj", "roles/compute.admin", USER)
    with pytest.raises(CatalogRefreshError, match="answered 403.*compute.regions.list"):
        _refreshed(fake, tmp_path)
