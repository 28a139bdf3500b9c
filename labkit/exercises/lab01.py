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

:func:`check` grades it against the running service, in order, stopping at the first failure. Your model is
only ever called on tables *the grader builds for the grading*: your rows, each scaled by its own factor drawn
afresh (or re-measured now), and nothing else — no URL, no handle on the running service:

1. **the counts** — the five keys are there, of the stated types (a ``dict``; counts ``int``, stages ``int`` or
   ``float``); ``queries`` and ``catalog_calls`` are exactly what the server reports for that order. Counting
   is not timing: read ``order_detail`` in ``labkit/toyshop/export.py``.
2. **your prediction planned** — an :class:`~labkit.learner.record.Experiment` whose ``predicted_ratio`` is what your
   model says of ``GET /health`` ÷ ``GET /orders/{id}`` (the bare request's share of the order's time);
3. **priced from the table** — each stage must be *count × row*: every row of the grading table is nudged in
   turn, and each stage must move with some row by its count (``db_ms`` by ``queries`` times the row and
   ``catalog_ms`` by ``catalog_calls`` times, within 1 %: a count is a whole number, not a fitted coefficient;
   ``serialize_ms`` by the KiB of the order's JSON, which the server's response measures, within 25 %), with at
   most a small constant beside it. A number typed in does
   not move; a number read from the service, or fitted to its timings (a measured stage × row ÷ the row's
   value in your table), moves by the wrong amount.
4. **the band** — each stage at most ``factor`` (default :data:`DEFAULT_FACTOR`) above the stage the server
   measured (the median of ``rounds`` requests), and at most twice that below it: what a row model leaves out
   only ever makes the real stage dearer, never cheaper. The rows your model reads are re-measured
   alongside the requests (``/health`` interleaved with the order for the HTTP row, the in-process probes
   right after), and your function is priced with them — its answer must be what its structure, measured in
   step 3, predicts for them: a busy minute between your table and the check moves both sides alike. A row counts
   only where the grader measured it: a stage priced with a row the check cannot re-measure (one you added, or a
   slow probe's) fails here — price with the rows of :data:`TRUSTED`. The band
   is wide enough for what a table-row model leaves out (the probes run hot, in a tight loop; a request runs
   cold, through an instrumented connection, in another process) and narrow enough to catch a wrong count or a
   wrong row (the ladder's rows are orders of magnitude apart). Then your prediction is concluded with the
   interleaved ``/orders`` and ``/health`` requests.

The last item's ``detail`` holds the stage table (yours, measured, ratio) for a chart.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Callable, Mapping
from typing import Any

from labkit.grading import (
    Caller,
    CheckResult,
    Exercise,
    Item,
    Watch,
    failed,
    passed,
    planned,
    prediction,
    quiet,
    seal,
)
from labkit.grading import compare as _compare
from labkit.latency.ladder import PROBES as _ALL_PROBES
from labkit.latency.ladder import LatencyTable as _LatencyTable
from labkit.latency.network import http_samples as _http_samples  # the measuring tools, bound at import

__all__ = ["check", "measure_order", "hint", "solution", "DEFAULT_FACTOR", "KEYS", "STAGES", "TITLE", "TRUSTED"]

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
#: the probes, as they were at import: a probe replaced in labkit.latency.ladder.PROBES later is not run
_PROBES = {name: _ALL_PROBES[name] for name in _REMEASURE}
#: the rows the check re-measures: the only rows a stage may be priced with (any other row of your table — one you
#: added, a slow probe's — is a number you supplied, which the grader did not measure)
TRUSTED = tuple(sorted({"http_health", *(k for name in _REMEASURE for k in _PROBES[name][0])}))

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
           "ORDER_ID), 'json')) / 1024, outside your function. Each stage is its count times its row's price: "
           "return the counts you read in hint 1 beside them, as the docstring's keys say."),
    solution=_SOLUTION,
)
hint = EXERCISE.hint
solution = EXERCISE.solution


def measure_order(url: str, order_id: int = 1, rounds: int = 30) -> Any:
    """Measure ``GET /orders/{order_id}`` on a running toyshop (``url``): a :class:`labkit.latency.Samples`
    whose ``extra`` holds the Server-Timing stages (medians, ms) and counts."""
    return _http_samples(url, f"/orders/{order_id}", rounds=rounds)[0]


def _scaled(table: Any, factors: Mapping[str, float] | float) -> Any:
    """A table the grader builds: every row's samples (or those named in ``factors``) multiplied, and nothing
    but the rows — no ``extra`` (which can hold the service's URL), no fingerprint, no curve."""
    def k(key: str) -> float:
        return factors if isinstance(factors, int | float) else factors.get(key, 1.0)
    return _LatencyTable(tuple(dataclasses.replace(r, samples_ns=tuple(v * k(r.key) for v in r.samples_ns), extra={})
                              for r in table.rows))


def _replaced(table: Any, fresh: Mapping[str, Any]) -> Any:
    return _scaled(dataclasses.replace(table, rows=tuple(fresh.get(r.key, r) for r in table.rows)), 1.0)


def _breakdown(caller: Caller, napkin: Callable[[Any], Any], table: Any) -> tuple[dict[str, float] | None, str | None]:
    """Call the learner's model (through the grader's one code path); a dict of the five numbers, or why not."""
    out = caller.call(napkin, (table,))
    if out.error is not None:
        return None, f"your napkin raised {type(out.error).__name__}"
    got = out.value
    if type(got) is not dict:
        what = "None" if got is None else f"a {type(got).__name__}"
        return None, f"your napkin returned {what}; return a dict with the keys {', '.join(KEYS)}"
    missing = [k for k in KEYS if k not in got]
    if missing:
        return None, f"the breakdown has no {', '.join(map(repr, missing))}: return all of {', '.join(KEYS)}"
    empty = [k for k in KEYS if got[k] is None]
    if empty:
        return None, f"fill in {', '.join(map(repr, empty))} (still None)"
    result: dict[str, float] = {}
    for k in KEYS:
        v = got[k]
        if type(v) not in (int, float) or not math.isfinite(v) or v < 0:
            return None, f"{k!r} must be a number ≥ 0 (an int or a float), got a {type(v).__name__}"
        result[k] = float(v)
    zero = [k for k in STAGES if result[k] == 0]
    if zero:
        return None, f"{', '.join(map(repr, zero))} is 0 ms: every stage costs something; price it with a row"
    return result, None


def _structure(caller: Caller, napkin: Callable[[Any], Any], table: Any, base: dict[str, float],
               rng: random.Random) -> tuple[dict[str, dict[str, float]], str | None]:
    """How each stage moves with each row (ms of stage per ms of row), nudging the rows one at a time in a
    random order; or why the model could not be probed."""
    keys = [r.key for r in table.rows if r.samples_ns]
    rng.shuffle(keys)
    keys += rng.sample(keys, min(len(keys), rng.randint(1, 3)))  # a few rows twice: the count of calls varies
    slopes: dict[str, dict[str, float]] = {s: {} for s in STAGES}
    seen: set[str] = set()
    for key in keys:
        nudge = rng.uniform(1.3, 1.7)
        got, why = _breakdown(caller, napkin, _scaled(table, {key: nudge}))
        if got is None:
            return slopes, f"with the row {key} {nudge:.2f}× slower, {why}"
        step = (nudge - 1) * table.median_ns(key) / 1e6
        for s in STAGES:
            slope = 0.0 if math.isclose(got[s], base[s], rel_tol=1e-9, abs_tol=1e-12) else (got[s] - base[s]) / step
            if key in seen and not math.isclose(slope, slopes[s].get(key, 0.0), rel_tol=0.02, abs_tol=1e-9):
                return slopes, (f"nudging the row {key} twice moved {s} by different amounts: your model must price "
                                "the table it is given, the same way every time")
            if slope:
                slopes[s][key] = slope
        seen.add(key)
    return slopes, None


def _predicted(base: dict[str, float], slopes: dict[str, dict[str, float]], table: Any, now: Any) -> dict[str, float]:
    """What a stage must be on ``now`` if the model is count × row, as its slopes on ``table`` say."""
    return {s: base[s] + sum(c * (now.median_ns(k) - table.median_ns(k)) / 1e6 for k, c in slopes[s].items())
            for s in STAGES}


def _remeasure(keys: list[str], health: Any) -> dict[str, Any]:
    """Fresh rows for ``keys`` (those a quick probe can give), measured now."""
    fresh: dict[str, Any] = {}
    if "http_health" in keys and health is not None:
        fresh["http_health"] = dataclasses.replace(health, key="http_health", label="HTTP GET /health (re-measured)")
    for name in _REMEASURE:
        produced, run = _PROBES[name]
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


def check(napkin: Callable[[Any], Mapping[str, float]], table: Any, experiment: Any = None, *, url: str,
          order_id: int = 1, rounds: int = 30, factor: float = DEFAULT_FACTOR, remeasure: bool = True,
          save: bool = True, seed: int | None = None) -> CheckResult:
    """Grade a napkin model of ``GET /orders/{order_id}`` against the running service.

    Args:
        napkin: your model, ``napkin(table) -> dict`` with the keys of :data:`KEYS` (see the module docstring).
        table: the :class:`labkit.latency.LatencyTable` you measured (the grading tables are built from it).
        experiment: your ``Experiment.plan(...)`` whose ``predicted_ratio`` is your model's ``GET /health`` ÷
            ``GET /orders/{order_id}``: required (a prediction is part of passing); concluded with the
            interleaved requests and saved (when ``save``).
        url: the order service of a running toyshop (``labkit.service.start().url``).
        order_id: the order your breakdown is for.
        rounds: requests timed for the measured stages (their medians).
        factor: how far a stage estimate may be above the measured stage (5: up to 5×); below it, twice as far
            (a tenth), since a row model leaves out only what makes a stage dearer.
        remeasure: re-measure the rows your model reads alongside the requests (False: price it with
            ``table`` as given — for tests with a fixed table and a fake service).
        seed: reproduces the grading tables of a run (a new one is drawn each time by default).

    Returns:
        A :class:`labkit.grading.kit.CheckResult`: the counts, the plan, priced from the table, each stage within the
        band and the prediction concluded.
    """
    refused, seed, rng = EXERCISE.start(napkin, seed)
    if refused is not None:
        return refused
    if not (isinstance(factor, int | float) and factor > 1):
        return EXERCISE.refuse(f"factor must be a number above 1 (e.g. 5), got {factor!r}")
    if not hasattr(table, "rows") or not hasattr(table, "median_ns"):
        return EXERCISE.refuse(f"pass the latency table you measured (t = latency.table(...)), not "
                               f"{type(table).__name__}")
    # the grading table: the learner's rows, each scaled by its own factor, and nothing else in it
    grading = _scaled(table, {r.key: math.exp(rng.uniform(math.log(0.5), math.log(2.0))) for r in table.rows})
    state: dict[str, Any] = {}

    with Caller() as caller:
        def counted() -> Item:
            got, why = _breakdown(caller, napkin, grading)
            if got is None:
                return failed(why or "no breakdown", hint="fill in my_napkin's dict (see lab01.hint(1))",
                              criterion="correctness")
            state["yours"] = got
            (probe,) = _http_samples(url, f"/orders/{order_id}", rounds=1, warmup=0)
            counts = probe.extra["counts"]
            state["kib"] = probe.extra.get("bytes", 0) / 1024
            for key, metric in _COUNTS.items():
                server = counts.get(metric)
                if server is None or got[key] != server:
                    return failed(f"{key}: you counted {got[key]:g}, the server made {server}",
                                  hint="count the conn.execute and catalog calls in order_detail "
                                       "(get_many batches up to 50 ids per call)", criterion="correctness")
            return passed(f"counted right: {int(got['queries'])} queries and {int(got['catalog_calls'])} "
                          "catalog call(s), as the server reports", criterion="correctness")

        def from_table() -> Item:
            base = state["yours"]
            slopes, why = _structure(caller, napkin, grading, base, rng)
            if why is not None:
                return failed(why, criterion="budget")
            state["slopes"] = slopes
            # (count, what, tolerance): a count of calls is a whole number, so its slope is exact in a count × row
            # model; a coefficient fitted to the service's timings lands within 25 % of it on some runs, rarely
            # within 1 % of both. The KiB are the learner's own encoding beside the server's bytes: 25 %
            wanted = {"db_ms": (base["queries"], "queries", 0.01),
                      "catalog_ms": (base["catalog_calls"], "catalog calls", 0.01),
                      "serialize_ms": (state["kib"], "KiB of JSON (the server's answer)", 0.25)}
            for stage, (count, what, tolerance) in wanted.items():
                moved = slopes[stage]
                if not moved:
                    return failed(f"{stage} does not move with any row of the table it was given",
                                  "a stage typed in (or read from the service) is not priced",
                                  "compute each stage from rows of t (t.median_ns('row') / 1e6 ms × a count)",
                                  criterion="budget")
                best_key, best = min(moved.items(), key=lambda kv: abs(kv[1] - count))
                if count <= 0 or abs(best - count) > tolerance * count:
                    return failed(f"{stage} moves with {best_key} as {best:.3g} × the row, but a stage priced from "
                                  f"the table is count × row: {count:.3g} {what}",
                                  "a coefficient fitted to a measurement is not a count",
                                  "price the stage as (its count) × t.median_ns(row) / 1e6", criterion="budget")
                rest = base[stage] - sum(c * grading.median_ns(k) / 1e6 for k, c in moved.items())
                if abs(rest) > 0.25 * base[stage]:
                    return failed(f"{stage}: {rest:.3g} ms of it does not come from any row",
                                  "more than a small constant beside the priced terms",
                                  "drop the typed-in part, or price it with a row", criterion="budget")
            return passed("priced from the table: every stage moves as count × row (db with the queries, catalog "
                          "with the calls, serialize with the KiB) on a table built for this check",
                          criterion="budget")

        def within_band() -> tuple[Item, ...]:
            base, slopes = state["yours"], state["slopes"]
            keys = sorted({k for per in slopes.values() for k in per})
            # the band is measured: refused while other threads of this process use the CPU (before, or during
            # — a thread that burns only between the learner's calls inflates the rows the band is priced with).
            # The service is this kernel's child: its work is the measurement, so children are not counted
            if (busy := quiet(caller, "before the band's requests", "speed", children=False)) is not None:
                return (busy,)
            watch = Watch(caller, children=False)
            order, health = _http_samples(url, f"/orders/{order_id}", "/health", rounds=rounds)
            fresh = _remeasure(keys, health) if remeasure else {}
            if (used := watch.busy()) is not None:
                return (failed(f"the band's measurements: {used}", "the requests and the re-measured rows cannot "
                               "be trusted", "stop the threads your notebook started, then check again",
                               criterion="speed"),)
            unmeasured = [k for k in keys if k not in fresh] if remeasure else []
            if unmeasured:
                priced = [s for s in STAGES if set(slopes[s]) & set(unmeasured)]
                return (failed(f"{', '.join(priced)} priced with {', '.join(unmeasured)}, a row the check did not "
                               "measure", "a row you supply counts only where the grader measures it too: a number "
                               "typed into the table is not a measurement",
                               f"price each stage with rows the check re-measures ({', '.join(TRUSTED)})",
                               criterion="speed"),)
            now_table = _replaced(table, fresh)
            now, why = _breakdown(caller, napkin, now_table)
            if now is None:
                return (failed(f"on the re-measured table, {why}", criterion="speed"),)
            expect = _predicted(base, slopes, grading, now_table)
            off = [s for s in STAGES if not math.isclose(now[s], expect[s], rel_tol=0.02, abs_tol=1e-9)]
            if off:
                return (failed(f"on the re-measured table your model answered {off[0]} = {now[off[0]]:.3g} ms, where "
                               f"its own rows give {expect[off[0]]:.3g} ms",
                               "every answer counts: the model must price the table it is given, every time",
                               criterion="speed"),)
            df = _stage_table(now, order.extra["server_timing_ms"])
            remeasured = f"rows re-measured now: {', '.join(sorted(fresh)) or 'none'}"
            low = 2 * factor  # how much dearer the server may be than the model (what a row model leaves out)
            outside = df[~((df["measured / yours"] >= 1 / factor) & (df["measured / yours"] <= low))]
            if len(outside):
                parts = []
                for r in outside.itertuples():
                    way = "too low" if r.measured_ms > r.yours_ms else "too high"
                    parts.append(f"{r.stage}: yours {r.yours_ms:.3g} ms, measured {r.measured_ms:.3g} ms "
                                 f"({way}, {max(r.measured_ms / r.yours_ms, r.yours_ms / r.measured_ms):.1f}×)")
                return (failed("; ".join(parts), f"outside the band: at most {factor:g}× too high or {low:g}× too "
                               f"low ({remeasured})",
                               "check the row you priced that stage with, and the count or KiB it multiplies",
                               detail=df, criterion="speed"),)
            worst = df["measured / yours"].map(lambda r: max(r, 1 / r)).max()
            band = passed(f"every stage within the band ({factor:g}× above the server's, {low:g}× below; worst "
                          f"{worst:.1f}×, median of {rounds} "
                          f"requests; {remeasured})", detail=df, criterion="speed")
            try:
                c = _compare(order, health, names=(f"GET /orders/{order_id}", "GET /health"))
            except Exception as e:  # too few requests to compare: say so, do not crash
                return band, failed(f"the requests could not be compared: {e}", criterion="prediction")
            return band, prediction(experiment, c, save=save)

        result = EXERCISE.grade(counted, lambda: planned(experiment), from_table, within_band, seed=seed,
                                about=f"order {order_id}")
    return result


_SEALED = seal(globals())
