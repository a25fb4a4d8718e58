"""pyproject.toml installs the product as one import package, `quorumlake`, from the repository's top-level folders
(no build here: tests/e2e/test_connect.py builds the wheel and installs it)."""

from __future__ import annotations

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SETUPTOOLS = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]


def _folder(package: str) -> Path:
    """Where setuptools takes `package` from: the longest package-dir prefix, then the rest as folders."""
    mapping = SETUPTOOLS["package-dir"]
    parts = package.split(".")
    for cut in range(len(parts), 0, -1):
        prefix = ".".join(parts[:cut])
        if prefix in mapping:
            return ROOT / mapping[prefix] / Path(*parts[cut:])
    raise AssertionError(f"{package} is not under any package-dir entry")


def test_the_product_folders_stay_at_the_top_of_the_repository():
    for name in ("pyproject.toml", "databricks.yml"):
        assert (ROOT / name).is_file()
    for name in ("pipelines", "bronze", "silver", "gold", "expectations", "tests"):
        assert (ROOT / name).is_dir()
    assert SETUPTOOLS["package-dir"] == {
        "quorumlake": "quorumlake",
        "quorumlake.bronze": "bronze",
        "quorumlake.silver": "silver",
        "quorumlake.gold": "gold",
        "quorumlake.expectations": "expectations",
        "quorumlake.pipelines": "pipelines",
    }


def test_every_package_of_the_tree_is_installed_and_nothing_else():
    declared = set(SETUPTOOLS["packages"])
    assert all(name == "quorumlake" or name.startswith("quorumlake.") for name in declared)
    assert all((_folder(name) / "__init__.py").is_file() for name in declared)
    found = set()
    for name, folder in SETUPTOOLS["package-dir"].items():
        for init in (ROOT / folder).rglob("__init__.py"):
            relative = init.parent.relative_to(ROOT / folder)
            found.add(".".join([name, *relative.parts]))
    # a mapped sub-folder (quorumlake/ holds only its own sub-packages, bronze/ etc. are mapped on their own)
    assert found == declared


def test_the_package_data_is_declared_for_installed_packages():
    data = SETUPTOOLS["package-data"]
    assert set(data) <= set(SETUPTOOLS["packages"])
    assert list(_folder("quorumlake.expectations").glob("*.json"))
    assert (_folder("quorumlake.pipelines.engine") / "ivysettings.xml").is_file()
