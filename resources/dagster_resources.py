"""Dagster ConfigurableResources wrapping the plain-Python catalog and safe executor."""

from dagster import ConfigurableResource
from pydantic import field_validator

from resources.catalog import Catalog, CatalogEntry
from resources.sql_executor import DEFAULT_MAX_ROWS, DEFAULT_TIMEOUT_S, Outcome, check_timeout, execute_sql


class SeedCatalogResource(ConfigurableResource):
    """The registry of seed databases (``$QUANDARY_HOME/catalog.json`` unless configured)."""

    catalog_path: str | None = None

    def catalog(self) -> Catalog:
        return Catalog(self.catalog_path)

    def entry(self, db_id: str) -> CatalogEntry:
        return self.catalog().get(db_id)


class SafeSqlResource(ConfigurableResource):
    """Executes untrusted SQL read-only with a timeout and a row cap."""

    timeout_s: float = DEFAULT_TIMEOUT_S
    max_rows: int = DEFAULT_MAX_ROWS

    @field_validator("timeout_s")
    @classmethod
    def _finite_timeout(cls, v: float) -> float:
        return check_timeout(v)  # nan/inf would switch the deadline off

    def execute(self, db_path: str, sql: str) -> Outcome:
        return execute_sql(db_path, sql, timeout_s=self.timeout_s, max_rows=self.max_rows)
