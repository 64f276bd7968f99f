"""What every job's slice shares: the versioned-Parquet IO manager and the resources over the seed
catalog, the safe SQL executor and the LLM council (bound once, here)."""

from dagster import Definitions

from assets.shared.io_manager import VersionedParquetIOManager
from assets.shared.resources import CouncilResource, SafeSqlResource, SeedCatalogResource

defs = Definitions(
    resources={
        "io_manager": VersionedParquetIOManager(),
        "seed_catalog": SeedCatalogResource(),
        "safe_sql": SafeSqlResource(),
        "council": CouncilResource(),
    },
)
