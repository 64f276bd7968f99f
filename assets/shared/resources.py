"""The Dagster resources every job shares, each a thin wrapper over the plain-Python layer below:
the seed catalog, the safe SQL executor and the LLM council. One instance of each is bound in
``assets/shared/definitions.py``.

``CouncilResource``::

    defs = Definitions(assets=[...], resources={"council": CouncilResource(config_path=None)})

    @asset
    def validated(context, council: CouncilResource, candidates):
        validators = council.get_council("validators")
        outcome = validators.vote(messages, Verdict, extract=lambda v: v.ok, tag=dict(stage="s2", candidate_id=cid))

``config_path`` (or ``$QUANDARY_COUNCIL_CONFIG``) selects the council config; ``None`` = embedded
default. The embedded SmolLM2 server is *not* started when the resource is built: it starts on the
first call that needs it, once per process, and stops at process exit, so runs that hit only the
cache never load the model.
"""

from dagster import ConfigurableResource
from pydantic import field_validator

from assets.shared.checked_config import check_resource_config_on_launch
from resources.catalog import Catalog, CatalogEntry
from resources.llm.config import CouncilConfig, load_council_config
from resources.llm.council import Council
from resources.llm.registry import call_log, get_council
from resources.sql import DEFAULT_MAX_ROWS, DEFAULT_TIMEOUT_S, Outcome, check_timeout, execute_sql
from storage.paths import confined_path, shown


def check_paths_on_launch(*fields: str, write: tuple[str, ...] = (), exist: tuple[str, ...] = ()):
    """A launch check: each of ``fields`` given in run config lies inside the project's roots — those
    in ``write`` under the state root ``$QUANDARY_HOME`` (issue 23 item 7, issue 34 item 5: the
    launchpad must not point reads or writes at the rest of the host); those in ``exist`` must exist.
    Messages never echo a value that came from an environment variable (``{env: X}``)."""

    def check(values: dict) -> None:
        for f in (*fields, *write):
            if values.get(f) is not None:
                # UnsafePathError is a ValueError: refuses the launch
                path = confined_path(values[f], f, write=f in write)
                if f in exist and not path.exists():
                    raise ValueError(f"{f} {shown(values[f])} does not exist")

    return check


class SeedCatalogResource(ConfigurableResource):
    """The registry of seed databases (``$QUANDARY_HOME/catalog.json`` unless configured; the shared
    catalog table in distributed mode)."""

    catalog_path: str | None = None

    def __init__(self, **data):
        super().__init__(**data)
        check_resource_config_on_launch(self, check_paths_on_launch(write=("catalog_path",)))

    def catalog(self) -> Catalog:
        return Catalog(self.catalog_path)

    def entry(self, db_id: str) -> CatalogEntry:
        """The registered entry, with ``path`` the file to read on this node: refused if its bytes
        changed since registration (issue 23 item 6), fetched by hash from the shared store in
        distributed mode when this node lacks it (issue 21 item 5)."""
        from dataclasses import replace

        from resources.catalog import local_seed

        entry = self.catalog().get(db_id)
        return replace(entry, path=local_seed(entry.path, entry.sha256, db_id))


def seed_row(seed_databases) -> dict:
    """The ``seed_databases`` row of a partition, its ``path`` the file to read on this node: checked
    against the hash the run recorded (fetched by that hash from the shared store in distributed
    mode, if this node lacks it)."""
    from resources.catalog import local_seed

    row = seed_databases.row(0, named=True)
    return {**row, "path": local_seed(row["path"], row.get("sha256"), row["db_id"])}


class SafeSqlResource(ConfigurableResource):
    """Executes untrusted SQL read-only with a timeout and a row cap."""

    timeout_s: float = DEFAULT_TIMEOUT_S
    max_rows: int = DEFAULT_MAX_ROWS

    def __init__(self, **data):
        super().__init__(**data)
        check_resource_config_on_launch(self)  # the shared rule: a finite timeout before launch (#45 item 1)

    @field_validator("timeout_s")
    @classmethod
    def _finite_timeout(cls, v: float) -> float:
        return check_timeout(v)  # nan/inf would switch the deadline off

    def execute(self, db_path: str, sql: str) -> Outcome:
        return execute_sql(db_path, sql, timeout_s=self.timeout_s, max_rows=self.max_rows)


def _check_council_on_launch(values: dict) -> None:
    """Paths confined to the project's home; a council file given at launch loads (like the default
    one is checked before a run), so a bad file or a disallowed api_key_env refuses the launch."""
    check_paths_on_launch("config_path", write=("log_path",))(values)
    if values.get("config_path"):
        from assets.shared.preflight import check_council

        try:
            check_council(values["config_path"])
        except ValueError as exc:
            value = values["config_path"]
            if shown(value) == repr(value):
                raise
            # `config_path: {env: SECRET}`: say what failed without the secret (issue 34 item 5)
            raise ValueError(str(exc).replace(value, "(config_path from an environment variable)")) from None


class CouncilResource(ConfigurableResource):
    config_path: str | None = None
    log_path: str | None = None  # default: the deployment's call log (storage.llm_log.open_call_log)

    def __init__(self, **data):
        super().__init__(**data)
        check_resource_config_on_launch(self, _check_council_on_launch)

    def council_config(self) -> CouncilConfig:
        return load_council_config(self.config_path)

    def get_council(self, role: str) -> Council:
        return get_council(role, self.config_path, log_path=self.log_path)

    def roles(self) -> list[str]:
        return sorted(self.council_config().councils)

    def call_log_path(self) -> str:
        return str(call_log(self.log_path).path)
