"""A misspelled provider key is named as the typo it is, with the key it is close to; a key
that is close to nothing is what Ray makes of it: ignored, with a warning. A value of the wrong
type says what was given, what is expected and an example."""

from __future__ import annotations

import pytest

from model.config import ConfigError
from tests.support.bootstrap_stubs import cluster


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


@pytest.mark.parametrize(("change", "where", "expected"), [
    ({"provider": {"type": "gcp", "region": "us-west1", "availability_zone": "us-west1-a",
                   "project_id": 123}},
     "provider.project_id", 'is the number 123, expected text: write it as e.g. "123" (quoted)'),
    ({"head_node_type": ["head_t"]}, "head_node_type",
     'is a list, expected text: write it as e.g. "my-value"'),
    ({"max_workers": "many"}, "max_workers",
     "is the text 'many', expected a whole number: write it as e.g. 2"),
])
def test_a_wrong_type_says_what_was_given_what_is_expected_and_an_example(
    change, where, expected
):
    with pytest.raises(ConfigError) as error:
        cluster(**change)
    assert (where, expected) in error.value.problems
