"""A misspelled provider key is named as the typo it is, with the key it is close to; a key
that is close to nothing is what Ray makes of it: ignored, with a warning."""

from __future__ import annotations

import pytest
from bootstrap_stubs import cluster

from infra.config import ConfigError


@pytest.mark.parametrize(("typo", "meant"), [("availabilty_zone", "availability_zone"),
                                             ("cache_stoped_nodes", "cache_stopped_nodes")])
def test_a_misspelled_provider_key_says_did_you_mean(typo, meant):
    provider = {"type": "gcp", "region": "us-west1", "availability_zone": "us-west1-a",
                "project_id": "my-gcp-project"}
    provider[typo] = provider.pop(meant, True)
    with pytest.raises(ConfigError) as error:
        cluster(provider=provider)
    assert (f"provider.{typo}", f"is not a provider key: did you mean {meant}? Rename it") \
        in error.value.problems


def test_a_provider_key_close_to_nothing_is_ignored_as_ray_does():
    config = cluster(provider={"type": "gcp", "region": "us-west1",
                               "availability_zone": "us-west1-a",
                               "project_id": "my-gcp-project", "team_budget": 3})
    assert any(w.startswith("provider.team_budget: not used on GCP, ignored")
               for w in config.warnings)
