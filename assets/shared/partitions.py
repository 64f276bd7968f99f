"""Partitioning shared by every per-database asset: one dynamic partition per seed database."""

from dagster import DynamicPartitionsDefinition

DATABASES_PARTITION = "databases"
databases_partitions = DynamicPartitionsDefinition(name=DATABASES_PARTITION)
