"""Configuration checks made before any Dagster run exists, each failing with one or two lines that
name the file, the key and what is allowed. The CLI calls them before it starts a run; the
launchpad's run config reaches the same checks when a run is launched from the UI
(``assets/shared/checked_config.py``), so both refuse the same things in the same words."""

from pathlib import Path


class PreflightError(ValueError):
    """Bad configuration found before the run; ``str()`` is the message for the user."""


def check_database(db_id: str) -> None:
    """The database is registered and its file is still there."""
    from resources.catalog import Catalog

    catalog = Catalog()
    if db_id not in catalog.ids():
        known = ", ".join(sorted(catalog.ids())) or "none yet"
        raise PreflightError(
            f"database {db_id!r} is not registered (registered: {known}); use `quandary db register PATH`"
        )
    entry = catalog.get(db_id)
    path = Path(entry.path)
    if not path.is_file() and not _seed_shared(entry):
        raise PreflightError(
            f"database {db_id!r} is registered at {path}, but that file is gone; register it "
            f"again (`quandary db register NEW_PATH --db-id {db_id}`) or `quandary db remove {db_id}`"
        )


def _seed_shared(entry) -> bool:
    """In distributed mode a node without the file fetches it by hash from the shared store."""
    from storage.seeds import seed_backend, seed_key

    backend = seed_backend()
    return backend is not None and backend.exists(seed_key(entry.sha256, Path(entry.path).suffix))


def describe_validation_error(exc) -> str:
    """A pydantic ValidationError as ``key.path: message`` (the first error, and how many more)."""
    errors = exc.errors()
    parts = []
    for err in errors[:2]:
        key = ".".join(str(x) for x in err["loc"]) or "(top level)"
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown key"
        parts.append(f"{key}: {msg}")
    more = f" (+{len(errors) - 2} more)" if len(errors) > 2 else ""
    return "; ".join(parts) + more


def check_council(path: str | None = None):
    """Load the council file (``path``, else $QUANDARY_COUNCIL_CONFIG, else the embedded default);
    PreflightError naming the file and the bad key. Returns the CouncilConfig."""
    import yaml
    from pydantic import ValidationError

    from resources.llm.config import CONFIG_ENV, CouncilFileNotFound, Member, load_council_config, resolve_council_path

    try:
        resolved = resolve_council_path(path)
    except CouncilFileNotFound as exc:
        raise PreflightError(str(exc)) from None
    where = f"council file {resolved}" + ("" if path else f" (from ${CONFIG_ENV})")
    try:
        return load_council_config(resolved)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise PreflightError(f"{where}: YAML syntax error at{at}: {problem}") from None
    except ValidationError as exc:
        allowed = ", ".join(f for f in Member.model_fields if f != "name")
        hint = ""
        if any(e["type"] == "extra_forbidden" for e in exc.errors()):
            hint = f"\n  allowed top-level keys: members, councils; member keys: {allowed}"
        raise PreflightError(f"{where}: {describe_validation_error(exc)}{hint}") from None
    except (ValueError, OSError, UnicodeDecodeError) as exc:
        raise PreflightError(f"{where}: {' '.join(str(exc).split())}") from None


def check_keys(council, roles=None) -> None:
    """Every member the council's roles (or ``roles``) name has its API key variable set, read from
    the environment only (no server is contacted): PreflightError naming each variable Quandary
    reads (``api_key_env``)."""
    from resources.llm.config import missing_keys

    missing = missing_keys(council, roles)
    if missing:
        where = f" in {council.source}" if council.source != "embedded default" else ""
        raise PreflightError(f"missing API key{'s' if len(missing) > 1 else ''}{where}: " + "; ".join(missing))


def check_database_file(path: str) -> None:
    """A database file the CLI is about to query opens and its schema reads; a corrupt or foreign
    file is refused even for a query that would read no table (``SELECT 1`` never touches pages)."""
    from resources.catalog import BadDatabaseError, inspect_database

    if not Path(path).is_file():
        raise PreflightError(f"{path}: no such database file")
    try:
        inspect_database(path)
    except BadDatabaseError as exc:
        raise PreflightError(f"{path}: not a readable SQLite/DuckDB database ({' '.join(str(exc).split())})") from None


_GRID_LISTS = ("generators", "subcategories", "styles", "difficulties", "llm_subcategories")


def check_grid(grid: dict, council=None) -> None:
    """Values of a generation grid (GridConfig fields): types, n ≥ 1, known subcategories, styles and
    difficulties, generators that are 'programmatic' or members of ``council`` (a CouncilConfig).
    ValueError naming the key and what is allowed."""
    from pipelines.abiss.grid import GRID_FIELDS, PROGRAMMATIC, GridSpec

    unknown = sorted(set(grid) - set(GRID_FIELDS))
    if unknown:
        raise ValueError(f"unknown field(s) {unknown}; known: {', '.join(GRID_FIELDS)}")
    for key in ("n", "seed"):
        v = grid.get(key)
        if key in grid and (not isinstance(v, int) or isinstance(v, bool)):
            raise ValueError(f"{key}: expected a whole number (got {v!r})")
    values = {}
    for key in _GRID_LISTS:
        v = grid.get(key)
        if v is None:
            continue
        if not isinstance(v, (list, tuple)):
            raise ValueError(f"{key}: expected a list of names (got {v!r})")
        names = tuple(getattr(x, "value", x) for x in v)  # launchpad enums arrive as Enum members
        if not all(isinstance(x, str) for x in names):
            raise ValueError(f"{key}: expected a list of names (got {v!r})")
        values[key] = names
    spec = GridSpec()
    GridSpec(
        values.get("generators") or (PROGRAMMATIC,),
        values.get("subcategories", spec.subcategories),
        values.get("styles", spec.styles),
        values.get("difficulties", spec.difficulties),
        grid.get("n", spec.n),
        grid.get("seed", spec.seed),
        values.get("llm_subcategories"),
    ).validate()
    if council is not None and values.get("generators") is not None:
        known = [PROGRAMMATIC, *council.members]
        bad = [g for g in values["generators"] if g not in known]
        if bad:
            raise ValueError(f"generators: unknown generator(s) {bad}; known: {', '.join(known)}")


def load_grid(path: str) -> dict:
    """A grid YAML file as GridConfig fields; ValueError with the reason when it is not one."""
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ValueError(str(exc).splitlines()[0]) from None
    if not isinstance(data, dict):
        raise ValueError("expected a mapping of GridConfig fields (e.g. styles: [formal])")
    return data


def check_run_request(db_ids: list[str], grid_path: str | None = None) -> dict | None:
    """Everything a run of the main job needs before it exists, for `quandary run` and `quandary
    submit` alike: each database registered with its file present, the council loadable, the grid
    file (if any) valid for that council. Returns the grid (``None``: the paper's)."""
    for db_id in db_ids:
        check_database(db_id)
    council = check_council()
    check_keys(council)
    if not grid_path:
        return None
    from storage.paths import relative_note, user_path

    path = user_path(grid_path)  # the one data-path rule: relative to the current directory (#31 item 4)
    if not path.is_file():
        raise PreflightError(f"grid file {path} not found{relative_note(grid_path)}")
    try:
        grid = load_grid(str(path))
        check_grid(grid, council)
    except ValueError as exc:
        raise PreflightError(f"bad grid file {path}: {exc}") from None
    return grid
