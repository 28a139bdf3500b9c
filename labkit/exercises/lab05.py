"""Lab 05's exercise: encode the order endpoint for the courier app — only what it reads, fewer bytes, faster.

``GET /orders/{id}`` answers every field of every product (the baseline: stdlib json of the whole order).
The *courier app* shows a delivery summary and reads only :func:`courier_view` of it: the order's id, status,
currency and total; per item its sku, name and quantity; per product its warehouse and weight (``product``
stays ``None`` when the catalog does not know it). The learner writes ``encode(order) -> bytes`` in a format
the app can read — ``"json"`` or ``"msgpack"`` — and :func:`check` grades, in order:

1. **correctness** — the answer must be exactly ``bytes`` (no subclass, no lazy object), the grader decodes
   it itself (``json.loads`` or ``msgpack.unpackb``: the learner supplies no decoder, so nothing can be looked
   up on the way back) and compares it with the courier view of the baseline's answer in a form no value can
   fake (``True`` is not ``1``, ``3.0`` is not ``3``: :func:`labkit.grading.exact.difference`), on edge cases (an order
   of one item, a product the catalog does not know, non-ASCII text) and on orders of the sizes it times;
2. **the prediction** — your :class:`labkit.learner.record.Experiment`, planned before the check, is required;
3. **bytes** — on an order generated for this call, at most ``max_share`` of the baseline's bytes, the
   answer checked;
4. **speed** — ``labkit.compare`` against the baseline on a new order for every timed call, **every timed
   answer checked**: ``faster`` by at least ``required_speedup``; then your experiment is concluded with the
   measured ratio (judged against its interval, widened by ±25 %) and saved. The bar (1.5×) is set for the
   fields: the courier view sent by stdlib json clears it with room on a busy node; the codec's share on top is
   what the learner's prediction is judged on (``bench_graders.py --lab lab05`` prints both solutions' tallies).

Every order graded is **generated for this grading**: a dataset order's shape, with every value the courier
app reads drawn afresh (the order's id, status and total, each item's sku, name and quantity, each product's
warehouse and weight), so an answer precomputed for the dataset's orders matches none of them. Every call of
your function, in every phase, goes through one :class:`labkit.grading.kit.Caller`, and the module is sealed at
import (:mod:`labkit.grading.kit`'s threat model). The orders come from the small dataset through an in-process
:class:`labkit.toyshop.catalog.FakeCatalog`, so the check needs no service.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

import msgpack

from labkit.grading import (
    Caller,
    CheckResult,
    Exercise,
    Experiment,
    Item,
    answers,
    band,
    difference,
    failed,
    kind,
    passed,
    planned,
    prediction,
    seal,
    timed,
)

# the tools that build the graded orders, bound at import: a learner's fake order_detail changes nothing here
from labkit.toyshop.catalog import FakeCatalog as _FakeCatalog
from labkit.toyshop.dataset import ensure as _ensure
from labkit.toyshop.db import connect as _connect
from labkit.toyshop.export import order_detail as _order_detail

__all__ = ["baseline", "courier_view", "load_order", "check", "FORMATS", "hint", "solution"]

#: formats the courier app can read, with the decoder the grader uses on your bytes.
FORMATS: dict[str, Callable[[bytes], Any]] = {"json": json.loads, "msgpack": lambda b: msgpack.unpackb(b, raw=False)}
ORDER_KEYS = ("id", "status", "currency", "total_cents")
ITEM_KEYS = ("sku", "name", "quantity")
PRODUCT_KEYS = ("warehouse", "weight_g")


def baseline(order: Mapping[str, Any]) -> bytes:
    """What ``/orders/{id}`` sends today: the whole order, every product field, stdlib json."""
    return json.dumps(order).encode()


def courier_view(order: Mapping[str, Any]) -> dict[str, Any]:
    """What the courier app reads of an order: the content your bytes must decode to."""
    def product(p: Mapping[str, Any] | None) -> dict[str, Any] | None:
        return None if p is None else {k: p[k] for k in PRODUCT_KEYS}
    return {**{k: order[k] for k in ORDER_KEYS},
            "items": [{**{k: it[k] for k in ITEM_KEYS}, "product": product(it["product"])} for it in order["items"]]}


@lru_cache(maxsize=1)
def _source() -> tuple[Any, Any, tuple[int, ...], tuple[int, ...]]:
    path = _ensure("small", quiet=True)
    conn = _connect(path)
    counts = conn.execute("SELECT order_id, COUNT(*) FROM order_items GROUP BY order_id ORDER BY order_id").fetchall()
    big = tuple(o for o, n in counts if n >= 4)  # orders of 4+ items: a timed call lasts well over 10 µs
    single = tuple(o for o, n in counts if n == 1)
    return conn, _FakeCatalog.from_db(path), big, single


def load_order(order_id: int, catalog: Any = None) -> dict[str, Any]:
    """Order ``order_id`` as ``/orders/{id}`` builds it (small dataset, in process; ``catalog``: the products
    to read, default the lab's shared in-process catalog)."""
    conn, shared, _, _ = _source()
    return _order_detail(conn, shared if catalog is None else catalog, order_id)


def _read(format: str, body: bytes) -> Any:
    """The courier app's decoder for ``format`` — in code, not a table a learner could change in place."""
    if format == "msgpack":
        return msgpack.unpackb(body, raw=False)
    return json.loads(body)


def _reference(order: Mapping[str, Any]) -> bytes:
    # only the fields the courier app reads, encoded by a fast codec that writes bytes directly
    import orjson

    return orjson.dumps(courier_view(order))


EXERCISE = Exercise(
    "Lab 05 — the order endpoint for the courier app",
    hints=("Which costs more for this client: the format, or the 30 product fields it never reads? Look at the "
           "bytes of one order in each form before you write anything.",
           "Build courier_view(order)-shaped data first (a few dict and list comprehensions), then encode that.",
           "Two changes, each measured on its own before the check: send only the courier view's fields, then "
           "pick the fastest encoder of section 4's table for a format the app reads — one that writes bytes "
           "itself, with no str to encode afterwards."),
    solution=_reference,
)
hint = EXERCISE.hint
solution = EXERCISE.solution



_WORDS = ("blue", "quiet", "rapid", "Zürich", "☕", "“kettle”", "mini", "deluxe", "garden", "solar", "😀", "pro")
_STATUSES = ("placed", "paid", "packed", "shipped", "delivered", "cancelled")


def _fresh(catalog: Any, template: int, seed: int, *, unknown: bool = False, one: bool = False) -> dict[str, Any]:
    """Order ``template``'s shape (every field ``/orders/{id}`` has, its products read from ``catalog``) with
    every value the courier app reads drawn from ``seed``: an order that exists nowhere before this call."""
    rng = random.Random(seed)
    order = load_order(template, catalog)
    order["id"] = rng.randrange(10**6, 10**9)
    order["status"] = rng.choice(_STATUSES)
    order["total_cents"] = rng.randrange(100, 10**7)
    if one:
        order["items"] = order["items"][:1]
    for item in order["items"]:
        item["sku"] = f"SKU-{rng.randrange(10**7):07d}"
        item["name"] = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(1, 4)))
        item["quantity"] = rng.randint(1, 9)
        if item["product"] is not None:
            item["product"]["warehouse"] = f"WH-{rng.randint(1, 40)}"
            item["product"]["weight_g"] = rng.randrange(5, 40_000)
    if unknown:
        order["items"][rng.randrange(len(order["items"]))]["product"] = None  # the catalog does not know it
    return order


def _differ(format: str) -> Callable[[bytes, Any], str | None]:
    """Where your bytes differ from what the courier app needs (the baseline's answer, viewed), or None."""
    def differ(want: bytes, got: Any) -> str | None:
        if type(got) is not bytes:
            return f"encode must return bytes (exactly: no subclass or view), got {kind(got)}"
        try:
            mine = _read(format, got)
        except Exception as e:  # not readable as the declared format at all
            return f"the courier app cannot read your bytes as {format}: {type(e).__name__}: {str(e)[:80]}"
        return difference(courier_view(json.loads(want)), mine, "the decoded order")
    return differ


def check(encode: Callable[[dict[str, Any]], bytes], format: str = "json",  # the lab's word
          experiment: Experiment | None = None, *, rounds: int = 10, required_speedup: float = 1.5,
          max_share: float = 0.3, cases: int = 6, save: bool = True, seed: int | None = None) -> CheckResult:
    """Grade an encoder of the order payload for the courier app.

    Args:
        encode: ``encode(order: dict) -> bytes``.
        format: what your bytes are: ``"json"`` or ``"msgpack"`` (the grader decodes them itself).
        experiment: your :class:`labkit.learner.record.Experiment`, planned before you ran the check (required);
            concluded with the measured speed ratio.
        rounds: interleaved A/B rounds for the speed check (a few more are drawn per grading).
        required_speedup: how many times faster than the baseline your encoder must be.
        max_share: your bytes may be at most this share of the baseline's on a new order.
        cases: about this many fresh orders in the correctness pass (drawn per grading), besides the edge cases.
        save: save the concluded experiment record.
        seed: reproduce a grading run (a new seed is drawn each time by default).
    """
    refused, seed, rng = EXERCISE.start(encode, seed)
    if refused is not None:
        return refused
    if format not in FORMATS:
        return EXERCISE.refuse(f"format={format!r}: the courier app reads {' or '.join(map(repr, FORMATS))}")
    differ = _differ(format)
    _, _, big, single = _source()
    catalog = _FakeCatalog.from_db(_ensure("small", quiet=True))  # this grading's own products: nothing shared
    pick = lambda: rng.choice(big)  # noqa: E731
    graded = [(_fresh(catalog, rng.choice(single), rng.randrange(2**31)),),
              (_fresh(catalog, pick(), rng.randrange(2**31), unknown=True),),
              (_fresh(catalog, pick(), rng.randrange(2**31), one=True),),
              *((_fresh(catalog, pick(), rng.randrange(2**31)),) for _ in range(band(rng, cases, 0.35)))]
    rng.shuffle(graded)
    budgeted = (catalog, pick(), rng.randrange(2**31))
    timed_orders = [pick() for _ in range(64)]
    timed_seed = rng.randrange(2**31)

    def show(case: tuple[Any, ...]) -> str:
        return f"order {case[0]['id']} ({len(case[0]['items'])} items)"

    def inputs(k: int) -> tuple[Any, ...]:
        return (_fresh(catalog, timed_orders[k % len(timed_orders)], timed_seed + k),)

    with Caller() as caller:
        def small() -> Item:
            order = _fresh(*budgeted)
            base_bytes = len(baseline(order))
            got = caller.call(encode, (_fresh(*budgeted),))
            what = f"order {order['id']} ({len(order['items'])} items), generated for this call"
            if got.error is not None:
                return failed(f"{what}: your function raised {type(got.error).__name__}", criterion="budget")
            if (where := differ(baseline(order), got.value)) is not None:
                return failed(f"wrong answer on {what} (the call whose bytes are counted)", where, criterion="budget")
            n, limit = len(got.value), max_share * base_bytes
            if n > limit:
                return failed(f"{what}: {n:,} bytes (the baseline: {base_bytes:,})", f"over the budget of "
                              f"{limit:,.0f} by {n - limit:,.0f}", "send only what courier_view() holds",
                              detail=n, criterion="budget")
            return passed(f"{what}: {n:,} bytes (the baseline: {base_bytes:,}), within the budget of {limit:,.0f}, "
                          "the answer checked", detail=n, criterion="budget")

        def fast_then_concluded() -> tuple[Item, ...]:
            item = timed(caller, baseline, encode, inputs=inputs, required_speedup=required_speedup, rounds=rounds,
                         rng=rng, what="fresh orders", differ=differ)
            return item, prediction(experiment, item.detail, save=save)

        result = EXERCISE.grade(lambda: answers(caller, encode, baseline, graded, differ=differ, show=show),
                                lambda: planned(experiment), small, fast_then_concluded, seed=seed)
    return result


_SEALED = seal(globals())
