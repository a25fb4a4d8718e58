"""The SLO views of quorumlake.gold.views on tiny tables: burn episodes (runs of burning windows, broken by a window
that does not burn or by a gap longer than the long lookback, ongoing at the end) and attainment by cohort (sums
over the last 28 days, each cluster-day in its own day's cohort, unknown cohorts named)."""

from __future__ import annotations

from datetime import date, datetime, timedelta

import pytest

from quorumlake.contract.tables import GOLD_CLUSTER_COHORTS, GOLD_SLO_BUDGET, GOLD_SLO_BURN, resolve_names
from quorumlake.gold.views import SLO_ATTAINMENT_BY_COHORT, SLO_BURN_EPISODES

pytestmark = pytest.mark.usefixtures("drop_cached")

T0 = datetime(2026, 1, 1, 12, 0)


def query(spark, view, tables: dict[str, list[tuple]]):
    """The view's SQL over temporary views of the given rows (`{gold.x}` -> a temporary view per table)."""
    names = {}
    for spec in (GOLD_SLO_BURN, GOLD_SLO_BUDGET, GOLD_CLUSTER_COHORTS):
        name = f"t_{spec.table}"
        spark.createDataFrame(tables.get(spec.name, []), spec.spark_schema).createOrReplaceTempView(name)
        names[spec.name] = name
    return spark.sql(resolve_names(view.sql, lambda n: names[n]))


def burn_row(
    minutes: int, fast: bool, slow: bool = False, rate: float = 20.0, cluster: str = "c", slo: str = "quorum_lag"
):
    start = T0 + timedelta(minutes=minutes)
    return (cluster, slo, start, start + timedelta(minutes=5), 0.999, 9, 10, rate, rate, rate, rate / 2, fast, slow)


def test_burn_episodes(spark):
    rows = [
        burn_row(0, True, rate=30.0),
        burn_row(5, True, rate=50.0),
        burn_row(10, False),  # a window that does not burn ends the episode
        burn_row(15, True, slow=True),
        burn_row(20, True, slow=True),
        # no window with events for 70 minutes, more than the hour of a fast burn: a new episode; the slow one
        # (6 hours) goes on
        burn_row(95, True, slow=True),
        burn_row(100, True, slow=True),  # the series' latest window: both go on
        burn_row(0, True, cluster="d"),  # another cluster, ended by its next window
        burn_row(5, False, cluster="d"),
    ]
    got = {
        (r["cluster_id"], r["kind"], r["started_at"]): (r["ended_at"], r["windows"], r["peak_burn_rate"])
        for r in query(spark, SLO_BURN_EPISODES, {"gold.slo_burn": rows}).collect()
    }
    t = lambda m: T0 + timedelta(minutes=m)
    assert got == {
        ("c", "fast", t(0)): (t(10), 2, 50.0),
        ("c", "fast", t(15)): (t(25), 2, 20.0),
        ("c", "fast", t(95)): (None, 2, 20.0),
        ("c", "slow", t(15)): (None, 4, 10.0),
        ("d", "fast", t(0)): (t(5), 1, 20.0),
    }


def test_attainment_by_cohort_sums_the_last_28_days_by_each_day_s_cohort(spark):
    last = date(2026, 2, 1)
    day = lambda n: last - timedelta(days=n)
    budget = []
    for n in range(30):  # days 29 and 28 before the last are outside the 28 days
        budget.append(("a", "quorum_lag", day(n), 0.999, 90, 100, 0, 0, 0, 0.0, 0.0))
        budget.append(("b", "quorum_lag", day(n), 0.999, 10, 10, 0, 0, 0, 0.0, 0.0))
    cohorts = [
        # cluster a upgrades from 3.9 to 4.1 ten days before the last; b's version is unknown
        ("a", day(n), "4.1" if n < 10 else "3.9", None, None, 1, "dynamic", datetime(2026, 1, 1))
        for n in range(30)
    ] + [("b", day(n), None, None, None, None, "static", datetime(2026, 1, 1)) for n in range(30)]
    got = {
        (r["dimension"], r["cohort"]): (r["clusters"], r["days"], r["good"], r["total"], r["attainment"])
        for r in query(
            spark, SLO_ATTAINMENT_BY_COHORT, {"gold.slo_budget": budget, "gold.cluster_cohorts": cohorts}
        ).collect()
    }
    assert got[("kafka_version", "4.1")] == (1, 10, 900, 1000, 0.9)
    assert got[("kafka_version", "3.9")] == (1, 18, 18 * 90, 1800, 0.9)
    assert got[("kafka_version", "unknown")] == (1, 28, 280, 280, 1.0)
    # dynamic: a's 28 days; static: b's; the ratio of sums, not the mean of ratios
    assert got[("quorum_mode", "dynamic")][2:4] == (28 * 90, 2800)
    assert got[("quorum_mode", "static")][2:4] == (280, 280)
    assert got[("metadata_version", "unknown")] == (2, 28, 28 * 100, 28 * 110, pytest.approx(2800 / 3080))
    row = query(spark, SLO_ATTAINMENT_BY_COHORT, {"gold.slo_budget": budget, "gold.cluster_cohorts": cohorts}).first()
    assert (row["from_day"], row["to_day"]) == (day(27), last)
