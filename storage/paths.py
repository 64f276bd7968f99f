"""Where Quandary keeps its state: one folder, ``$QUANDARY_HOME`` (default ``<project>/.quandary``),
and one Dagster instance, ``$DAGSTER_HOME`` (default ``<project>/.dagster_home``).

Both default to the project checkout, not the working directory, so the CLI from any folder and
``make ui`` see the same runs and artifacts (the Makefile exports the same two paths).

Layout::

    artifacts/<asset>/<partition>/<content-hash>.parquet   versioned artifacts (storage/)
    artifacts/<asset>/<partition>/LATEST                    pointer to the latest version
    llm_calls.sqlite                                        LLM call cache + log (council layer)
    audit.duckdb                                            audit catalog (views over artifacts)
    databases/                                              generated seed databases (demo)
"""

import os
import re
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]
# Telemetry off; the UI's community pop-up ("nux") off: it covered every page of a fresh instance
# (#31 item 7). An instance file that names either keeps its own choice.
DAGSTER_YAML = "telemetry:\n  enabled: false\nnux:\n  enabled: false\n"


class UnsafePathError(ValueError):
    """A name that would become a path (asset, partition key, id) is not one plain folder name."""


_SEGMENT_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.=+@-]*")
MAX_SEGMENT = 200


def path_segment(value, what: str = "name") -> str:
    """``value`` if it is safe as ONE folder or file name under a store, else :class:`UnsafePathError`.

    The one check at the storage boundary (issue 23 item 1): every asset name, partition key and
    id that becomes a path goes through here before a folder is made or read. Allowed: letters,
    digits and ``_ . = + @ -``, not starting with a dot or dash, at most 200 characters — so no
    ``..``, no separators, no absolute paths, no hidden or temp-file names, no control characters.
    """
    if not isinstance(value, str) or not value:
        raise UnsafePathError(f"{what} must be a non-empty name, got {value!r}")
    if len(value) > MAX_SEGMENT or not _SEGMENT_RE.fullmatch(value):
        shown = value if len(value) <= 60 else value[:57] + "..."
        raise UnsafePathError(
            f"{what} {shown!r} cannot be used as a folder name (letters, digits, _ . = + @ - only, "
            f"not starting with '.' or '-', at most {MAX_SEGMENT} characters)"
        )
    return value


# Data folders a run may read besides the state root: the workplace's shared data next to the
# checkout and the folders named by these variables (the deployment's environment, never run config).
# QUANDARY_READ_ROOTS: the folders the CLI allowed for this process's runs (allow_data_root); kept
# apart from QUANDARY_DATA, which names *the* shared data folder: appending to that one changed the
# default data folder of every later command in the same process (a test worker found it).
READ_ROOTS_ENV = "QUANDARY_READ_ROOTS"
DATA_ROOT_ENVS = ("QUANDARY_AMBITAB_DATA", "QUANDARY_DATA", READ_ROOTS_ENV)
ENV_SECRET_MIN = 4  # shorter environment values ("1", "yes") are too common to hide


def data_roots() -> list[Path]:
    roots = [PROJECT_ROOT.parent / "shared" / "data"]
    for env in DATA_ROOT_ENVS:  # QUANDARY_DATA may list several folders (os.pathsep-separated)
        roots += [Path(v) for v in os.environ.get(env, "").split(os.pathsep) if v.strip()]
    return [r.expanduser().resolve() for r in roots]


def allow_data_root(folder: str | Path) -> Path:
    """Let this process's runs read ``folder``: what the CLI calls for a ``--data`` its user named
    (the process environment is the user's, never run config, so the launchpad cannot do this)."""
    resolved = Path(folder).expanduser().resolve()
    if not within_read_roots(resolved):
        current = os.environ.get(READ_ROOTS_ENV, "")
        os.environ[READ_ROOTS_ENV] = os.pathsep.join([p for p in (current, str(resolved)) if p])
    return resolved


SHARED_DATA_ENV = "QUANDARY_DATA"


def user_path(value: str | os.PathLike) -> Path:
    """The one rule for a data path a user types (#31 item 4): ``~`` expanded, a relative path read
    from the current directory, returned absolute so every message prints where it looked."""
    return Path(os.path.abspath(os.path.expanduser(os.fspath(value))))


def relative_note(value: str | os.PathLike) -> str:
    """`` (relative to the current directory, <cwd>)`` for a typed relative path, else ``""``: the
    hint an error about a missing path adds when the user may be in the wrong folder."""
    raw = os.path.expanduser(os.fspath(value))
    return "" if os.path.isabs(raw) else f" (relative to the current directory, {os.getcwd()})"


def shared_data_root() -> Path:
    """The benchmark data folder when none is given: ``$QUANDARY_DATA``, else ``../shared/data``
    beside the checkout (not the current directory), so every command finds it from any folder."""
    env = os.environ.get(SHARED_DATA_ENV, "").split(os.pathsep)[0]  # a list names its first folder
    return user_path(env) if env.strip() else PROJECT_ROOT.parent / "shared" / "data"


def from_environment(value) -> bool:
    """Whether ``value`` (or one of its path parts) is the value of an environment variable: a
    launchpad ``{env: X}`` arrives resolved, and its value must never be echoed (issue 34 item 5)."""
    if not isinstance(value, str) or not value:
        return False
    secrets = {v for v in os.environ.values() if len(v) >= ENV_SECRET_MIN}
    return value in secrets or any(part in secrets for part in Path(value).parts)


def shown(value) -> str:
    """``repr(value)`` for a message, or a placeholder when it came from an environment variable."""
    return "(a value from an environment variable, not shown)" if from_environment(value) else repr(value)


def confined_path(value: str, what: str = "path", *, write: bool = False) -> Path:
    """``value`` resolved, if it lies inside the project's roots; else :class:`UnsafePathError`. For
    paths that arrive in run config (the UI's launchpad), which must not point Quandary's reads or
    writes at the rest of the host (issue 23 item 7, issue 34 item 5).

    A path a run *writes* (call log, artifacts, catalog) must lie under ``$QUANDARY_HOME``, the state
    root; one it *reads* may also lie in the checkout (council configs) or a data root
    (:func:`data_roots`). The message never echoes a value that came from an environment variable."""
    resolved = Path(value).expanduser().resolve()
    home = quandary_home()
    roots = (home,) if write else (home, PROJECT_ROOT, *data_roots())
    if not any(resolved == r or resolved.is_relative_to(r) for r in roots):
        where = f"under {home}" if write else "under " + ", ".join(str(r) for r in roots)
        raise UnsafePathError(
            f"{what} {shown(value)} is outside the project's {'state' if write else ''} roots; "
            f"use a path {where}".replace("  ", " ")
        )
    if resolved.name in {v for v in os.environ.values() if len(v) >= ENV_SECRET_MIN}:
        # a file named after a secret (`log_path: {env: AWS_SECRET_ACCESS_KEY}`) would publish it
        raise UnsafePathError(f"{what} is named by an environment variable's value; give the path itself")
    return resolved


def within_read_roots(path: str | Path) -> bool:
    """Whether a run may read ``path`` (see :func:`confined_path`)."""
    try:
        confined_path(str(path))
    except UnsafePathError:
        return False
    return True


def stage_input(path: str | Path, kind: str) -> Path:
    """A file the *CLI* user named (anywhere they can read) as a path a run may read: itself when it
    lies in the project's roots, else a content-addressed copy under ``$QUANDARY_HOME/inputs/<kind>``.
    Runs accept only confined paths (the launchpad must not read the host); the CLI stages instead."""
    import hashlib
    import shutil

    src = Path(path).expanduser().resolve()
    if within_read_roots(src):
        return src
    h = hashlib.sha256()
    with open(src, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    folder = quandary_home() / "inputs" / path_segment(kind, "input kind")
    folder.mkdir(parents=True, exist_ok=True)
    dest = folder / f"{h.hexdigest()[:20]}{src.suffix}"
    if not dest.exists():
        from storage.faults import storage_error

        tmp = folder / f".{dest.name}.{os.getpid()}.tmp"
        try:
            shutil.copyfile(src, tmp)
            os.replace(tmp, dest)
        except OSError as exc:  # a full disk: one line naming the folder, no half copy left (#45 item 5)
            tmp.unlink(missing_ok=True)
            raise storage_error(exc, folder, "cannot stage the input file in") from None
    return dest


def quandary_home() -> Path:
    home = Path(os.environ.get("QUANDARY_HOME") or PROJECT_ROOT / ".quandary").resolve()
    home.mkdir(parents=True, exist_ok=True)
    return home


def artifacts_dir() -> Path:
    p = quandary_home() / "artifacts"
    p.mkdir(parents=True, exist_ok=True)
    return p


def llm_calls_path() -> Path:
    return quandary_home() / "llm_calls.sqlite"


def audit_db_path() -> Path:
    return quandary_home() / "audit.duckdb"


def databases_dir() -> Path:
    p = quandary_home() / "databases"
    p.mkdir(parents=True, exist_ok=True)
    return p


_exported_home: str | None = None


def _add_nux_off(yaml_path: Path) -> None:
    """An instance file written before the pop-up was turned off gets ``nux: {enabled: false}``
    appended, unless it has a ``nux`` key of its own (or cannot be read or written: left as is)."""
    try:
        text = yaml_path.read_text()
        if not re.search(r"^nux\s*:", text, re.MULTILINE):
            yaml_path.write_text(text + ("" if text.endswith("\n") or not text else "\n") + "nux:\n  enabled: false\n")
    except (OSError, UnicodeDecodeError):
        pass


def dagster_home() -> tuple[Path, str]:
    """The Dagster instance folder and where its path came from ("DAGSTER_HOME" or "project default").

    Creates it with telemetry off when missing, and exports ``DAGSTER_HOME`` so Dagster (and any
    process started from here) opens the same instance.
    """
    global _exported_home
    env = os.environ.get("DAGSTER_HOME")
    if env and env == _exported_home:
        env = None  # we exported it ourselves earlier in this process: still the project default
    home = Path(env).expanduser().resolve() if env else PROJECT_ROOT / ".dagster_home"
    home.mkdir(parents=True, exist_ok=True)
    yaml_path = home / "dagster.yaml"
    if not yaml_path.exists():
        yaml_path.write_text(DAGSTER_YAML)
    else:
        _add_nux_off(yaml_path)
    os.environ["DAGSTER_HOME"] = str(home)
    if not env:
        _exported_home = str(home)
    return home, ("DAGSTER_HOME" if env else "project default")
