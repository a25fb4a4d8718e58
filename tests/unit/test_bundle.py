"""The Databricks bundle, checked offline: no workspace, no Databricks CLI, no Spark.

`databricks.yml` and every included `resources/*.yml` are merged into one document the way the CLI does (mappings
merged key by key, sequences appended, a target's settings laid over the root), `${var.*}` references are resolved
per target (a target's value, else the default; lookups stay references), and each target's view and each file is
validated with nothing from outside the repository (tests/unit/bundle_schema.py: every resource loaded into the
Databricks CLI's typed models from PyPI, `databricks-bundles`, and the top level checked by a JSON Schema of our own).
On top of that: the job's entry points and flags are the wheel's, the targets follow the development/production
conventions, and the dashboard's widgets, datasets and SQL hang together.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
import zipfile
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import sqlglot
import yaml
from sqlglot import exp

from quorumlake.contract.tables import GOLD_TABLES, LAYERS
from quorumlake.gold.views import VIEWS
from quorumlake.pipelines.app.cli import UsageError, build_parser
from tests.unit.bundle_schema import bundle_errors

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]


# The gold objects the dashboard and the alerts may read, with their columns: the registry's gold tables
# (contract/tables.py) and the views of gold/views.py. A dataset that uses any other object or column fails below.
GOLD_COLUMNS: dict[str, set[str]] = {
    **{spec.table: set(spec.column_names) for spec in GOLD_TABLES},
    **{view.name.split(".")[1]: {name for name, _ in view.columns} for view in VIEWS},
}

# Declared for documentation and later overrides, but not passed to the jobs: `quorumlake run` takes these from its
# settings file, not from flags. When the CLI gets flags for them, pass them in the pipeline job and empty this set.
VARIABLES_NOT_PASSED_YET: set[str] = set()

SLOS = ("quorum_lag", "write_availability", "metadata_freshness")
VAR_REF = re.compile(r"\$\{var\.([A-Za-z0-9_-]+)\}")


# --- loading and merging, as the CLI does -----------------------------------------------------------------------


def _load_yaml(path: Path) -> dict[str, Any]:
    with path.open(encoding="utf-8") as f:
        data = yaml.safe_load(f)
    assert isinstance(data, dict), f"{path} is not a YAML mapping"
    return data


def _merge(base: Any, override: Any) -> Any:
    """Mappings merge key by key, sequences are appended, anything else is replaced (libs/dyn/merge in the CLI)."""
    if isinstance(base, dict) and isinstance(override, dict):
        merged = dict(base)
        for key, value in override.items():
            merged[key] = _merge(base[key], value) if key in base else copy.deepcopy(value)
        return merged
    if isinstance(base, list) and isinstance(override, list):
        return [*base, *copy.deepcopy(override)]
    return copy.deepcopy(override)


@cache
def _root() -> dict[str, Any]:
    return _load_yaml(ROOT / "databricks.yml")


@cache
def _included_files() -> tuple[Path, ...]:
    files: list[Path] = []
    for pattern in _root().get("include", []):
        files.extend(sorted(ROOT.glob(pattern)))
    return tuple(files)


def _bundle() -> dict[str, Any]:
    """databricks.yml with every included file merged in (a fresh copy: callers may change it)."""
    document = copy.deepcopy(_root())
    for path in _included_files():
        document = _merge(document, _load_yaml(path))
    return document


def _variable_values(document: dict[str, Any], target: str) -> dict[str, Any]:
    """Each variable's value in `target` (target value, else default), themselves resolved; lookups are absent."""
    declared = document.get("variables", {})
    overrides = document["targets"][target].get("variables") or {}
    unknown = set(overrides) - set(declared)
    assert not unknown, f"target {target} sets undeclared variables {sorted(unknown)}"
    values: dict[str, Any] = {}
    for name, declaration in declared.items():
        source = declaration
        if name in overrides:
            override = overrides[name]
            # A target gives either the value itself or a mapping shaped like a declaration ({default}/{lookup}).
            if isinstance(override, dict) and override and set(override) <= {"default", "lookup", "description"}:
                source = override
            else:
                values[name] = override
                continue
        if "default" in source:
            values[name] = source["default"]
        elif "lookup" not in source:
            raise AssertionError(f"variable {name} has no value in target {target}")
    for _ in range(10):  # variables may refer to variables (landing_volume_path -> catalog)
        resolved = {name: _substitute(value, values) for name, value in values.items()}
        if resolved == values:
            return resolved
        values = resolved
    raise AssertionError(f"variable references do not settle (a cycle?): {values}")


def _substitute(node: Any, values: dict[str, Any]) -> Any:
    if isinstance(node, dict):
        return {key: _substitute(value, values) for key, value in node.items()}
    if isinstance(node, list):
        return [_substitute(value, values) for value in node]
    if isinstance(node, str):
        whole = VAR_REF.fullmatch(node)
        if whole and whole.group(1) in values:
            return copy.deepcopy(values[whole.group(1)])  # keeps the type: lists, numbers
        return VAR_REF.sub(lambda m: str(values[m.group(1)]) if m.group(1) in values else m.group(0), node)
    return node


def _target_view(target: str, resolve: bool = True) -> dict[str, Any]:
    """The bundle as deployed to `target`: the target's settings laid over the root, variables substituted."""
    document = _bundle()
    overrides = document["targets"][target]
    view = {key: value for key, value in document.items()}
    for key, value in overrides.items():
        if key in ("default", "mode", "variables"):
            continue
        view[key] = _merge(view[key], value) if key in view else copy.deepcopy(value)
    if not resolve:
        return view
    values = _variable_values(document, target)
    return {
        key: value if key in ("variables", "targets") else _substitute(value, values) for key, value in view.items()
    }


def _targets() -> list[str]:
    return list(_root()["targets"])


def _jobs(view: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return view.get("resources", {}).get("jobs", {})


def _alerts(view: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return view.get("resources", {}).get("alerts", {})


def _wheel_tasks(view: dict[str, Any]):
    for job_key, job in _jobs(view).items():
        for task in job.get("tasks", []):
            if "python_wheel_task" in task:
                yield job_key, task


def _flags(parameters: list[str]) -> list[str]:
    return [p.split("=", 1)[0] for p in parameters if p.startswith("--")]


# --- the JSON schema ----------------------------------------------------------------------------------------------


def _schema_errors(document: dict[str, Any]) -> list[str]:
    return bundle_errors(document)


# --- schema validation ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("target", _targets())
def test_each_target_validates_against_the_bundle_schema(target):
    errors = _schema_errors(_target_view(target))
    assert not errors, "\n".join(errors)


@pytest.mark.parametrize("path", ["databricks.yml", *(str(p.relative_to(ROOT)) for p in _included_files())])
def test_each_file_validates_on_its_own(path):
    errors = _schema_errors(_load_yaml(ROOT / path))
    assert not errors, "\n".join(errors)


def _without_task_key(view):
    del view["resources"]["jobs"]["quorumlake_pipeline"]["tasks"][0]["task_key"]


def _unknown_job_key(view):
    view["resources"]["jobs"]["quorumlake_pipeline"]["taskz"] = []


def _without_entry_point(view):
    del view["resources"]["jobs"]["quorumlake_pipeline"]["tasks"][1]["python_wheel_task"]["entry_point"]


def _bad_pause_status(view):
    view["resources"]["jobs"]["quorumlake_pipeline"]["trigger"]["pause_status"] = "SOMETIMES"


def _file_arrival_without_url(view):
    del view["resources"]["jobs"]["quorumlake_pipeline"]["trigger"]["file_arrival"]["url"]


def _alert_without_query(view):
    del view["resources"]["alerts"]["quorumlake_cluster_critical"]["query_text"]


def _alert_bad_operator(view):
    view["resources"]["alerts"]["quorumlake_stale_data"]["evaluation"]["comparison_operator"] = "MORE_THAN"


def _depends_on_not_a_list(view):
    view["resources"]["jobs"]["quorumlake_pipeline"]["tasks"][1]["depends_on"] = "bronze"


def _schema_without_catalog(view):
    del view["resources"]["schemas"]["gold"]["catalog_name"]


def _unknown_target_key(view):
    view["targets"]["prod"]["modes"] = "production"


@pytest.mark.parametrize(
    "breakage",
    [
        _without_task_key,
        _unknown_job_key,
        _without_entry_point,
        _bad_pause_status,
        _depends_on_not_a_list,
        _schema_without_catalog,
        _unknown_target_key,
        _file_arrival_without_url,
        _alert_without_query,
        _alert_bad_operator,
    ],
)
def test_a_broken_bundle_fails_validation(breakage):
    view = _target_view("prod")
    assert not _schema_errors(view)
    breakage(view)
    assert _schema_errors(view), f"{breakage.__name__} was not caught"


# --- the document as a whole ---------------------------------------------------------------------------------------


def test_includes_resources_and_every_file_is_picked_up():
    assert _root()["bundle"]["name"] == "quorumlake"
    assert _root()["include"] == ["resources/*.yml"]
    names = {p.name for p in _included_files()}
    assert {
        "quorumlake_pipeline.job.yml",
        "quorumlake_maintenance.job.yml",
        "quorumlake.dashboard.yml",
        "quorumlake.schemas.yml",
        "quorumlake.alerts.yml",
    } <= names


def test_no_resource_is_defined_twice():
    seen: dict[tuple[str, str], Path] = {}
    for path in [ROOT / "databricks.yml", *_included_files()]:
        for kind, resources in (_load_yaml(path).get("resources") or {}).items():
            for key in resources:
                assert (kind, key) not in seen, f"{kind}.{key} in both {seen[(kind, key)].name} and {path.name}"
                seen[(kind, key)] = path


def test_every_variable_reference_is_declared_and_every_variable_is_used():
    document = _bundle()
    declared = set(document["variables"])
    text = json.dumps({k: v for k, v in document.items() if k != "variables"})
    text += json.dumps({name: decl.get("default") for name, decl in document["variables"].items()})
    referenced = set(VAR_REF.findall(text))
    assert referenced <= declared, f"undeclared: {sorted(referenced - declared)}"
    assert declared - referenced == VARIABLES_NOT_PASSED_YET


@pytest.mark.parametrize("target", _targets())
def test_only_lookup_variables_stay_unresolved(target):
    text = json.dumps({k: v for k, v in _target_view(target).items() if k not in ("variables", "targets")})
    lookups = {name for name, decl in _root()["variables"].items() if "lookup" in decl}
    assert set(VAR_REF.findall(text)) <= lookups


def test_the_variables_have_the_contract_defaults():
    variables = _root()["variables"]
    assert variables["replica_caught_up_slo_ms"]["default"] == 2000
    assert variables["quorum_lag_time_slo_ms"]["default"] == 2000
    assert [variables[f"slo_objective_{slo}"]["default"] for slo in SLOS] == [0.999, 0.999, 0.99]
    for task in _bundle()["resources"]["jobs"]["quorumlake_pipeline"]["tasks"]:
        for slo in SLOS:
            assert f"--set=slo_objective_{slo}=${{var.slo_objective_{slo}}}" in task["python_wheel_task"]["parameters"]
    assert variables["window_minutes"]["default"] == 5
    # the incidents' settings (issue #50): Kafka's fetch timeout, the grace period
    assert (variables["quorum_fetch_timeout_ms"]["default"], variables["incident_grace_minutes"]["default"]) == (
        2000,
        2,
    )
    for task in _bundle()["resources"]["jobs"]["quorumlake_pipeline"]["tasks"]:
        for name in ("quorum_fetch_timeout_ms", "incident_grace_minutes"):
            assert f"--set={name}=${{var.{name}}}" in task["python_wheel_task"]["parameters"]
    assert variables["notification_emails"]["type"] == "complex"
    assert isinstance(variables["notification_emails"]["default"], list)
    assert "warehouse" in variables["warehouse_id"].get("lookup", {}) or "default" in variables["warehouse_id"]


# --- targets -------------------------------------------------------------------------------------------------------


def test_dev_is_the_default_development_target():
    targets = _root()["targets"]
    assert targets["dev"]["mode"] == "development"
    assert targets["dev"]["default"] is True
    assert [name for name, t in targets.items() if t.get("default")] == ["dev"]


def test_dev_is_personal_and_paused():
    view = _target_view("dev")
    values = _variable_values(_bundle(), "dev")
    assert "${workspace.current_user.short_name}" in values["schema_prefix"]
    assert "${workspace.current_user.short_name}" in values["checkpoint_path"]
    assert view.get("presets", {}).get("trigger_pause_status", "PAUSED") == "PAUSED"
    for key, job in _jobs(view).items():
        for trigger in ("schedule", "trigger", "continuous"):
            if trigger in job:
                assert job[trigger].get("pause_status", "PAUSED") == "PAUSED", f"{key}.{trigger} runs in dev"
    for key, alert in _alerts(view).items():
        assert alert["schedule"].get("pause_status") == "PAUSED", f"alert {key} runs in dev"


def test_prod_is_production_with_run_as_and_permissions_from_variables():
    targets = _root()["targets"]
    prod = targets["prod"]
    assert prod["mode"] == "production"
    assert prod.get("default", False) is False
    assert prod["workspace"]["root_path"].endswith("/.bundle/${bundle.name}/${bundle.target}")
    assert prod["run_as"] == {"service_principal_name": "${var.service_principal_name}"}
    assert prod["permissions"], "prod must say who manages and who views it"
    for permission in prod["permissions"]:
        principals = [v for k, v in permission.items() if k != "level"]
        assert len(principals) == 1 and VAR_REF.fullmatch(principals[0]), permission
    view = _target_view("prod")
    for key, job in _jobs(view).items():
        (trigger,) = [job[t] for t in ("schedule", "trigger", "continuous") if t in job]
        assert trigger.get("pause_status", "UNPAUSED") == "UNPAUSED", f"{key} would not run in prod"
    for key, alert in _alerts(view).items():
        assert alert["schedule"].get("pause_status", "UNPAUSED") == "UNPAUSED", f"alert {key} would not run in prod"


def test_development_mode_pauses_the_jobs_and_no_variable_does():
    """Development mode pauses a job's trigger or schedule only where the job sets no pause_status of its own: none
    does, and no variable stands in for the mode."""
    document = _bundle()
    assert not [name for name in document["variables"] if "pause" in name]
    assert "presets" not in document["targets"]["dev"], "the mode's defaults are the convention"
    for key, job in _jobs(document).items():
        for trigger in ("schedule", "trigger", "continuous"):
            assert "pause_status" not in job.get(trigger, {}), f"{key}.{trigger} overrides development mode"


def test_each_target_names_its_own_workspace_and_catalog():
    targets = _root()["targets"]
    profiles = [t["workspace"]["profile"] for t in targets.values()]
    assert len(set(profiles)) == len(targets), "each target its own workspace profile"
    for name, target in targets.items():
        assert "catalog" in target["variables"], f"{name} does not say which catalog it uses"
        # the CLI takes no variable references in authentication fields (host, profile, ...)
        for key in ("host", "profile", "auth_type", "client_id"):
            assert "${" not in str(target["workspace"].get(key, "")), f"{name}: workspace.{key} is interpolated"


def test_sync_leaves_out_what_the_jobs_never_read_and_deployment_state_is_ignored():
    excluded = _root()["sync"]["exclude"]
    assert {"tests/", "benchmarks/"} <= set(excluded)
    ignored = (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()
    assert ".databricks/" in ignored
    for generated in ("lakehouse/", ".venv/", "dist/", "build/"):
        assert generated in ignored, generated  # the CLI syncs nothing .gitignore names


def _strings(node: Any, path: str = ""):
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _strings(value, f"{path}/{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _strings(value, f"{path}/{i}")
    elif isinstance(node, str):
        yield path, node


@pytest.mark.parametrize("target", _targets())
def test_no_literal_user_names_or_addresses(target):
    view = _target_view(target)
    for path, value in _strings({k: v for k, v in view.items() if k != "targets"}):
        assert "@" not in value, f"{path}: {value!r} looks like an e-mail address"
        if path.endswith(("/user_name", "/service_principal_name", "/group_name", "/principal")):
            raw = _target_view(target, resolve=False)
            for part in path.strip("/").split("/"):
                raw = raw[int(part)] if isinstance(raw, list) else raw[part]
            assert VAR_REF.fullmatch(raw) or raw.startswith("${workspace."), f"{path} is hard-coded: {raw!r}"


# --- Unity Catalog -------------------------------------------------------------------------------------------------


def test_layer_schemas_are_named_by_the_prefix_the_wheel_gets():
    document = _bundle()
    assert document["experimental"]["skip_name_prefix_for_schema"] is True
    schemas = document["resources"]["schemas"]
    for layer in LAYERS:
        assert schemas[layer]["name"] == "${var.schema_prefix}" + layer
        assert schemas[layer]["catalog_name"] == "${var.catalog}"
    for _, task in _wheel_tasks(document):
        assert "--schema-prefix=${var.schema_prefix}" in task["python_wheel_task"]["parameters"]
        assert "--catalog=${var.catalog}" in task["python_wheel_task"]["parameters"]


def test_gold_is_readable_by_the_bi_group():
    grants = _bundle()["resources"]["schemas"]["gold"]["grants"]
    assert {"principal": "${var.bi_group}", "privileges": ["USE_SCHEMA", "SELECT"]} in grants


def test_prod_creates_the_volumes_the_variables_point_at():
    view = _target_view("prod")
    values = _variable_values(_bundle(), "prod")
    resources = view["resources"]
    volume_schema = resources["schemas"]["quorumlake"]["name"]
    for volume in resources["volumes"].values():
        assert volume["schema_name"] == "${resources.schemas.quorumlake.name}"
    landing, checkpoints = resources["volumes"]["landing"], resources["volumes"]["checkpoints"]
    assert values["landing_volume_path"] == f"/Volumes/{landing['catalog_name']}/{volume_schema}/{landing['name']}"
    assert values["checkpoint_path"].startswith(
        f"/Volumes/{checkpoints['catalog_name']}/{volume_schema}/{checkpoints['name']}/"
    )
    for kind in ("schemas", "volumes"):
        for key, resource in resources[kind].items():
            assert resource.get("lifecycle", {}).get("prevent_destroy") is True, f"prod {kind}.{key} is destroyable"


def test_dev_shares_the_landing_zone_but_not_the_checkpoints():
    dev, prod = _variable_values(_bundle(), "dev"), _variable_values(_bundle(), "prod")
    assert dev["landing_volume_path"] == prod["landing_volume_path"]
    assert dev["checkpoint_path"] != prod["checkpoint_path"]
    assert dev["schema_prefix"] != prod["schema_prefix"] == ""
    assert "volumes" not in _target_view("dev")["resources"], "only prod owns the shared volumes"


# --- jobs ----------------------------------------------------------------------------------------------------------


def _project() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def test_every_wheel_task_calls_an_entry_point_of_the_wheel():
    project = _project()
    tasks = list(_wheel_tasks(_bundle()))
    assert tasks
    for job_key, task in tasks:
        wheel_task = task["python_wheel_task"]
        assert wheel_task["package_name"] == project["name"], f"{job_key}.{task['task_key']}"
        assert wheel_task["entry_point"] in project["scripts"], f"{job_key}.{task['task_key']}"
        assert "named_parameters" not in wheel_task


def test_the_pipeline_runs_bronze_then_silver_then_gold():
    job = _bundle()["resources"]["jobs"]["quorumlake_pipeline"]
    tasks = {t["task_key"]: t for t in job["tasks"]}
    assert list(tasks) == list(LAYERS)
    assert "depends_on" not in tasks["bronze"]
    assert tasks["silver"]["depends_on"] == [{"task_key": "bronze"}]
    assert tasks["gold"]["depends_on"] == [{"task_key": "silver"}]
    for layer, task in tasks.items():
        assert task["python_wheel_task"]["entry_point"] == f"quorumlake-{layer}"
        assert task.get("run_if", "ALL_SUCCESS") == "ALL_SUCCESS"
        assert task["max_retries"] >= 1 and task["min_retry_interval_millis"] >= 10_000
        assert 0 < task["timeout_seconds"] <= job["timeout_seconds"]
        assert "--ingest-mode=autoloader" in task["python_wheel_task"]["parameters"]
        assert "--checkpoint-root=${var.checkpoint_path}" in task["python_wheel_task"]["parameters"]
    assert "--landing=${var.landing_volume_path}" in tasks["bronze"]["python_wheel_task"]["parameters"]


def test_the_pipeline_runs_when_files_arrive_at_most_every_five_minutes_and_never_overlaps():
    job = _bundle()["resources"]["jobs"]["quorumlake_pipeline"]
    assert "schedule" not in job and "continuous" not in job, "a job has one trigger: file arrival"
    file_arrival = job["trigger"]["file_arrival"]
    assert file_arrival["url"] == "${var.landing_volume_path}/"
    assert file_arrival["min_time_between_triggers_seconds"] == 300
    # a fleet's collectors write continuously: a quiet period would starve the trigger
    assert "wait_after_last_change_seconds" not in file_arrival
    assert job["max_concurrent_runs"] == 1
    assert job["queue"] == {"enabled": False}
    assert job["email_notifications"]["on_failure"] == "${var.notification_emails}"


def test_the_maintenance_job_runs_daily():
    job = _bundle()["resources"]["jobs"]["quorumlake_maintenance"]
    _seconds, minutes, hours, day, month, weekday = job["schedule"]["quartz_cron_expression"].split()
    assert (day, month, weekday) == ("*", "*", "?") and hours.isdigit() and minutes.isdigit()
    assert job["max_concurrent_runs"] == 1
    assert job["email_notifications"]["on_failure"] == "${var.notification_emails}"
    (task,) = job["tasks"]
    assert task["python_wheel_task"]["entry_point"] == "quorumlake"
    assert task["python_wheel_task"]["parameters"][0] == "maintenance"


@pytest.mark.parametrize("target", _targets())
def test_every_task_runs_the_bundle_wheel(target):
    view = _target_view(target)
    artifact = view["artifacts"]["python_artifact"]
    assert artifact["type"] == "whl" and artifact["path"] == "."
    assert re.search(r"(^|\s)(-w|--wheel-dir|--outdir|-o)[ =]?dist(\s|$)", artifact["build"]), artifact["build"]
    resource_dir = ROOT / "resources"
    for job_key, job in _jobs(view).items():
        environments = {e["environment_key"]: e for e in job.get("environments", [])}
        for task in job["tasks"]:
            environment = environments[task["environment_key"]]
            spec = environment["spec"]
            assert spec["environment_version"].isdigit()
            (wheel,) = spec["dependencies"]
            assert (resource_dir / wheel).parent.resolve() == ROOT / "dist", f"{job_key}: {wheel}"
            assert wheel.endswith(".whl")


JOB_PARAMETER = re.compile(r"\{\{job\.parameters\.([A-Za-z0-9_]+)\}\}")


def _with_job_parameters(parameters: list[str], job: dict[str, Any], **values: str) -> list[str]:
    """The task's parameters as a run of the job passes them: each {{job.parameters.X}} replaced by its value (the
    job's default unless given); {{job.start_time.iso_datetime}} by a time of that shape."""
    defaults = {p["name"]: p["default"] for p in job.get("parameters", [])}
    given = {**defaults, **values}
    out = []
    for p in parameters:
        for name in JOB_PARAMETER.findall(p):
            assert name in defaults, f"{p} names an undeclared job parameter"
        p = JOB_PARAMETER.sub(lambda m: given[m.group(1)], p)
        out.append(p.replace("{{job.start_time.iso_datetime}}", "2026-01-02T03:04:05.678"))
    return out


@pytest.mark.parametrize("layer", LAYERS)
def test_the_layer_tasks_pass_flags_the_cli_accepts(layer):
    for target in _targets():
        job = _target_view(target)["resources"]["jobs"]["quorumlake_pipeline"]
        task = {t["task_key"]: t for t in job["tasks"]}
        parameters = _with_job_parameters(task[layer]["python_wheel_task"]["parameters"], job)
        args = build_parser().parse_args(["run", "--layer", layer, *parameters])
        assert args.ingest_mode == "autoloader"
        assert args.catalog == _variable_values(_bundle(), target)["catalog"]
        assert (args.layer, args.layers, args.full_refresh) == (layer, LAYERS, False)
        rerun = _with_job_parameters(
            task[layer]["python_wheel_task"]["parameters"], job, layers="silver,gold", full_refresh="true"
        )
        args = build_parser().parse_args(["run", "--layer", layer, *rerun])
        assert (args.layers, args.full_refresh) == (("silver", "gold"), True)


def test_the_job_takes_the_layers_and_a_full_refresh_as_job_parameters():
    job = _bundle()["resources"]["jobs"]["quorumlake_pipeline"]
    assert {p["name"]: p["default"] for p in job["parameters"]} == {"layers": ",".join(LAYERS), "full_refresh": "false"}
    for task in job["tasks"]:
        parameters = task["python_wheel_task"]["parameters"]
        assert "--layers={{job.parameters.layers}}" in parameters
        assert "--full-refresh={{job.parameters.full_refresh}}" in parameters


def test_only_the_last_task_reports_a_degraded_run_for_the_whole_job_run():
    """Bronze and silver exit 0 when they could not process some input (so the next task runs under ALL_SUCCESS);
    gold, last, exits 4 if any task of this job run could not (docs/operations.md, "Exit codes")."""
    tasks = {t["task_key"]: t for t in _bundle()["resources"]["jobs"]["quorumlake_pipeline"]["tasks"]}
    *earlier, last = LAYERS
    for layer in earlier:
        parameters = tasks[layer]["python_wheel_task"]["parameters"]
        assert "--degraded-exit-code=0" in parameters
        assert not [p for p in parameters if p.startswith("--outcome-since")]
    parameters = tasks[last]["python_wheel_task"]["parameters"]
    assert "--outcome-since={{job.start_time.iso_datetime}}" in parameters
    assert not [p for p in parameters if p.startswith("--degraded-exit-code")]


def test_only_prod_deletes_ingested_landing_files_and_may():
    """Landing retention (cloudFiles.cleanSource) is on only where the deployment owns the landing volume, whose
    run-as principal then needs WRITE VOLUME on it."""
    dev, prod = _variable_values(_bundle(), "dev"), _variable_values(_bundle(), "prod")
    assert dev["landing_retention_days"] == 0 < prod["landing_retention_days"]
    bronze = {t["task_key"]: t for t in _bundle()["resources"]["jobs"]["quorumlake_pipeline"]["tasks"]}["bronze"]
    assert "--set=landing_retention_days=${var.landing_retention_days}" in bronze["python_wheel_task"]["parameters"]
    landing = _target_view("prod", resolve=False)["resources"]["volumes"]["landing"]
    (grant,) = [g for g in landing["grants"] if g["principal"] == "${var.service_principal_name}"]
    assert {"READ_VOLUME", "WRITE_VOLUME"} <= set(grant["privileges"])


def test_the_maintenance_task_passes_flags_the_cli_accepts():
    parameters = _target_view("prod")["resources"]["jobs"]["quorumlake_maintenance"]["tasks"][0]["python_wheel_task"][
        "parameters"
    ]
    assert _flags(parameters) == ["--catalog", "--schema-prefix", "--vacuum-hours"]
    try:
        build_parser().parse_args(parameters)
    except UsageError as exc:
        if "invalid choice: 'maintenance'" in str(exc):
            pytest.skip("`quorumlake maintenance` is not in the CLI yet")
        raise


@pytest.mark.parametrize("layer", LAYERS)
def test_each_layer_entry_point_has_help(layer):
    script = Path(sys.executable).parent / f"quorumlake-{layer}"
    assert script.exists(), f"{script} not installed: pip install -e .[dev]"
    result = subprocess.run([str(script), "--help"], check=False, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: quorumlake")
    task = {t["task_key"]: t for t in _bundle()["resources"]["jobs"]["quorumlake_pipeline"]["tasks"]}[layer]
    for flag in _flags(task["python_wheel_task"]["parameters"]):
        assert flag in result.stdout, f"{flag} is not in quorumlake-{layer} --help"


def test_the_wheel_has_the_entry_points_and_no_spark(checkout_wheel):
    with zipfile.ZipFile(checkout_wheel) as archive:
        names = archive.namelist()
        dist_info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
        entry_points = archive.read(f"{dist_info}/entry_points.txt").decode()
        metadata = archive.read(f"{dist_info}/METADATA").decode()
    for _, task in _wheel_tasks(_bundle()):
        assert re.search(rf"^{re.escape(task['python_wheel_task']['entry_point'])} = ", entry_points, re.MULTILINE)
    requires = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    runtime = [r for r in requires if "extra ==" not in r]
    assert not [r for r in runtime if re.search(r"pyspark|delta-spark", r)], "Databricks provides Spark and Delta"
    assert any(n.startswith("quorumlake/expectations/") and n.endswith(".json") for n in names)


# --- alerts --------------------------------------------------------------------------------------------------------


ALERTS = (
    "quorumlake_cluster_critical",
    "quorumlake_at_min_isr_escalated",
    "quorumlake_stale_data",
    # issue #50: once per new critical incident
    "quorumlake_new_critical_incident",
)
# the SLO burn alerts (issue #51): a page and a ticket, each notifying once per episode
BURN_ALERTS = ("quorumlake_slo_fast_burn", "quorumlake_slo_slow_burn")


def alert_queries(catalog: str = "spark_catalog") -> dict[str, str]:
    """Each alert's SQL as prod would run it, with `catalog` for ${var.catalog} (spark_catalog runs it locally)."""
    values = {**_variable_values(_bundle(), "prod"), "catalog": catalog}
    return {key: _substitute(alert["query_text"], values) for key, alert in _alerts(_bundle()).items()}


def test_the_three_alerts_of_the_issue():
    alerts = _alerts(_bundle())
    assert set(alerts) == set(ALERTS + BURN_ALERTS)
    for key, alert in ((key, alerts[key]) for key in ALERTS):
        assert alert["warehouse_id"] == "${var.warehouse_id}", key
        assert "pause_status" not in alert["schedule"], key  # runs in prod; paused by the dev target
        assert alert["schedule"]["timezone_id"] == "UTC"
        evaluation = alert["evaluation"]
        assert (evaluation["comparison_operator"], evaluation["threshold"]["value"]["double_value"]) == (
            "GREATER_THAN",
            0,
        ), key
        assert evaluation["notification"]["subscriptions"] == "${var.alert_subscriptions}"
    assert "status = 'critical'" in alerts["quorumlake_cluster_critical"]["query_text"]
    assert "escalated" in alerts["quorumlake_at_min_isr_escalated"]["query_text"]
    assert "is_stale" in alerts["quorumlake_stale_data"]["query_text"]
    assert "${var.stale_after_minutes}" in alerts["quorumlake_stale_data"]["display_name"]
    # a new critical incident notifies once: no re-notification while it stays in the window, none when it leaves
    incident = alerts["quorumlake_new_critical_incident"]
    assert "critical_at" in incident["query_text"] and "gold.incidents" in incident["query_text"]
    assert "retrigger_seconds" not in incident["evaluation"]["notification"]
    assert incident["evaluation"]["notification"]["notify_on_ok"] is False


def test_the_stale_minutes_reach_the_pipeline_that_builds_the_view():
    assert _root()["variables"]["stale_after_minutes"]["default"] == 15
    for task in _bundle()["resources"]["jobs"]["quorumlake_pipeline"]["tasks"]:
        assert "--set=stale_after_minutes=${var.stale_after_minutes}" in task["python_wheel_task"]["parameters"]


def test_the_burn_alerts_page_and_open_tickets_once_per_episode():
    alerts = _alerts(_bundle())
    for key, kind, subscriptions in (
        ("quorumlake_slo_fast_burn", "fast", "${var.alert_subscriptions}"),
        ("quorumlake_slo_slow_burn", "slow", "${var.ticket_subscriptions}"),
    ):
        alert = alerts[key]
        assert f"kind = '{kind}' AND ended_at IS NULL" in alert["query_text"]
        evaluation = alert["evaluation"]
        assert (evaluation["comparison_operator"], evaluation["threshold"]["value"]["double_value"]) == (
            "GREATER_THAN",
            0,
        )
        # notified when it starts and when it ends, not again while it goes on
        assert evaluation["notification"] == {"subscriptions": subscriptions, "notify_on_ok": True}
        assert "pause_status" not in alert["schedule"]  # runs in prod; paused by the dev target


@pytest.mark.parametrize("key", ALERTS + BURN_ALERTS)
def test_every_alert_query_is_spark_sql_over_the_deployment_s_gold(key):
    alert = _alerts(_bundle())[key]
    assert "${var.catalog}.${var.schema_prefix}gold." in alert["query_text"]
    tree = sqlglot.parse_one(alert_queries("main")[key], read="spark")
    assert isinstance(tree, exp.Query)
    for table in tree.find_all(exp.Table):
        assert (table.catalog, table.db) == ("main", "gold"), table.sql()
        columns = GOLD_COLUMNS.get(table.name)
        assert columns, f"{key}: unknown gold object {table.name}"
        defined = {alias.alias for alias in tree.find_all(exp.Alias)}
        used = {c.name for c in tree.find_all(exp.Column)} - defined
        assert used <= columns, f"{key} uses unknown columns {sorted(used - columns)}"
    assert alert["evaluation"]["source"]["name"] in tree.named_selects


# --- the dashboard -------------------------------------------------------------------------------------------------


def _dashboard_resource() -> tuple[Path, dict[str, Any]]:
    for path in _included_files():
        for dashboard in ((_load_yaml(path).get("resources") or {}).get("dashboards") or {}).values():
            return path, dashboard
    raise AssertionError("no dashboard in the bundle")


@cache
def _dashboard() -> dict[str, Any]:
    path, resource = _dashboard_resource()
    return json.loads((path.parent / resource["file_path"]).read_text(encoding="utf-8"))


def _dataset_sql(dataset: dict[str, Any]) -> str:
    return "".join(dataset["queryLines"]) if "queryLines" in dataset else dataset["query"]


def _datasets() -> dict[str, dict[str, Any]]:
    return {d["name"]: d for d in _dashboard()["datasets"]}


def _widgets():
    for page in _dashboard()["pages"]:
        for item in page["layout"]:
            yield page, item


def test_the_dashboard_resource():
    path, resource = _dashboard_resource()
    assert resource["display_name"]
    assert resource["warehouse_id"] == "${var.warehouse_id}"
    # each target's dashboard reads that target's own gold
    assert resource["dataset_catalog"] == "${var.catalog}"
    assert resource["dataset_schema"] == "${var.schema_prefix}gold"
    assert resource["file_path"].endswith(".lvdash.json")
    assert (path.parent / resource["file_path"]).resolve() == ROOT / "resources/dashboards/quorumlake.lvdash.json"


def test_the_dashboard_has_datasets_and_its_pages_of_widgets():
    dashboard = _dashboard()
    names = [d["name"] for d in dashboard["datasets"]]
    assert len(names) == len(set(names))
    assert [page["name"] for page in dashboard["pages"]] == ["quorum_health", "error_budgets", "incidents"]
    widget_names = [item["widget"]["name"] for _, item in _widgets()]
    assert len(widget_names) == len(set(widget_names))
    kinds = {item["widget"]["spec"]["widgetType"] for _, item in _widgets() if "spec" in item["widget"]}
    assert {"table", "line"} <= kinds


@pytest.mark.parametrize("name", list(_datasets()))
def test_every_dataset_is_spark_sql_over_gold(name):
    sql = _dataset_sql(_datasets()[name])
    tree = sqlglot.parse_one(sql, read="spark")  # raises on a syntax error
    assert isinstance(tree, exp.Query), f"{name} is not a query"
    tables = list(tree.find_all(exp.Table))
    assert tables
    defined = {alias.alias for alias in tree.find_all(exp.Alias)}
    allowed: set[str] = set(defined)
    for table in tables:
        # the dashboard's dataset_catalog and dataset_schema say whose gold: a name of its own would bypass them
        assert not table.db and not table.catalog, f"{name}: {table.sql()} must name a gold object alone"
        assert table.name in GOLD_COLUMNS, f"{name}: unknown gold object {table.name}"
        allowed |= GOLD_COLUMNS[table.name]
    used = {column.name for column in tree.find_all(exp.Column)}
    assert used <= allowed, f"{name} uses unknown columns {sorted(used - allowed)}"


def _registry_columns(name: str) -> set[str] | None:
    from quorumlake.contract import tables

    try:
        return set(tables.by_name(name).column_names)
    except KeyError:
        return None


@pytest.mark.parametrize("name", list(_datasets()))
def test_every_dataset_uses_only_columns_the_registry_has(name):
    """Once gold is in contract/tables.py, a dataset must not use a column the registry lacks (a column qualified by
    a table's alias, of that table; an unqualified one, of one of the query's tables)."""
    tree = sqlglot.parse_one(_dataset_sql(_datasets()[name]), read="spark")
    defined = {alias.alias for alias in tree.find_all(exp.Alias)}
    by_alias = {}
    for table in tree.find_all(exp.Table):
        registered = _registry_columns(f"gold.{table.name}")
        if registered is not None:
            by_alias[table.alias_or_name] = registered
    if not by_alias:
        return
    every = set().union(*by_alias.values())
    for column in tree.find_all(exp.Column):
        if column.name in defined and not column.table:
            continue
        allowed = by_alias.get(column.table, every) if column.table else every
        assert column.name in allowed, f"{name}: {column.sql()} not in the registry's columns of its table"


def test_every_widget_reads_an_existing_dataset_and_its_fields():
    datasets = _datasets()
    outputs = {
        name: set(sqlglot.parse_one(_dataset_sql(d), read="spark").named_selects) for name, d in datasets.items()
    }
    used_datasets = set()
    for _page, item in _widgets():
        widget = item["widget"]
        if "spec" not in widget:
            assert "multilineTextboxSpec" in widget or "textbox_spec" in widget, widget["name"]
            continue
        fields = set()
        for query in widget["queries"]:
            dataset = query["query"]["datasetName"]
            assert dataset in datasets, f"{widget['name']} reads unknown dataset {dataset}"
            used_datasets.add(dataset)
            for field in query["query"]["fields"]:
                expression = sqlglot.parse_one(field["expression"], read="spark")
                columns = {c.name for c in expression.find_all(exp.Column)}
                assert columns <= outputs[dataset], f"{widget['name']}: {field['expression']} not in {dataset}"
                fields.add(field["name"])
        for encoding in _encodings(widget["spec"].get("encodings", {})):
            assert encoding["fieldName"] in fields, f"{widget['name']} shows unknown field {encoding['fieldName']}"
    assert used_datasets == set(datasets), f"datasets no widget shows: {sorted(set(datasets) - used_datasets)}"


def _encodings(node: Any):
    if isinstance(node, dict):
        if "fieldName" in node:
            yield node
        for value in node.values():
            yield from _encodings(value)
    elif isinstance(node, list):
        for value in node:
            yield from _encodings(value)


def test_the_dashboard_shows_the_issue_s_views():
    read = {
        table.name
        for d in _datasets().values()
        for table in sqlglot.parse_one(_dataset_sql(d), read="spark").find_all(exp.Table)
    }
    assert {
        "v_fleet_overview",
        "v_slo_attainment_daily",
        "v_partitions_at_min_isr",
        "metadata_offset_divergence",
        "isr_health",
        # issue #51: the budget page
        "slo_budget",
        "v_slo_burn_episodes",
        "v_slo_attainment_by_cohort",
    } <= read


def _page_filters(page_name: str) -> dict[str, dict[str, Any]]:
    return {
        item["widget"]["spec"]["widgetType"]: item["widget"]
        for page, item in _widgets()
        if page["name"] == page_name and item["widget"].get("spec", {}).get("widgetType", "").startswith("filter-")
    }


def _page_datasets(page_name: str) -> set[str]:
    return {
        query["query"]["datasetName"]
        for page, item in _widgets()
        if page["name"] == page_name and not item["widget"].get("spec", {}).get("widgetType", "").startswith("filter-")
        for query in item["widget"].get("queries", [])
    }


def test_the_budget_page_filters_its_cluster_datasets_by_cluster():
    outputs = {
        name: set(sqlglot.parse_one(_dataset_sql(d), read="spark").named_selects) for name, d in _datasets().items()
    }
    filters = _page_filters("error_budgets")
    assert set(filters) == {"filter-multi-select"}
    (widget,) = filters.values()
    covered = {query["query"]["datasetName"] for query in widget["queries"]}
    assert covered == {name for name in _page_datasets("error_budgets") if "cluster_id" in outputs[name]}
    assert covered == {"slo_budget_latest", "slo_budget_days", "slo_burn_episodes"}


def test_cluster_and_time_range_filters_cover_the_datasets():
    datasets = {name: d for name, d in _datasets().items() if name in _page_datasets("quorum_health")}
    filters = _page_filters("quorum_health")
    assert set(filters) == {"filter-multi-select", "filter-date-range-picker"}

    def filtered(widget):
        fields = {}
        for query in widget["queries"]:
            (field,) = query["query"]["fields"]
            fields[query["query"]["datasetName"]] = field["name"]
        assert {e["queryName"] for e in widget["spec"]["encodings"]["fields"]} == {q["name"] for q in widget["queries"]}
        return fields

    outputs = {
        name: set(sqlglot.parse_one(_dataset_sql(d), read="spark").named_selects) for name, d in datasets.items()
    }
    by_cluster = filtered(filters["filter-multi-select"])
    assert set(by_cluster.values()) == {"cluster_id"}
    assert set(by_cluster) == {name for name, columns in outputs.items() if "cluster_id" in columns}
    by_time = filtered(filters["filter-date-range-picker"])
    for dataset, field in by_time.items():
        assert field in outputs[dataset]
    time_series = {
        "quorum_sli",
        "voter_lag_sli",
        "slo_attainment_daily",
        "isr_health",
        "metadata_divergence",
        "controller_health",
    }
    assert set(by_time) == time_series


def test_the_incidents_page_filters_every_widget_by_cluster_severity_trigger_and_time():
    incidents = _page_datasets("incidents")
    assert incidents == {"incidents", "incidents_per_day", "incident_events"}
    assert not incidents & _page_datasets("quorum_health")
    filters = {
        item["widget"]["name"]: item["widget"]
        for page, item in _widgets()
        if page["name"] == "incidents" and item["widget"].get("spec", {}).get("widgetType", "").startswith("filter-")
    }
    fields = {
        name: {q["query"]["datasetName"]: q["query"]["fields"][0]["name"] for q in widget["queries"]}
        for name, widget in filters.items()
    }
    assert fields == {
        "filter_incident_cluster": dict.fromkeys(incidents, "cluster_id"),
        "filter_incident_severity": dict.fromkeys(incidents, "severity"),
        "filter_incident_trigger": dict.fromkeys(incidents, "trigger"),
        "filter_incident_time": {"incidents": "started_at", "incidents_per_day": "day", "incident_events": "event_at"},
    }
    for name, widget in filters.items():
        assert {e["queryName"] for e in widget["spec"]["encodings"]["fields"]} == {q["name"] for q in widget["queries"]}
    read = {
        table.name
        for name in incidents
        for table in sqlglot.parse_one(_dataset_sql(_datasets()[name]), read="spark").find_all(exp.Table)
    }
    assert read == {"incidents", "incident_events"}


def test_widgets_fit_the_grid_without_overlapping():
    cells: dict[tuple[str, int, int], str] = {}
    for page, item in _widgets():
        position, name = item["position"], item["widget"]["name"]
        assert position["x"] >= 0 and position["y"] >= 0 and position["width"] >= 1 and position["height"] >= 1
        assert position["x"] + position["width"] <= 6, f"{name} is wider than the 6-column grid"
        for x in range(position["x"], position["x"] + position["width"]):
            for y in range(position["y"], position["y"] + position["height"]):
                assert (page["name"], x, y) not in cells, f"{name} overlaps {cells[(page['name'], x, y)]}"
                cells[(page["name"], x, y)] = name
