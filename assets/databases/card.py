"""The seed-database job's card (#28 item 1): registers a database's metadata and prompt context."""

from assets.databases.definitions import seed_job
from assets.shared.cards import JobCard


def config() -> dict:
    """The job takes no config: the database is the partition."""
    return {}


CARD = JobCard(job=seed_job, partitions="a registered database", config=config, database_partitions=True)
