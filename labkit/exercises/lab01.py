"""Lab 01's exercise: the napkin breakdown of ``GET /orders/{id}``, priced with your own latency table.

You write a *model*, not a number: a function of a latency table that returns the breakdown, a plain dict
with the counts and one estimate per Server-Timing stage, in milliseconds::

    def my_napkin(t):                    # t: the labkit.latency.LatencyTable you measured
        return {
            "queries": ...,              # SQL queries the request makes        (Server-Timing db;count)
            "catalog_calls": ...,        # HTTP calls to the catalog             (catalog;count)
            "db_ms": ...,                # time in the db stage, ms              (db;dur)
            "catalog_ms": ...,           # time in the catalog stage, ms         (catalog;dur)
            "serialize_ms": ...,         # time encoding the JSON answer, ms     (serialize;dur)
        }

:func:`check` grades it against the running service, in order, stopping at the first failure:

1. **the counts** — the five keys are there and are numbers; ``queries`` and ``catalog_calls`` are exactly
   what the server reports for that order. Counting is not timing: read ``order_detail`` in
   ``labkit/toyshop/export.py``.
2. **priced from your table** — when every row of the table is ``k`` times slower (``k`` drawn afresh for each
   grading run), every stage estimate grows about ``k``-fold: a number typed in — guessed, or copied from a
   measurement — does not move. (Small constants are tolerated: within 1.5× of ``k``.)
3. **the band** — each stage within ``factor`` (default :data:`DEFAULT_FACTOR`) of the stage the server
   measured (the median of ``rounds`` requests), either way. The rows your model reads are re-measured
   alongside the requests (``/health`` interleaved with the order for the HTTP row, the in-process probes
   right after), and your function is priced with them: a busy minute between your table and the check moves
   both sides alike. The band is wide enough for what a table-row model leaves out (the probes run hot, in a
   tight loop; a request runs cold, through an instrumented connection, in another process) and narrow
   enough to catch a wrong count or a wrong row (the ladder's rows are orders of magnitude apart).

The last item's ``detail`` holds the stage table (yours, measured, ratio) for a chart.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Callable, Mapping
from typing import Any

from labkit.check import CheckResult, Exercise, Item, failed, fresh_seed, not_callable, passed

__all__ = ["check", "measure_order", "hint", "solution", "DEFAULT_FACTOR", "KEYS", "STAGES", "TITLE"]

DEFAULT_FACTOR = 5.0
TITLE = "Lab 01 — the napkin breakdown of GET /orders/{id}"
#: the breakdown's keys: the two counts, then one estimate per Server-Timing stage (ms)
KEYS = ("queries", "catalog_calls", "db_ms", "catalog_ms", "serialize_ms")
#: breakdown key → the Server-Timing stage it estimates
STAGES = {"db_ms": "db", "catalog_ms": "catalog", "serialize_ms": "serialize"}
_COUNTS = {"queries": "db", "catalog_calls": "catalog"}
# rows the grader can re-measure in about a second, by the latency table's probe that makes them; the HTTP
# row is re-measured on the graded service itself (/health interleaved with the order), the slow or
# irrelevant probes (cache curve, disk, fsync, page faults) are left as you measured them
_REMEASURE = ("python", "syscall", "lock", "context_switch", "compress", "json", "sqlite", "tcp")

_SOLUTION = '''\
from labkit.toyshop import dataset, db, export
from labkit.toyshop.catalog import FakeCatalog
from labkit.toyshop.core.encoding import encode

# counting is not timing: the JSON's size comes from encoding the answer once, in process
_path = dataset.ensure("small")
_order = export.order_detail(db.connect(_path), FakeCatalog.from_db(_path), ORDER_ID)
KIB = len(encode(_order, "json")) / 1024

def my_napkin(t):
    queries = 2          # the order's head, then one JOIN of its items with their products
    catalog_calls = 1    # get_many: one batch call for up to 50 product ids
    ms = lambda key: t.median_ns(key) / 1e6
    return {"queries": queries, "catalog_calls": catalog_calls,
            "db_ms": queries * ms("sqlite_point_query"),
            "catalog_ms": catalog_calls * ms("http_health"),      # the catalog is a small Starlette service
            "serialize_ms": KIB * ms("json_encode_1k")}           # codec=json, the default
'''

EXERCISE = Exercise(
    TITLE,
    hints=("Count first, time later: read order_detail in labkit/toyshop/export.py. How many conn.execute "
           "calls does it make, and how many HTTP calls does catalog.get_many make for a handful of ids "
           "(its batch_size is 50)?",
           "Price each stage with one row of your table, t.median_ns(key) / 1e6 ms: a query is a "
           "'sqlite_point_query', a catalog call is an HTTP request to a small service over loopback "
           "('http_health'), encoding is 'json_encode_1k' per KiB of JSON.",
           "The KiB: encode the order once in process, len(encode(order_detail(conn, FakeCatalog.from_db(path), "
           "ORDER_ID), 'json')) / 1024, outside your function. Then return {'queries': 2, 'catalog_calls': 1, "
           "'db_ms': 2 * …, 'catalog_ms': 1 * …, 'serialize_ms': KIB * …}."),
    solution=_SOLUTION,
)
hint = EXERCISE.hint
solution = EXERCISE.solution


def measure_order(url: str, order_id: int = 1, rounds: int = 30) -> Any:
    """Measure ``GET /orders/{order_id}`` on a running toyshop (``url``): a :class:`labkit.latency.Samples`
    whose ``extra`` holds the Server-Timing stages (medians, ms) and counts."""
    from labkit.latency.network import http_samples

    return http_samples(url, f"/orders/{order_id}", rounds=rounds)[0]


def _scaled(table: Any, factors: Mapping[str, float] | float) -> Any:
    """The table with every row's samples (or only the rows named in ``factors``) multiplied."""
    def k(key: str) -> float:
        return factors if isinstance(factors, int | float) else factors.get(key, 1.0)
    return dataclasses.replace(table, rows=tuple(
        dataclasses.replace(r, samples_ns=tuple(v * k(r.key) for v in r.samples_ns)) for r in table.rows))


def _replaced(table: Any, fresh: Mapping[str, Any]) -> Any:
    return dataclasses.replace(table, rows=tuple(fresh.get(r.key, r) for r in table.rows))


def _breakdown(napkin: Callable[[Any], Any], table: Any) -> tuple[dict[str, float] | None, str | None]:
    """Call the learner's model; a dict of the five numbers, or why not (a sentence)."""
    try:
        got = napkin(table)
    except Exception as e:  # the learner's code: reported, never raised
        return None, f"your napkin raised {type(e).__name__}: {e}"
    if not isinstance(got, Mapping):
        what = "None" if got is None else f"a {type(got).__name__}"
        return None, (f"your napkin returned {what}; return a dict with the keys "
                      f"{', '.join(KEYS)}")
    missing = [k for k in KEYS if k not in got]
    if missing:
        return None, f"the breakdown has no {', '.join(map(repr, missing))}: return all of {', '.join(KEYS)}"
    empty = [k for k in KEYS if got[k] is None]
    if empty:
        return None, f"fill in {', '.join(map(repr, empty))} (still None)"
    out: dict[str, float] = {}
    for k in KEYS:
        v = got[k]
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < 0:
            return None, f"{k!r} must be a number ≥ 0, got {v!r}"
        out[k] = float(v)
    zero = [k for k in STAGES if out[k] == 0]
    if zero:
        return None, f"{', '.join(map(repr, zero))} is 0 ms: every stage costs something; price it with a row"
    return out, None


def _rows_read(napkin: Callable[[Any], Any], table: Any, base: dict[str, float], keys: list[str]) -> list[str]:
    """Which of ``keys`` the model's stages depend on (doubling the row moves a stage)."""
    used = []
    for key in keys:
        got, _ = _breakdown(napkin, _scaled(table, {key: 2.0}))
        if got is None or any(not math.isclose(got[s], base[s], rel_tol=1e-9) for s in STAGES):
            used.append(key)
    return used


def _remeasure(keys: list[str], health: Any) -> dict[str, Any]:
    """Fresh rows for ``keys`` (those a quick probe can give), measured now."""
    from labkit.latency.ladder import PROBES

    fresh: dict[str, Any] = {}
    if "http_health" in keys and health is not None:
        fresh["http_health"] = dataclasses.replace(health, key="http_health", label="HTTP GET /health (re-measured)")
    for name in _REMEASURE:
        produced, run = PROBES[name]
        if not set(produced) & set(keys):
            continue
        try:
            got = run(True, None)
        except Exception:  # a probe that fails now leaves your row as you measured it
            continue
        for row in (got,) if hasattr(got, "samples_ns") else got:
            if row.key in keys and row.available:
                fresh[row.key] = row
    return fresh


def _stage_table(yours: dict[str, float], measured: Mapping[str, float]) -> Any:
    import pandas as pd

    rows = [{"stage": STAGES[k], "yours_ms": yours[k], "measured_ms": float(measured.get(STAGES[k], float("nan")))}
            for k in STAGES]
    df = pd.DataFrame(rows)
    df["measured / yours"] = df["measured_ms"] / df["yours_ms"]
    return df


def check(napkin: Callable[[Any], Mapping[str, float]], table: Any, *, url: str, order_id: int = 1,
          rounds: int = 30, factor: float = DEFAULT_FACTOR, remeasure: bool = True,
          seed: int | None = None) -> CheckResult:
    """Grade a napkin model of ``GET /orders/{order_id}`` against the running service.

    Args:
        napkin: your model, ``napkin(table) -> dict`` with the keys of :data:`KEYS` (see the module docstring).
        table: the :class:`labkit.latency.LatencyTable` you measured (the model is priced with it).
        url: the order service of a running toyshop (``labkit.service.start().url``).
        order_id: the order your breakdown is for.
        rounds: requests timed for the measured stages (their medians).
        factor: how far a stage estimate may be from the measured stage, either way (5 = a fifth to 5×).
        remeasure: re-measure the rows your model reads alongside the requests (False: price it with
            ``table`` as given — for tests with a fixed table and a fake service).
        seed: reproduces the table scaling of a grading run (a new one is drawn each time by default).

    Returns:
        A :class:`labkit.check.CheckResult`: the counts, priced from the table, each stage within the band.
    """
    refused = not_callable(EXERCISE, napkin)
    if refused is not None:
        return refused
    if not (isinstance(factor, int | float) and factor > 1):
        return EXERCISE.refuse(f"factor must be a number above 1 (e.g. 5), got {factor!r}")
    if not hasattr(table, "rows") or not hasattr(table, "median_ns"):
        return EXERCISE.refuse(f"pass the latency table you measured (t = latency.table(...)), not "
                               f"{type(table).__name__}")
    from labkit.latency.network import http_samples

    seed = fresh_seed() if seed is None else seed
    k = random.Random(seed).uniform(3.0, 9.0)
    state: dict[str, Any] = {}

    def counted() -> Item:
        got, why = _breakdown(napkin, table)
        if got is None:
            return failed(why or "no breakdown", hint="fill in my_napkin's dict (see lab01.hint(1))")
        state["yours"] = got
        (probe,) = http_samples(url, f"/orders/{order_id}", rounds=1, warmup=0)
        counts = probe.extra["counts"]
        for key, metric in _COUNTS.items():
            server = counts.get(metric)
            if server is None or int(got[key]) != server or got[key] != int(got[key]):
                return failed(f"{key}: you counted {got[key]:g}, the server made {server}",
                              hint="count the conn.execute and catalog calls in order_detail "
                                   "(get_many batches up to 50 ids per call)")
        return passed(f"counted right: {int(got['queries'])} queries and {int(got['catalog_calls'])} "
                      "catalog call(s), as the server reports")

    def from_table() -> Item:
        base = state["yours"]
        got, why = _breakdown(napkin, _scaled(table, k))
        if got is None:
            return failed(f"with every row of the table {k:.2f}× slower, {why}")
        if any(got[c] != base[c] for c in _COUNTS):
            return failed(f"your counts changed when the table's times did ({got['queries']:g} queries)",
                          hint="counts come from the code, not from the table")
        moved = {s: got[s] / base[s] for s in STAGES}
        stuck = {s: m for s, m in moved.items() if not k / 1.5 <= m <= k * 1.5}
        if stuck:
            which = ", ".join(f"{s} ×{m:.2f}" for s, m in stuck.items())
            return failed(f"with every row of the table {k:.2f}× slower, your stages moved {which}",
                          "a stage that does not follow the table was typed in, not priced",
                          "compute each stage from rows of t (t.median_ns('row') / 1e6 ms × a count)")
        return passed(f"priced from your table: with every row {k:.2f}× slower, every stage grew with it "
                      f"({', '.join(f'{s} ×{m:.2f}' for s, m in moved.items())})")

    def within_band() -> Item:
        base = state["yours"]
        keys = _rows_read(napkin, table, base, [r.key for r in table.rows if r.available])
        order, health = http_samples(url, f"/orders/{order_id}", "/health", rounds=rounds)
        fresh = _remeasure(keys, health) if remeasure else {}
        now, _ = _breakdown(napkin, _replaced(table, fresh))
        now = now or base
        df = _stage_table(now, order.extra["server_timing_ms"])
        remeasured = f"rows re-measured now: {', '.join(sorted(fresh)) or 'none'}"
        off = df[~((df["measured / yours"] >= 1 / factor) & (df["measured / yours"] <= factor))]
        if len(off):
            parts = []
            for r in off.itertuples():
                way = "too low" if r.measured_ms > r.yours_ms else "too high"
                parts.append(f"{r.stage}: yours {r.yours_ms:.3g} ms, measured {r.measured_ms:.3g} ms "
                             f"({way}, {max(r.measured_ms / r.yours_ms, r.yours_ms / r.measured_ms):.1f}×)")
            return failed("; ".join(parts), f"outside {factor:g}× either way ({remeasured})",
                          "check the row you priced that stage with, and the count or KiB it multiplies",
                          detail=df)
        worst = df["measured / yours"].map(lambda r: max(r, 1 / r)).max()
        return passed(f"every stage within {factor:g}× of the server's (worst {worst:.1f}×, median of {rounds} "
                      f"requests; {remeasured})", detail=df)

    result = EXERCISE.grade(counted, from_table, within_band)
    return CheckResult(f"{result.title} (order {order_id}, seed {seed})", result.items)
