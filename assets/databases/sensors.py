"""Keep the dynamic ``databases`` partitions in sync with the seed catalog.

Registering a database from the CLI writes ``catalog.json``; this sensor (and the CLI itself,
when it can reach the instance) adds the partition so it shows up in the UI.
"""

from dagster import DefaultSensorStatus, SensorEvaluationContext, SensorResult, sensor

from assets.shared.partitions import databases_partitions
from resources.catalog import Catalog


@sensor(
    minimum_interval_seconds=30,
    default_status=DefaultSensorStatus.RUNNING,
    description="Adds a `databases` partition for every database in the seed catalog.",
)
def seed_catalog_sensor(context: SensorEvaluationContext):
    registered = set(Catalog().ids())
    existing = set(context.instance.get_dynamic_partitions(databases_partitions.name))
    new = sorted(registered - existing)
    if not new:
        return SensorResult(skip_reason="catalog and partitions already in sync")
    return SensorResult(dynamic_partitions_requests=[databases_partitions.build_add_request(new)])
