"""The registry of AmbiTab conversions: one ``build`` per corpus, called the same way.

``build_corpus(name, data_root, seed=..., council=..., progress=..., **options)`` returns a
:class:`~pipelines.ambitab.build.BuildResult`. Corpora whose paper build needs an LLM (EW-Bird's
keep/drop filter, Bird's authoring stages) take a council; without one, that step is reported as
skipped, never silently dropped.
"""

from __future__ import annotations

import importlib
import inspect
import os
from pathlib import Path

from pipelines.ambitab.build import BuildResult
from pipelines.ambitab.record import CORPORA
from storage.paths import shared_data_root, user_path

DATA_ENV = "QUANDARY_AMBITAB_DATA"
# module per corpus (the corpus names are the record's `corpus` values)
MODULES = {
    "ambrosia": "ambrosia",
    "ambiqt": "ambiqt",
    "taco": "taco",
    "ew_bird": "ewbird",
    "bird_interact": "bird_interact",
    "bird": "bird",
}


def default_data_root() -> Path:
    """``$QUANDARY_AMBITAB_DATA``, else the shared data folder (``storage.paths.shared_data_root``:
    ``$QUANDARY_DATA`` or ``../shared/data`` next to the repo), absolute."""
    env = os.environ.get(DATA_ENV)
    return user_path(env) if env else shared_data_root()


def available() -> list[str]:
    out = []
    for name in CORPORA:
        try:
            importlib.import_module(f"pipelines.ambitab.{MODULES[name]}")
        except ModuleNotFoundError:
            continue
        out.append(name)
    return out


def converter(name: str):
    if name not in CORPORA:
        raise ValueError(f"unknown corpus {name!r}; expected one of {', '.join(CORPORA)}")
    try:
        return importlib.import_module(f"pipelines.ambitab.{MODULES[name]}")
    except ModuleNotFoundError as exc:
        raise ValueError(f"corpus {name!r} has no conversion in this build") from exc


def build_corpus(
    name: str, data_root: Path | None = None, seed: int = 0, progress=None, allow_malformed: int = 0, **options
) -> BuildResult:
    """Build ``name``; a damaged source never builds green with fewer records (:func:`check_build`)."""
    module = converter(name)
    fn = module.build
    params = inspect.signature(fn).parameters
    kwargs = {k: v for k, v in options.items() if k in params}
    if "progress" in params:
        kwargs["progress"] = progress
    return check_build(fn(Path(data_root or default_data_root()), seed=seed, **kwargs), allow_malformed)


def check_build(result: BuildResult, allow_malformed: int = 0) -> BuildResult:
    """Issue 34 item 9: rows that cannot be read as their format promises (not an object, a missing
    field, a duplicated id) fail the build naming the file and line, unless the user allows that
    many; and every record's reference SQL must parse (sqlglot, in the record's dialect)."""
    from pipelines.ambitab.sources import MALFORMED, SourceCorrupt

    bad = [r for r in result.rejects if r.stage == MALFORMED]
    if len(bad) > allow_malformed:
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        raise SourceCorrupt(
            f"{result.corpus}: {bad[0].reason}{more}; restore the source from its release, or pass "
            f"--allow-malformed {len(bad)} to build without {'these rows' if len(bad) > 1 else 'this row'}"
        )
    for record in result.records:
        dialect = "postgres" if record.spec.sql_engine_name.lower().startswith("postgres") else "sqlite"
        for sql in record.verifier.reference_sql:
            problem = reference_sql_problem(sql, dialect)
            if problem:
                sources = ", ".join(f"{k} {v}" for k, v in record.provenance.source_ids.items()) or record.record_id
                raise SourceCorrupt(
                    f"{result.corpus}: record {record.record_id} ({sources}): reference SQL does not parse as "
                    f"{dialect} ({problem}); fix the source row or restore it from the release"
                )
    return result


def reference_sql_problem(sql: str, dialect: str) -> str | None:
    """Why ``sql`` does not parse (first line of the parser's message), or None."""
    import logging

    import sqlglot  # lazy: the registry stays light to import

    if not isinstance(sql, str) or not sql.strip():
        return "empty"
    sqlglot_logger = logging.getLogger("sqlglot")
    level = sqlglot_logger.level
    sqlglot_logger.setLevel(logging.ERROR)  # "falling back to a Command" warnings for PL/pgSQL bodies
    try:
        sqlglot.parse(sql, read=dialect)
    except Exception as exc:  # noqa: BLE001 - any parser error is a bad reference
        return (str(exc).splitlines() or [type(exc).__name__])[0][:120]
    finally:
        sqlglot_logger.setLevel(level)
    return None
