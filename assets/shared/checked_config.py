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
"""

from collections.abc import Callable

from dagster import Config, Field, Shape
from dagster._config.errors import PostProcessingError  # "part of the formal API for post_process" (its docstring)


class _CheckedShape(Shape):
    # Shape instances are memoised by their fields' hash and always built as plain Shape; this
    # one carries a check, so it is built on its own.
    def __new__(cls, *args, **kwargs):
        return object.__new__(cls)

    def __init__(self, fields, check: Callable[[dict], None], description: str | None = None):
        self._initialized = False
        super().__init__(fields, description=description)
        self._check = check

    def post_process(self, value):
        try:
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


def checked_config(config_cls: type[Config], check: Callable[[dict], None]) -> Field:
    """The config schema of ``config_cls`` (defaults, enums, descriptions as the launchpad shows
    them) with ``check`` run on every launch."""
    doc = (config_cls.__doc__ or "").strip() or None
    return Field(_CheckedShape(config_cls.to_fields_dict(), check, description=doc))


def op_config(context) -> dict:
    return dict(context.op_execution_context.op_config or {})


def check_resource_config_on_launch(resource, check: Callable[[dict], None]) -> None:
    """Run ``check(values)`` on ``resource``'s config whenever a run is launched with it — run
    config from the launchpad included — so a bad value refuses the launch (no run is created).

    Values bound in code (``Definitions``) are trusted: ``check`` gets only the keys whose value
    differs from them. Pythonic resources build their config schema in ``__init__``; this wraps its
    shape in :class:`_CheckedShape` (same fields, defaults and descriptions)."""
    field, bound = resource_config_schema(resource)

    def launched(values: dict) -> None:
        check({k: v for k, v in values.items() if k not in bound or bound[k] != v})

    shape = _CheckedShape(field.config_type.fields, launched, description=field.config_type.description)
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


def replace_resource_config_schema(resource, field: Field) -> None:
    """Make ``field`` the config schema that Dagster validates ``resource``'s run config against."""
    from dagster._core.definitions.definition_config_schema import DefinitionConfigSchema

    state = resource._state__internal__
    resource._state__internal__ = state._replace(config_schema=DefinitionConfigSchema(field))
