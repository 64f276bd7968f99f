"""The launch checks rely on Dagster's private resource state in exactly two functions
(assets/shared/checked_config.py). This test names them when a Dagster upgrade changes that state,
instead of letting every launch check fail somewhere else, or worse, stop checking silently."""

import pytest
from dagster import DagsterInvalidConfigError, Field, asset, materialize

from assets.shared.checked_config import (
    check_resource_config_on_launch,
    replace_resource_config_schema,
    resource_config_schema,
)
from assets.shared.resources import SeedCatalogResource

UPGRADE_HINT = (
    "Dagster's private resource state changed: re-implement resource_config_schema / "
    "replace_resource_config_schema in assets/shared/checked_config.py for this Dagster version"
)


def test_the_private_resource_state_is_what_checked_config_expects():
    resource = SeedCatalogResource(catalog_path=None)
    try:
        field, bound = resource_config_schema(resource)
        assert isinstance(field, Field) and "catalog_path" in field.config_type.fields
        assert isinstance(bound, dict)
        replace_resource_config_schema(resource, field)
        assert "catalog_path" in resource_config_schema(resource)[0].config_type.fields
    except (AttributeError, TypeError, AssertionError) as exc:
        pytest.fail(f"{UPGRADE_HINT} ({type(exc).__name__}: {exc})")


@pytest.mark.integration
def test_a_wrapped_resource_still_refuses_a_bad_value_at_launch():
    ran = []
    refused = []

    class Probe(SeedCatalogResource):
        def setup_for_execution(self, context) -> None:
            pass

    resource = Probe()

    def check(values):
        if values.get("catalog_path") == "bad":
            refused.append(values)
            raise ValueError("catalog_path 'bad' refused")

    check_resource_config_on_launch(resource, check)

    @asset
    def probe(seed_catalog: Probe):
        ran.append(1)
        return 1

    with pytest.raises(DagsterInvalidConfigError, match="catalog_path 'bad' refused"):
        materialize(
            [probe],
            resources={"seed_catalog": resource},
            run_config={"resources": {"seed_catalog": {"config": {"catalog_path": "bad"}}}},
        )
    assert refused and not ran, UPGRADE_HINT
