"""How tests/unit/test_bundle.py validates the bundle without anything from outside the repository.

The Databricks CLI's own bundle JSON schema (`databricks bundle schema`) is not kept here: the databricks/cli
repository is under the Databricks License, which allows use only in connection with Databricks services and can be
terminated by Databricks at any time (every copy then deleted), so it cannot live in this Apache-2.0 repository
(docs/decisions/0015). Two checks take its place:

- every resource (`resources.jobs`, `schemas`, `volumes`, `dashboards`, `alerts`) is loaded into the CLI's typed
  Python models from PyPI (`databricks-bundles`, a test dependency, not shipped with the wheel): unknown fields,
  missing required fields, values outside an enum and wrongly typed values all fail, as they fail `bundle validate`;
- the bundle's top level (and each target's) is checked by the JSON Schema below, written for this project from the
  bundle configuration reference: only the mappings the reference defines, with the shapes it gives them.
"""

from __future__ import annotations

import copy
from typing import Any

# The resource kinds this bundle uses, each with the databricks-bundles model that loads one resource of the kind.
# A kind the bundle starts using must be added here (the top-level schema refuses kinds it does not list).
RESOURCE_KINDS = ("jobs", "schemas", "volumes", "dashboards", "alerts")


def _models() -> dict[str, Any]:
    from databricks.bundles.alerts import Alert
    from databricks.bundles.dashboards import Dashboard
    from databricks.bundles.jobs import Job
    from databricks.bundles.schemas import Schema
    from databricks.bundles.volumes import Volume

    return {"jobs": Job, "schemas": Schema, "volumes": Volume, "dashboards": Dashboard, "alerts": Alert}


def resource_errors(document: dict[str, Any]) -> list[str]:
    """What `databricks-bundles` refuses in each resource of `document` (a bundle, a target's view or one file)."""
    models = _models()
    errors = []
    for name, target in (document.get("targets") or {}).items():
        errors += [f"targets/{name}/{e}" for e in resource_errors({"resources": (target or {}).get("resources")})]
    for kind, resources in (document.get("resources") or {}).items():
        model = models.get(kind)
        if model is None:
            continue  # reported by the top-level schema
        for key, body in (resources or {}).items():
            try:
                model.from_dict(copy.deepcopy(body))
            except (TypeError, ValueError, KeyError, AttributeError) as exc:
                errors.append(f"resources/{kind}/{key}: {type(exc).__name__}: {exc}")
    return errors


_STRING = {"type": "string"}
_STRINGS = {"type": "array", "items": _STRING}
_BOOL_OR_REF = {"anyOf": [{"type": "boolean"}, {"type": "string", "pattern": r"^\$\{.+\}$"}]}
_INT_OR_REF = {"anyOf": [{"type": "integer"}, {"type": "string", "pattern": r"^\$\{.+\}$"}]}

_PRINCIPALS = ("user_name", "group_name", "service_principal_name")
_PERMISSION = {
    "type": "object",
    "properties": {
        "level": {"enum": ["CAN_MANAGE", "CAN_VIEW", "CAN_RUN"]},
        **dict.fromkeys(_PRINCIPALS, _STRING),
    },
    "required": ["level"],
    "additionalProperties": False,
    "oneOf": [{"required": [p]} for p in _PRINCIPALS],
}
_RUN_AS = {
    "type": "object",
    "properties": {"service_principal_name": _STRING, "user_name": _STRING},
    "additionalProperties": False,
    "minProperties": 1,
    "maxProperties": 1,
}
_WORKSPACE = {
    "type": "object",
    "properties": dict.fromkeys(
        (
            "host",
            "profile",
            "root_path",
            "file_path",
            "artifact_path",
            "resource_path",
            "state_path",
            "auth_type",
            "client_id",
            "azure_workspace_resource_id",
            "azure_client_id",
            "azure_tenant_id",
            "azure_environment",
            "azure_login_app_id",
            "google_service_account",
            "account_id",
        ),
        _STRING,
    ),
    "additionalProperties": False,
}
_LOOKUP_KINDS = (
    "alert",
    "cluster",
    "cluster_policy",
    "dashboard",
    "instance_pool",
    "job",
    "metastore",
    "notification_destination",
    "pipeline",
    "query",
    "service_principal",
    "warehouse",
)
_VARIABLE = {
    "type": "object",
    "properties": {
        "description": _STRING,
        "default": {},
        "type": {"enum": ["complex"]},
        "lookup": {
            "type": "object",
            "properties": dict.fromkeys(_LOOKUP_KINDS, _STRING),
            "additionalProperties": False,
            "minProperties": 1,
            "maxProperties": 1,
        },
    },
    "additionalProperties": False,
    "not": {"required": ["default", "lookup"]},
}
_ARTIFACT = {
    "type": "object",
    "properties": {
        "type": {"enum": ["whl", "jar"]},
        "path": _STRING,
        "build": _STRING,
        "executable": {"enum": ["bash", "sh", "cmd"]},
        "dynamic_version": {"type": "boolean"},
        "files": {
            "type": "array",
            "items": {"type": "object", "properties": {"source": _STRING}, "required": ["source"]},
        },
    },
    "required": ["type"],
    "additionalProperties": False,
}
_SYNC = {
    "type": "object",
    "properties": {"include": _STRINGS, "exclude": _STRINGS, "paths": _STRINGS},
    "additionalProperties": False,
}
_PRESETS = {
    "type": "object",
    "properties": {
        "name_prefix": _STRING,
        "pipelines_development": _BOOL_OR_REF,
        "trigger_pause_status": {"enum": ["PAUSED", "UNPAUSED"]},
        "jobs_max_concurrent_runs": _INT_OR_REF,
        "tags": {"type": "object", "additionalProperties": _STRING},
        "source_linked_deployment": _BOOL_OR_REF,
        "artifacts_dynamic_version": _BOOL_OR_REF,
    },
    "additionalProperties": False,
}
_RESOURCES = {
    "type": "object",
    "properties": {kind: {"type": "object", "additionalProperties": {"type": "object"}} for kind in RESOURCE_KINDS},
    "additionalProperties": False,
}
_BUNDLE = {
    "type": "object",
    "properties": {
        "name": _STRING,
        "databricks_cli_version": _STRING,
        "cluster_id": _STRING,
        "compute_id": _STRING,
        "uuid": _STRING,
        "git": {
            "type": "object",
            "properties": {"branch": _STRING, "origin_url": _STRING},
            "additionalProperties": False,
        },
    },
    "additionalProperties": False,
}
_TARGET = {
    "type": "object",
    "properties": {
        "default": {"type": "boolean"},
        "mode": {"enum": ["development", "production"]},
        "bundle": _BUNDLE,
        "workspace": _WORKSPACE,
        "artifacts": {"type": "object", "additionalProperties": _ARTIFACT},
        "resources": _RESOURCES,
        "sync": _SYNC,
        "presets": _PRESETS,
        "permissions": {"type": "array", "items": _PERMISSION},
        "run_as": _RUN_AS,
        "cluster_id": _STRING,
        "compute_id": _STRING,
        "git": _BUNDLE["properties"]["git"],
        # a target sets variables by value, or (for a lookup) as {lookup: ...} / {default: ...}
        "variables": {"type": "object"},
    },
    "additionalProperties": False,
}

TOP_LEVEL_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "properties": {
        "bundle": {**_BUNDLE, "required": ["name"]},
        "include": _STRINGS,
        "variables": {"type": "object", "additionalProperties": _VARIABLE},
        "workspace": _WORKSPACE,
        "artifacts": {"type": "object", "additionalProperties": _ARTIFACT},
        "resources": _RESOURCES,
        "sync": _SYNC,
        "presets": _PRESETS,
        "permissions": {"type": "array", "items": _PERMISSION},
        "run_as": _RUN_AS,
        "experimental": {
            "type": "object",
            "properties": {
                "skip_name_prefix_for_schema": {"type": "boolean"},
                "use_legacy_run_as": {"type": "boolean"},
                "python_wheel_wrapper": {"type": "boolean"},
            },
            "additionalProperties": False,
        },
        "targets": {"type": "object", "additionalProperties": _TARGET},
    },
    "additionalProperties": False,
}


def top_level_errors(document: dict[str, Any]) -> list[str]:
    import jsonschema

    validator = jsonschema.Draft202012Validator(TOP_LEVEL_SCHEMA)
    errors = []
    for error in validator.iter_errors(document):
        where = "/".join(str(p) for p in error.absolute_path) or "<root>"
        errors.append(f"{where}: {error.message}")
    return errors


def bundle_errors(document: dict[str, Any]) -> list[str]:
    """Every problem either check finds in `document`."""
    return top_level_errors(document) + resource_errors(document)
