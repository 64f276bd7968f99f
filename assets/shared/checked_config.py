"""Run config that is checked when a run is launched, in the UI as on the CLI.

The launchpad validates run config against the config *schema* only: types, enums, required keys.
Value rules (``n >= 1``, generators that are council members, a council file that loads) are not
expressible there, so a bad value used to surface as a failed first step of a run that already
existed. Dagster post-processes every config value while it builds the execution plan, which the
webserver asks the code location for *before* it creates the run; a config type whose
``post_process`` raises ``PostProcessingError`` therefore refuses the launch with our message, and
no run is created. Same for ``execute_in_process``.

    @asset(config_schema=checked_config(GridConfig, check))
    def generation_requests(context):
        config = GridConfig(**op_config(context))

``check(values)`` gets the config as a dict (enum members for enum fields) and raises ValueError
(or PreflightError) with the message for the user.

Before ``check``, every checked config (op or resource) goes through :func:`confine_settings`, the
ONE rule for path- and id-valued settings (issue 45 item 1): a setting is a *path* by its name
(``*_path``, ``*_dir``, ``*_root``) and confined to the project's roots; an *id* (``*_id``,
``split``) is one plain folder name and never an environment variable's value; ``model`` is a path
when it looks like one, else a hub id or ``embedded:`` name; every number is finite. A launch-time
test (tests/dagster/test_launch_every_job.py) enumerates every job's config so a new setting of one
of these kinds cannot escape it.
"""

import math
import os
from collections.abc import Callable

from dagster import Config, Field, Shape
from dagster._config.errors import PostProcessingError  # "part of the formal API for post_process" (its docstring)


class _CheckedShape(Shape):
    # Shape instances are memoised by their fields' hash and always built as plain Shape; this
    # one carries a check, so it is built on its own.
    def __new__(cls, *args, **kwargs):
        return object.__new__(cls)

    def __init__(
        self, fields, check: Callable[[dict], None] | None, description: str | None = None, write: tuple[str, ...] = ()
    ):
        self._initialized = False
        super().__init__(fields, description=description)
        self._check = check
        self._write = write
        self._confine_all = True  # off for resources: their launch check confines what launch gives

    def post_process(self, value):
        try:
            if self._confine_all:
                confine_settings(dict(value), write=self._write)
            if self._check is not None:
                self._check(dict(value))
        except ValueError as exc:  # PreflightError subclasses it
            _redact_environment_values(value)
            raise PostProcessingError(" ".join(str(exc).split())) from None
        return value


def _redact_environment_values(value) -> None:
    """Dagster's refusal quotes the config it post-processed ("of original value {...}"), where an
    ``{env: X}`` arrives resolved: values that came from the environment are replaced in place so a
    secret is never echoed (issue 34 item 5). The run is refused anyway, so nothing uses them."""
    from storage.paths import from_environment

    if not isinstance(value, dict):
        return
    for key, item in list(value.items()):
        if from_environment(item):
            try:
                value[key] = "(from an environment variable, not shown)"
            except TypeError:  # an immutable mapping: nothing to redact in place
                return


PATH_SUFFIXES = ("_path", "_dir", "_root")
ID_SUFFIXES = ("_id",)
ID_NAMES = ("split",)  # a name that becomes part of a path or a lookup key, not named *_id
MODEL_NAMES = ("model",)  # a local path (confined) or a hub id / ``embedded:`` name


def setting_kind(name: str) -> str | None:
    """``"path"``, ``"id"``, ``"model"`` or None: what :func:`confine_settings` checks a setting as."""
    if name.endswith(PATH_SUFFIXES):
        return "path"
    if name.endswith(ID_SUFFIXES) or name in ID_NAMES:
        return "id"
    if name in MODEL_NAMES:
        return "model"
    return None


def _looks_like_path(value: str) -> bool:
    return value.startswith(("/", "~", ".")) or value.endswith(".gguf") or os.path.exists(value)


def _finite(name: str, value) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{name}: must be a finite number, got {value}")
    if isinstance(value, (list, tuple)):
        for item in value:
            _finite(name, item)


def confine_settings(values: dict, write: tuple[str, ...] = ()) -> None:
    """The one launch rule for settings (see the module's docstring); raises ValueError naming the
    setting, never echoing a value that came from an environment variable. ``write``: the path
    settings a run writes to (confined to the state root ``$QUANDARY_HOME``)."""
    from storage.paths import UnsafePathError, confined_path, from_environment, path_segment

    for name, value in values.items():
        _finite(name, value)
        kind = setting_kind(name)
        items = value if isinstance(value, (list, tuple)) else [value]
        for item in items:
            if kind is None or item is None or not isinstance(item, str):
                continue
            if kind == "path" or (kind == "model" and _looks_like_path(item)):
                confined_path(item, name, write=name in write)
            elif from_environment(item):
                raise UnsafePathError(f"{name} came from an environment variable; give the {kind} itself")
            elif kind == "id":
                path_segment(item, name)
            elif "\x00" in item or len(item) > 500:
                raise UnsafePathError(f"{name}: not a model path, hub id or embedded: name")


def allow_user_paths(values: dict, *names: str) -> None:
    """For run config the *CLI* builds from its user's arguments: each named path that exists (a
    file: its folder) becomes a read root of this process (:func:`storage.paths.allow_data_root`),
    so the user's own files pass :func:`confine_settings`; the launchpad cannot do this."""
    from storage.paths import allow_data_root

    for name in names:
        value = values.get(name)
        if isinstance(value, str) and value and os.path.exists(value):
            allow_data_root(value if os.path.isdir(value) else os.path.dirname(os.path.abspath(value)))


def checked_config(
    config_cls: type[Config], check: Callable[[dict], None] | None = None, write: tuple[str, ...] = ()
) -> Field:
    """The config schema of ``config_cls`` (defaults, enums, descriptions as the launchpad shows
    them) with :func:`confine_settings` and then ``check`` run on every launch."""
    doc = (config_cls.__doc__ or "").strip() or None
    return Field(_CheckedShape(config_cls.to_fields_dict(), check, description=doc, write=write))


def op_config(context) -> dict:
    return dict(context.op_execution_context.op_config or {})


def check_resource_config_on_launch(
    resource, check: Callable[[dict], None] | None = None, write: tuple[str, ...] = ()
) -> None:
    """Run ``check(values)`` on ``resource``'s config whenever a run is launched with it — run
    config from the launchpad included — so a bad value refuses the launch (no run is created).

    Values bound in code (``Definitions``) are trusted: ``check`` gets only the keys whose value
    differs from them. Pythonic resources build their config schema in ``__init__``; this wraps its
    shape in :class:`_CheckedShape` (same fields, defaults and descriptions)."""
    field, bound = resource_config_schema(resource)

    def launched(values: dict) -> None:
        given = {k: v for k, v in values.items() if k not in bound or bound[k] != v}
        confine_settings(given, write=write)
        if check is not None:
            check(given)

    shape = _CheckedShape(field.config_type.fields, launched, description=field.config_type.description)
    shape._confine_all = False
    kwargs = {"default_value": field.default_value} if field.default_provided else {}
    replace_resource_config_schema(
        resource, Field(shape, is_required=field.is_required, description=field.description, **kwargs)
    )


# Dagster has no public API to wrap a Pythonic resource's config schema, so the two functions
# below are the only place that touches its private ``_state__internal__`` (Dagster 1.13).
# tests/dagster/test_checked_config.py fails loudly, naming these functions, when an upgrade
# changes that state; remove them when Dagster offers a public hook (e.g. a config post-processor).


def resource_config_schema(resource) -> tuple[Field, dict]:
    """``resource``'s config schema as a Field, and the config values bound in code."""
    state = resource._state__internal__
    return state.config_schema.as_field(), dict(state.resolved_config_dict or {})


def check_multi_asset_config_on_launch(assets_def, config_cls: type[Config], check=None) -> None:
    """:func:`checked_config` for a ``multi_asset``, whose decorator takes a plain mapping of fields
    only: the op's schema is swapped for the checked one (same fields, defaults, descriptions)."""
    from dagster._core.definitions.definition_config_schema import DefinitionConfigSchema

    assets_def.op._config_schema = DefinitionConfigSchema(checked_config(config_cls, check))


def replace_resource_config_schema(resource, field: Field) -> None:
    """Make ``field`` the config schema that Dagster validates ``resource``'s run config against."""
    from dagster._core.definitions.definition_config_schema import DefinitionConfigSchema

    state = resource._state__internal__
    resource._state__internal__ = state._replace(config_schema=DefinitionConfigSchema(field))
