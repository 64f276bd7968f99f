"""Issue 45 item 1: every path- and id-valued setting of every job is confined and checked before
launch by the one shared rule (``assets.shared.checked_config.confine_settings``), and every number
is finite. The settings are enumerated from the Definitions the UI loads, so a new job, op or
resource cannot add such a setting without it being covered here; the attacks go through the UI's
GraphQL ``launchRun`` against a real instance and a real code server (workspace.yaml)."""

import json
import math
import os

import pytest
from dagster import DagsterInstance
from dagster._config import ConfigTypeKind

from assets.definitions import defs
from assets.shared.checked_config import _CheckedShape, setting_kind
from storage.paths import PROJECT_ROOT

pytestmark = pytest.mark.integration

SECRET = "s3cr3t-Launchpad-45-XYZ"
# string settings that are neither paths nor ids, each with why (a new one must be classified here)
NOT_PATH_OR_ID = {
    "preset": "a name looked up in the presets (refused when unknown)",
    "reward": "one of f1 / sr",
    "oracle": "a name looked up in the oracles",
    "oracles": "names looked up in the oracles",
    "askers": "asker names (checkpoint:<id> is resolved under the checkpoints root, '/' refused)",
    "prompts": "prompt names",
    "solver": "a solver name",
    "llm_steps": "auto / on / off",
    "checks": "council check names (refused when unknown)",
    "source": "dataset / imported_dataset / auto",
    "source_name": "a label recorded in rows, never read",
    "pool": "database ids looked up in the catalog (refused when not registered)",
    "subcategories": "taxonomy ids",
    "balance_by": "subcategory / group",
    "agents": "council member names or module:Class (checked at launch)",
    "candidate_filter": "a filter name",
    "modes": "interaction mode names",
    "generators": "council member names (checked at launch)",
    "backend": "oracle / council",
    "decision": "a decision rule name",
    "methods": "method names (checked at launch)",
    "sweep_methods": "method names",
    "dialects": "dialect names",
    "variant_types": "variant type names",
    "question_ids": "a filter on gold query ids, never a path",
    "device": "cpu / cuda / cuda:N (checked by the trainer's preflight)",
    "generated_labels": "label names",
    "diagnostics": "diagnostic names",
    "sample_groups": "group names to sample",
}


def _fields(ct, path=(), parent=None):
    """(path, leaf config type, the shape holding it) for every leaf setting under ``ct``."""
    if ConfigTypeKind.is_shape(ct.kind) or ct.kind == ConfigTypeKind.SELECTOR:
        for name, field in ct.fields.items():
            yield from _fields(field.config_type, (*path, name), ct)
    elif ct.kind in (ConfigTypeKind.ARRAY, ConfigTypeKind.NONEABLE):
        yield from _fields(ct.inner_type, path, parent)
    elif ct.kind == ConfigTypeKind.SCALAR_UNION:
        yield from _fields(ct.scalar_type, path, parent)
    else:
        yield path, ct, parent


def settings() -> dict[tuple[str, str, str], tuple[str, str, object]]:
    """(section, node, setting) -> (a job that takes it, its scalar kind, its shape), every job."""
    out = {}
    for job in defs.get_repository_def().get_all_jobs():
        if job.name.startswith("__"):  # Dagster's implicit all-assets job: every op's config at once
            continue
        for path, ct, shape in _fields(job.run_config_schema.config_type):
            if path[0] in ("ops", "resources") and len(path) == 4:
                out.setdefault((path[0], path[1], path[3]), (job.name, ct.given_name or ct.kind.name, shape))
    return out


SETTINGS = settings()
GUARDED = {k: v for k, v in SETTINGS.items() if setting_kind(k[2]) or v[1] == "Float"}


def test_every_setting_of_every_job_is_classified_and_guarded():
    assert any(k[2] == "benchmark_path" for k in GUARDED) and any(k[2] == "run_id" for k in GUARDED)
    unguarded = [f"{s}.{n}.{f}" for (s, n, f), (_, _, shape) in GUARDED.items() if not isinstance(shape, _CheckedShape)]
    assert not unguarded, f"path/id/number settings whose config is not checked at launch: {unguarded}"
    strings = {f for (s, n, f), (_, kind, _) in SETTINGS.items() if kind == "String"}
    unclassified = sorted(f for f in strings if not setting_kind(f) and f not in NOT_PATH_OR_ID)
    assert not unclassified, (
        f"string settings neither path/id by name (*_path, *_dir, *_root, *_id, split, model) nor listed as "
        f"plain names: {unclassified}; name a path or id so, or add it to NOT_PATH_OR_ID with why"
    )


REPOS = "{ repositoriesOrError { ... on RepositoryConnection { nodes { name location { name } } } } }"
LAUNCH = """mutation($params: ExecutionParams!) { launchRun(executionParams: $params) { __typename
  ... on PythonError { message } ... on RunConfigValidationInvalid { errors { message } }
  ... on InvalidSubsetError { message } ... on LaunchRunSuccess { run { runId } } } }"""


@pytest.fixture(scope="module")
def launchpad(tmp_path_factory):
    """A real instance and the code location the UI loads, in its own code server process."""
    from dagster_graphql.test.utils import define_out_of_process_context, execute_dagster_graphql

    tmp = tmp_path_factory.mktemp("launchpad")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("QUANDARY_HOME", str(tmp / "quandary_home"))
        mp.setenv("DAGSTER_HOME", str(tmp / "dagster_home"))
        mp.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
        mp.chdir(PROJECT_ROOT)
        (tmp / "dagster_home").mkdir()
        (tmp / "dagster_home" / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
        instance = DagsterInstance.get()
        with define_out_of_process_context(str(PROJECT_ROOT / "workspace.yaml"), None, instance) as context:
            repo = execute_dagster_graphql(context, REPOS).data["repositoriesOrError"]["nodes"][0]

            def launch(job: str, run_config: dict) -> dict:
                params = {
                    "selector": {
                        "jobName": job,
                        "repositoryName": repo["name"],
                        "repositoryLocationName": repo["location"]["name"],
                    },
                    "runConfigData": run_config,
                    "mode": "default",
                }
                result = execute_dagster_graphql(context, LAUNCH, {"params": params})
                assert not result.errors, result.errors
                return result.data["launchRun"]

            yield instance, launch


def _safe(name: str):
    """A valid value for a required setting, so the launch reaches the rule under test."""
    kind = setting_kind(name)
    return str(PROJECT_ROOT) if kind == "path" else "probe45" if kind else None


def _config(section: str, node: str, field: str, value) -> dict:
    shape_fields = [f for (s, n, f) in SETTINGS if s == section and n == node]
    cfg = {}
    job_type = defs.get_repository_def().get_job(GUARDED[(section, node, field)][0]).run_config_schema.config_type
    node_cfg = job_type.fields[section].config_type.fields[node].config_type.fields["config"].config_type
    for f in shape_fields:
        if f != field and node_cfg.fields[f].is_required:
            cfg[f] = _safe(f)
    ct = node_cfg.fields[field].config_type
    ct = ct.inner_type if ct.kind == ConfigTypeKind.NONEABLE else ct
    cfg[field] = [value] if ct.kind == ConfigTypeKind.ARRAY else value
    return {section: {node: {"config": cfg}}}


def _attacks(field: str, kind: str):
    if kind == "Float":
        yield math.nan, "finite"
        return
    sk = setting_kind(field)
    yield {"env": "AWS_SECRET_ACCESS_KEY"}, "environment variable"
    if sk == "path":
        yield "/etc/shadow", "outside the project's"
    elif sk == "id":
        yield "../../../../../../tmp/x45", "cannot be used as a folder name"
    elif sk == "model":
        yield "/etc", "outside the project's"


CASES = [(key, attack, needle) for key, (_, kind, _) in GUARDED.items() for attack, needle in _attacks(key[2], kind)]


@pytest.mark.parametrize("key,attack,needle", CASES, ids=[f"{k[1]}.{k[2]}={json.dumps(a)[:20]}" for k, a, _ in CASES])
def test_hostile_setting_is_refused_at_launch_without_echo(launchpad, key, attack, needle):
    instance, launch = launchpad
    section, node, field = key
    job = GUARDED[key][0]
    before = len(instance.get_run_records())
    answer = launch(job, _config(section, node, field, attack))
    shown = json.dumps(answer)
    assert answer["__typename"] != "LaunchRunSuccess", answer
    assert field in shown and needle in shown, answer
    assert SECRET not in shown
    assert len(instance.get_run_records()) == before, "a refused launch created a run"
    assert not os.path.exists("/tmp/x45")
