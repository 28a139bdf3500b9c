"""Lab 05's exercise: encode the order endpoint for the courier app — only what it reads, fewer bytes, faster.

``GET /orders/{id}`` answers every field of every product (the baseline: stdlib json of the whole order).
The *courier app* shows a delivery summary and reads only :func:`courier_view` of it: the order's id, status,
currency and total; per item its sku, name and quantity; per product its warehouse and weight (``product``
stays ``None`` when the catalog does not know it). The learner writes ``encode(order) -> bytes`` in a format
the app can read — ``"json"`` or ``"msgpack"`` — and :func:`check` grades, in order:

1. **correctness** — the grader decodes the learner's bytes itself (``json.loads`` or ``msgpack.unpackb``:
   the learner supplies no decoder, so nothing can be looked up on the way back) and compares them with the
   courier view of the baseline's answer, on orders drawn fresh for this grading run, plus edge cases (an
   order of one item, a product the catalog does not know, non-ASCII text);
2. **bytes** — on an order the correctness pass never saw, at most ``max_share`` of the baseline's bytes, and
   more than none (no work is not a fix);
3. **speed** — ``labkit.compare`` against the baseline on fresh orders (a new order for every timed call):
   ``faster`` by at least ``required_speedup``;
4. **the prediction** — a learner's experiment record is concluded with the measured ratio (and saved).

The orders come from the small dataset through an in-process :class:`labkit.toyshop.catalog.FakeCatalog`,
so the check needs no service.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

import msgpack

from labkit.check import (
    CheckResult,
    Exercise,
    Item,
    budget,
    concluded,
    fresh_seed,
    not_callable,
    same_answers,
    speed,
)
from labkit.record import Experiment

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
    from labkit.toyshop.catalog import FakeCatalog
    from labkit.toyshop.dataset import ensure
    from labkit.toyshop.db import connect

    path = ensure("small", quiet=True)
    conn = connect(path)
    counts = conn.execute("SELECT order_id, COUNT(*) FROM order_items GROUP BY order_id ORDER BY order_id").fetchall()
    big = tuple(o for o, n in counts if n >= 4)  # orders of 4+ items: a timed call lasts well over 10 µs
    single = tuple(o for o, n in counts if n == 1)
    return conn, FakeCatalog.from_db(path), big, single


def load_order(order_id: int) -> dict[str, Any]:
    """Order ``order_id`` as ``/orders/{id}`` builds it (small dataset, in process)."""
    from labkit.toyshop.export import order_detail

    conn, catalog, _, _ = _source()
    return order_detail(conn, catalog, order_id)


def _reference(order: Mapping[str, Any]) -> bytes:
    # only the fields the courier app reads, encoded by a fast codec that writes bytes directly
    import orjson

    return orjson.dumps(courier_view(order))


EXERCISE = Exercise(
    "Lab 05 — the order endpoint for the courier app",
    hints=("Which costs more for this client: the format, or the 30 product fields it never reads? Look at the "
           "bytes of one order in each form before you write anything.",
           "Build courier_view(order)-shaped data first (a few dict and list comprehensions), then encode that.",
           "return orjson.dumps(courier_view(order)) with FORMAT = 'json' — or msgspec/msgpack with 'msgpack'."),
    solution=_reference,
)
hint = EXERCISE.hint
solution = EXERCISE.solution


def _edge_cases(rng: random.Random) -> list[dict[str, Any]]:
    _, _, big, single = _source()
    one = load_order(rng.choice(single))
    unknown = load_order(rng.choice(big))
    unknown["items"][0]["product"] = None  # the catalog does not know this product
    text = load_order(rng.choice(big))
    text["items"][0]["name"] = "Zürich ☕ “kettle” 😀"
    return [one, unknown, text]


def check(encode: Callable[[dict[str, Any]], bytes], format: str = "json",  # the lab's word
          experiment: Experiment | None = None, *, rounds: int = 10, required_speedup: float = 2.0,
          max_share: float = 0.3, cases: int = 6, save: bool = True, seed: int | None = None) -> CheckResult:
    """Grade an encoder of the order payload for the courier app.

    Args:
        encode: ``encode(order: dict) -> bytes``.
        format: what your bytes are: ``"json"`` or ``"msgpack"`` (the grader decodes them itself).
        experiment: your :class:`labkit.record.Experiment`, planned before you ran the check; concluded with
            the measured speed ratio.
        rounds: interleaved A/B rounds for the speed check.
        required_speedup: how many times faster than the baseline your encoder must be.
        max_share: your bytes may be at most this share of the baseline's on an unseen order.
        cases: fresh orders in the correctness pass (besides the edge cases).
        save: save the concluded experiment record.
        seed: reproduce a grading run (a new seed is drawn each time by default).
    """
    refused = not_callable(EXERCISE, encode)
    if refused is not None:
        return refused
    if format not in FORMATS:
        return EXERCISE.refuse(f"format={format!r}: the courier app reads {' or '.join(map(repr, FORMATS))}")
    seed = fresh_seed() if seed is None else seed
    rng = random.Random(seed)
    read = FORMATS[format]
    _, _, big, _ = _source()

    def same(want: bytes, got: Any) -> bool:
        if not isinstance(got, bytes | bytearray | memoryview):
            raise TypeError(f"encode must return bytes, got {type(got).__name__}")
        return read(bytes(got)) == courier_view(json.loads(want))

    def describe(want: bytes, got: Any) -> str:
        try:
            mine = read(bytes(got))
        except Exception as e:  # not readable as the declared format at all
            return f"the courier app cannot read your bytes as {format}: {type(e).__name__}: {str(e)[:80]}"
        need = courier_view(json.loads(want))
        if not isinstance(mine, dict):
            return f"expected an object, got {type(mine).__name__}"
        if set(mine) != set(need):
            return f"order keys {sorted(mine)}, the app reads exactly {sorted(need)}"
        for n, (a, b) in enumerate(zip(need["items"], mine.get("items") or [], strict=False)):
            if a != b:
                return f"item {n}: expected {json.dumps(a)[:120]}, got {str(b)[:120]}"
        return f"expected {json.dumps(need)[:100]}…"

    drawn = rng.sample(big, cases + 20 + 4 * rounds + 8)  # distinct orders: graded, budgeted, timed
    graded = [(o,) for o in _edge_cases(rng) + [load_order(i) for i in drawn[:cases]]]
    unseen = max((load_order(i) for i in drawn[cases:cases + 20]), key=lambda o: len(o["items"]))
    base_bytes = len(baseline(unseen))

    def correct() -> Item:
        return same_answers(encode, baseline, graded, same=same, describe=describe,
                            show=lambda c: f"order {c[0]['id']} ({len(c[0]['items'])} items)")

    def small() -> Item:
        return budget(encode, (unseen,), meter=lambda fn, o: len(fn(o)), limit=max_share * base_bytes,
                      unit="bytes", what=f"order {unseen['id']} ({len(unseen['items'])} items), never graded before",
                      baseline_amount=base_bytes, hint="send only what courier_view() holds")

    def fast_then_concluded() -> tuple[Item, ...]:
        ids = drawn[cases + 20:]
        item = speed(baseline, encode, inputs=lambda k: (load_order(ids[k % len(ids)]),),
                     required_speedup=required_speedup, rounds=rounds, what="fresh orders")
        return item, *concluded(experiment, item.detail, save=save)

    if experiment is not None and (not isinstance(experiment, Experiment) or experiment.predicted_ratio is None):
        return EXERCISE.refuse("experiment= takes the Experiment.plan(...) you wrote, with a predicted_ratio")
    result = EXERCISE.grade(correct, small, fast_then_concluded)
    return CheckResult(f"{result.title} (seed {seed})", result.items)

