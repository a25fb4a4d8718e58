"""One Delta-enabled Spark session for the whole test run; each test gets its own landing zone and warehouse."""

from __future__ import annotations

import contextlib
import fcntl
import io
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from quorumlake.pipelines.config import Config
from quorumlake.pipelines.engine.local import SMALL_RUN_JAVA_OPTIONS
from quorumlake.pipelines.engine.session import get_spark, quiet
from quorumlake.pipelines.storage import Lakehouse

DATA = Path(__file__).parent / "data"
ROOT = Path(__file__).parent.parent

# Python turns naive datetimes into Spark timestamps with the local zone; pin it so tests mean UTC everywhere.
os.environ["TZ"] = "UTC"
time.tzset()


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    # Must be the first SparkSession of the process (Delta's jars are only picked up when the JVM starts).
    # every test's data is tiny: the JVM of a small run
    config = Config(
        warehouse=str(tmp_path_factory.mktemp("session-warehouse")),
        spark_master="local[2]",
        shuffle_partitions=2,
        java_options=SMALL_RUN_JAVA_OPTIONS,
    )
    session = get_spark(config, app_name="quorumlake-tests")
    quiet(session)
    Lakehouse(session, config).tune_for(0)  # every test's data is tiny: the engine of a small run
    yield session
    session.stop()


@pytest.fixture
def drop_cached(spark):
    """Empties Spark's cache after the test: for a test file whose helpers cache the DataFrames a test looks at more
    than once (`pytestmark = pytest.mark.usefixtures("drop_cached")`)."""
    yield
    spark.catalog.clearCache()


@pytest.fixture
def landing(tmp_path) -> Callable[..., Path]:
    """Build a landing zone in a temp folder from named trees under tests/data (e.g. 'landing', 'landing_bad')."""
    root = tmp_path / "landing"
    root.mkdir()

    def build(*trees: str) -> Path:
        for tree in trees:
            shutil.copytree(DATA / tree, root, dirs_exist_ok=True)
        return root

    return build


@pytest.fixture
def make_lakehouse(spark, tmp_path) -> Callable[..., Lakehouse]:
    def make(landing: Path, **settings) -> Lakehouse:
        config = Config(
            landing=str(landing), warehouse=str(tmp_path / "warehouse"), spark_master="local[2]", shuffle_partitions=2
        ).with_overrides(**settings)
        return Lakehouse(spark, config)

    return make


def build_wheel(dest: Path) -> subprocess.CompletedProcess:
    """`pip wheel` of the checkout into `dest`. setuptools builds in the checkout's own build/ folder, so two builds at
    once (tests on parallel workers) take turns on a machine-wide lock."""
    lock_path = Path(tempfile.gettempdir()) / "quorumlake-wheel-build.lock"
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(dest), str(ROOT)],
            check=False,
            capture_output=True,
            text=True,
            timeout=600,
        )


@contextlib.contextmanager
def once_per_run(tmp_path_factory, name: str) -> Iterator[Path]:
    """The folder `name` in the test run's own temp folder (above each worker's, so every worker sees the same one),
    held under a lock while the caller fills it or finds it filled: whichever worker comes first builds what is shared,
    the others wait for it."""
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield shared / name


@pytest.fixture(scope="session")
def checkout_wheel(tmp_path_factory) -> Path:
    """The checkout's wheel, built once per test run."""
    with once_per_run(tmp_path_factory, "checkout-wheel") as dist:
        if not any(dist.glob("quorumlake-*.whl")):
            built = build_wheel(dist)
            if built.returncode != 0:
                pytest.fail(f"pip wheel of the checkout failed:\n{built.stderr[-3000:]}")
    (wheel,) = dist.glob("quorumlake-*.whl")
    return wheel


@pytest.fixture(scope="session")
def landing_run(spark, tmp_path_factory) -> tuple[Path, Path]:
    """`tests/data/landing` and the warehouse of one `quorumlake run` over it into an empty warehouse, once per test run
    for the tests that only read them (a copy to change anything: the tables name the landing zone's files, so the
    zone stays where it is). (landing zone, warehouse)"""
    with once_per_run(tmp_path_factory, "landing-run") as root:
        zone, warehouse = root / "landing", root / "warehouse"
        if not (root / "done").is_file():
            shutil.rmtree(root, ignore_errors=True)  # what a failed attempt left
            shutil.copytree(DATA / "landing", zone)
            from quorumlake.pipelines.app import cli

            with contextlib.redirect_stdout(io.StringIO()):
                assert cli.main(["run", "--landing", str(zone), "--warehouse", str(warehouse)]) == 0
            (root / "done").touch()
    return zone, warehouse


# The test files that take longest, first: `make test` hands whole files to the workers in collection order
# (`--no-loadscope-reorder`; pytest-xdist's default hands out the files with the most tests first, which puts the many
# short unit files first and a long end-to-end file last), and the longest going last would leave one worker alone for
# minutes (longest-first packing). Files not listed keep their order after these. The comments give each file's
# approximate seconds on a worker of a 2-core machine (`--durations=0`); re-order when they change.
SLOWEST_FIRST = (
    # first, on a worker of its own: the live Kafka test's cluster and phases (~45 s) leave the cores mostly idle beside
    # the other worker's first file; its pipeline run then starts the worker's session, which the next files reuse
    "tests/live/test_live_kafka.py",  # ~150 s
    "tests/e2e/test_demo_report_serve.py",  # ~230 s
    "tests/e2e/test_crash.py",  # ~280 s (warm: after the live test)
    "tests/e2e/test_connect.py",  # ~50 s
    "tests/e2e/test_recovery.py",  # ~170 s
    "tests/e2e/test_slo_e2e.py",  # ~150 s (35 simulated days, three runs)
    "tests/e2e/test_demo_live.py",  # ~95 s (the demo command)
    "tests/e2e/test_hostile.py",  # ~60 s
    "tests/unit/test_storage.py",  # ~80 s
    "tests/e2e/test_gold_e2e.py",  # ~55 s
    "tests/unit/test_bronze_raw.py",  # ~35 s
    "tests/unit/test_expectations.py",  # ~10 s
    "tests/e2e/test_bronze_e2e.py",  # ~40 s
    "tests/e2e/test_silver_e2e.py",  # ~40 s
    "tests/unit/test_silver_quorum.py",  # ~15 s
    "tests/unit/test_silver_hostile.py",  # ~15 s
)


def pytest_collection_modifyitems(session, config, items):
    rank = {path: i for i, path in enumerate(SLOWEST_FIRST)}

    def file_rank(item) -> int:
        path = Path(str(item.fspath)).relative_to(ROOT).as_posix()
        return rank.get(path, len(rank))

    items.sort(key=file_rank)  # stable: tests keep their order within a file, and the other files theirs


# The live Kafka test's progress lines (the Kafka version, each phase, the run), captured on its worker, repeated at the
# end of the session's report (`make live` runs it with -s instead, where they print as they come).
_LIVE_LOG: list[str] = []


def pytest_runtest_logreport(report):
    if report.nodeid.startswith("tests/live/") and report.when == "setup":
        for name, text in report.sections:
            if name.startswith("Captured stdout"):
                _LIVE_LOG.extend(line for line in text.splitlines() if line.startswith("[live-kafka"))


def pytest_terminal_summary(terminalreporter):
    if _LIVE_LOG:
        terminalreporter.section("the live Kafka test")
        for line in _LIVE_LOG:
            terminalreporter.write_line(line)
