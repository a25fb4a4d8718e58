"""The seams of the code, read from its source (no Spark): one way into storage, pure layers, a registry below all.

- Only `pipelines/storage/` (every read, write, MERGE and checkpoint), `pipelines/session.py` (starts the engine)
  and `pipelines/sql_guard.py` (serves it) import Delta's Python API, run SQL through a session (`spark.sql(...)`),
  or reach into the JVM (`_jvm`, `_jsparkSession`).
- `bronze`, `silver`, `gold`, `expectations` and the tools (`tools`: simulator, collector, report) never import
  `pipelines`; `contract` imports nothing of the project.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("contract", "bronze", "silver", "gold", "expectations", "tools", "pipelines")
ENGINE_MODULES = ("pipelines/storage/", "pipelines/session.py", "pipelines/sql_guard.py")
JVM_ATTRIBUTES = {"_jvm", "_jsparkSession", "_jsc"}


def _sources() -> list[Path]:
    return sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py"))


def _relative(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _imports(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    return names


def _engine_uses(tree: ast.AST) -> list[str]:
    """Delta imports, `<...>spark.sql(...)` calls and JVM handles in a module."""
    found = [f"import {name}" for name in _imports(tree) if name == "delta" or name.startswith("delta.")]
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "sql":
            owner = node.func.value
            name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", "")
            if name in ("spark", "session"):
                found.append(f"line {node.lineno}: {name}.sql(...)")
        if isinstance(node, ast.Attribute) and node.attr in JVM_ATTRIBUTES:
            found.append(f"line {node.lineno}: .{node.attr}")
    return found


def test_the_sources_are_found():
    names = {_relative(p) for p in _sources()}
    assert {"pipelines/storage/writes.py", "contract/tables.py", "gold/isr.py"} <= names


@pytest.mark.parametrize("path", [p for p in _sources() if not _relative(p).startswith(ENGINE_MODULES)], ids=_relative)
def test_only_the_storage_and_engine_modules_touch_delta_sql_or_the_jvm(path):
    assert _engine_uses(ast.parse(path.read_text(encoding="utf-8"))) == []


def test_the_check_sees_what_it_forbids():
    tree = ast.parse(
        "from delta.tables import DeltaTable\n"
        "lakehouse.spark.sql('OPTIMIZE x')\n"
        "spark.sql('SELECT 1')\n"
        "spark.sparkContext._jvm.java.lang.System\n"
    )
    assert len(_engine_uses(tree)) == 4
    assert _engine_uses(ast.parse("df.where(bounds.sql())\nF.expr('x')\n")) == []


@pytest.mark.parametrize("package", ["bronze", "silver", "gold", "expectations", "tools", "contract"])
def test_layers_and_the_registry_do_not_import_upward(package):
    forbidden = {"pipelines"} if package != "contract" else set(PACKAGES) - {"contract"}
    wrong = {
        _relative(path): sorted(
            name for name in _imports(ast.parse(path.read_text(encoding="utf-8"))) if name.split(".")[0] in forbidden
        )
        for path in (ROOT / package).rglob("*.py")
    }
    assert {path: names for path, names in wrong.items() if names} == {}
