"""The performance core: every variant gives the same answer, codecs round-trip, cache counts are exact."""

from __future__ import annotations

import json
import sqlite3
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import labkit.toyshop.core as core
from labkit.errors import BadInputError
from labkit.toyshop.core import (
    DEFAULTS,
    MEDIA_TYPES,
    PRODUCT_FIELDS,
    QUOTE_KERNELS,
    TRIMMED_FIELDS,
    VARIANTS,
    ConfigCache,
    OrderLines,
    Quote,
    check_variant,
    decode,
    encode,
    encode_products,
    make_order_lines,
    make_products,
    quote,
    resolve_variants,
    select_fields,
)

CODECS = ("json", "orjson", "msgpack")  # self-describing codecs; tests/test_serialization.py covers them all

# ------------------------------------------------------------------------------------------- registry


def test_public_surface_is_exactly_all():
    public = {n for n in dir(core) if not n.startswith("_")} - {"cache", "compression", "statement", "encoding", "lines", "pricing", "proto", "schemas", "variants"}
    assert public == set(core.__all__)


def test_every_switch_lists_its_baseline_first():
    assert dict(VARIANTS) == {
        "layout": ("aos", "soa"),
        "buffers": ("grow", "prealloc", "pooled"),
        "codec": ("json", "orjson", "msgspec", "msgpack", "protobuf"),
        "compress": ("none", "gzip", "zstd"),
        "fields": ("full", "trimmed"),
        "cache": ("none", "local", "redis"),
    }
    assert dict(DEFAULTS) == {"layout": "aos", "buffers": "grow", "codec": "json", "compress": "none",
                              "fields": "full", "cache": "none"}


def test_check_variant_names_switch_value_and_allowed_values():
    assert check_variant("codec", "orjson") == "orjson"
    with pytest.raises(BadInputError) as err:
        check_variant("codec", "yaml")
    assert "'yaml'" in str(err.value) and "'codec'" in str(err.value) and "json, orjson, msgspec, msgpack, protobuf" in str(err.value)
    with pytest.raises(ValueError, match="unknown variant switch 'colour'.*layout"):
        check_variant("colour", "red")


def test_resolve_variants_fills_defaults_and_rejects_unknown_switches():
    assert resolve_variants({"layout": "soa"}) == dict(DEFAULTS, layout="soa")
    assert resolve_variants({"n1": "join", "cache": "local"}, ignore_unknown=True) == dict(DEFAULTS, cache="local")
    with pytest.raises(BadInputError, match="'n1'"):
        resolve_variants({"n1": "join"})
    with pytest.raises(BadInputError, match="'buffers'.*grow, prealloc"):
        resolve_variants({"buffers": "pool"})


# ------------------------------------------------------------------------------------------- pricing

line = st.tuples(
    st.integers(0, 10**6),  # product_id
    st.integers(0, 100_000),  # qty
    st.integers(0, 10_000_000),  # unit_price (cents)
    st.integers(0, 10_000),  # discount_bp
    st.integers(0, 3),  # tax_class
)


def _reference(rows: list[tuple[int, ...]], rates: tuple[int, ...] = core.DEFAULT_TAX_RATES_BP) -> Quote:
    """An independent, obviously-correct pricing: exact fractions, round half up."""
    from fractions import Fraction

    def half_up(x: Fraction) -> int:
        return int(x + Fraction(1, 2)) if x >= 0 else -int(-x + Fraction(1, 2))

    per: dict[int, list[int]] = {}
    totals = [0] * 5
    for _pid, qty, price, disc, k in rows:
        gross = qty * price
        discount = half_up(Fraction(gross * disc, 10_000))
        net = gross - discount
        tax = half_up(Fraction(net * rates[k], 10_000))
        for i, v in enumerate((qty, gross, discount, net, tax)):
            totals[i] += v
        acc = per.setdefault(k, [0, 0, 0, 0])
        for i, v in enumerate((1, qty, net, tax)):
            acc[i] += v
    by = tuple(core.TaxClassTotal(k, rates[k], *per[k]) for k in sorted(per))
    q, g, d, n, t = totals
    return Quote(len(rows), q, g, d, n, t, n + t, by)


@settings(max_examples=150, deadline=None)
@given(st.lists(line, max_size=60))
def test_all_pricing_variants_agree_exactly_with_the_reference(rows):
    expected = _reference(rows)
    for make in (OrderLines.from_rows, lambda r: OrderLines.from_rows([dict(zip(core.LINE_FIELDS, t, strict=True)) for t in r])):
        lines = make(rows)
        for (layout, buffers), kernel in QUOTE_KERNELS.items():
            assert kernel(lines) == expected, (layout, buffers)
            assert quote(lines, layout=layout, buffers=buffers) == expected


def test_a_hand_priced_quote():
    # GIVEN 2 × 10.00 at 10 % off, 20 % tax; 1 × 12.34, no discount, 5.5 % tax (67.87 cents -> 68)
    lines = OrderLines.from_rows([(7, 2, 1000, 1000, 3), (8, 1, 1234, 0, 1)])
    q = quote(lines, layout="soa", buffers="prealloc")
    assert (q.lines, q.quantity, q.gross, q.discount, q.net, q.tax, q.total) == (2, 3, 3234, 200, 3034, 428, 3462)
    assert q.by_tax_class == (core.TaxClassTotal(1, 550, 1, 1, 1234, 68), core.TaxClassTotal(3, 2000, 1, 2, 1800, 360))
    assert json.loads(json.dumps(q.to_dict()))["by_tax_class"][0]["tax"] == 68


def test_empty_order_prices_to_zero():
    for kernel in QUOTE_KERNELS.values():
        assert kernel(OrderLines.from_rows([])) == Quote(0, 0, 0, 0, 0, 0, 0, ())


def test_big_synthetic_quote_agrees_and_buffers_shrink_back_safely():
    big, small = make_order_lines(20_000, seed=3), make_order_lines(37, seed=4)
    for lines in (big, small, big):  # prealloc buffers grow for `big`, then serve `small` from their prefix
        results = {k: f(lines) for k, f in QUOTE_KERNELS.items()}
        assert len(set(results.values())) == 1
    assert results[("aos", "grow")].lines == 20_000


def test_columns_rows_and_custom_tax_rates_give_the_same_quote():
    lines = make_order_lines(300, seed=1, tax_rates_bp=(0, 700))
    c = lines.columns
    again = OrderLines.from_columns(*(a.tolist() for a in c), tax_rates_bp=(0, 700))
    assert quote(again, layout="soa") == quote(OrderLines.from_rows(lines.rows, tax_rates_bp=(0, 700)))
    assert again.rows == lines.rows and len(again) == 300


def test_prealloc_buffers_are_per_thread():
    lines = [make_order_lines(n, seed=n) for n in (500, 5000)]
    expected = [quote(x) for x in lines]
    errors = []

    def work(i: int) -> None:
        for _ in range(20):
            for kernel in (core.quote_soa_prealloc, core.quote_aos_prealloc):
                if kernel(lines[i % 2]) != expected[i % 2]:
                    errors.append(i)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    core.release_buffers()


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([(1, -1, 100, 0, 0)], "'qty' out of range"),
        ([(1, 1, 10**8, 0, 0)], "'unit_price' out of range"),
        ([(1, 1, 100, 10_001, 0)], "'discount_bp'"),
        ([(1, 1, 100, 0, 4)], "'tax_class' out of range.*tax_rates_bp"),
        ([(1, 1, 9.99, 0, 0)], "must hold integers"),
        ([(1, 1, "9", 0, 0)], "must hold integers"),
        ([(1, 1, 100, 0)], "5 fields"),
        ([(1, 1, 100, 0, 0), (1, 2)], "5 fields"),
        ([{"product_id": 1, "qty": 1}], "lacks field"),
        ([(1, 1, 2**70, 0, 0)], "out of range"),
    ],
)
def test_bad_order_lines_are_rejected_with_the_field_named(rows, message):
    for layout in VARIANTS["layout"]:  # each view validates as it is built, with the same message
        with pytest.raises(BadInputError, match=message):
            quote(OrderLines.from_rows(rows), layout=layout)


anything = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=3)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(anything | st.integers(0, 9), min_size=4, max_size=6).map(tuple), max_size=5))
def test_any_rows_either_price_identically_or_fail_with_bad_input_in_both_layouts(rows):
    outcomes = []
    for layout in VARIANTS["layout"]:
        try:
            outcomes.append(quote(OrderLines.from_rows(rows), layout=layout))
        except BadInputError:
            outcomes.append("bad input")
    assert outcomes[0] == outcomes[1]


def test_bad_columns_tax_rates_and_variants_are_rejected():
    with pytest.raises(BadInputError, match="equal length"):
        OrderLines.from_columns([1], [1, 2], [1], [0], [0])
    with pytest.raises(BadInputError, match="tax_rates_bp"):
        OrderLines.from_rows([], tax_rates_bp=(0, 20_000))
    with pytest.raises(BadInputError, match="'qty' out of range"):
        OrderLines.from_columns([1], [-1], [1], [0], [0])
    with pytest.raises(BadInputError, match="'layout'.*aos, soa"):
        quote(make_order_lines(3), layout="columnar")
    with pytest.raises(BadInputError, match="number of order lines"):
        make_order_lines(-1)


def test_order_lines_are_copied_and_read_only():
    qty = np.array([1, 2, 3])
    lines = OrderLines.from_columns([1, 2, 3], qty, [5, 5, 5], [0, 0, 0], [0, 0, 0])
    qty[0] = 99
    assert lines.columns.qty.tolist() == [1, 2, 3]
    with pytest.raises(ValueError):
        lines.columns.qty[0] = 7


# ------------------------------------------------------------------------------------------- encoding

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda kids: st.lists(kids, max_size=5) | st.dictionaries(st.text(max_size=8), kids, max_size=5),
    max_leaves=20,
)  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(json_values)
def test_every_codec_round_trips_json_ready_values_to_the_same_content(value):
    decoded = [decode(encode(value, c), c) for c in CODECS]
    assert decoded[0] == decoded[1] == decoded[2] == json.loads(json.dumps(value))


@pytest.mark.parametrize("fields", ["full", "trimmed"])
def test_product_listings_decode_identically_across_codecs(fields):
    products = make_products(40, seed=2)
    decoded = [decode(encode_products(products, codec=c, fields=fields), c) for c in CODECS]
    assert decoded[0] == decoded[1] == decoded[2]
    items = decoded[0]["items"]
    assert len(items) == 40 and list(items[0]) == list(PRODUCT_FIELDS if fields == "full" else TRIMMED_FIELDS)
    assert items[3] == select_fields(products[3], fields)


def test_field_sets_match_the_dataset_products_table():
    from labkit.toyshop import dataset

    conn = sqlite3.connect(":memory:")
    conn.executescript(dataset._SCHEMA)
    columns = tuple(r[1] for r in conn.execute("PRAGMA table_info(products)"))
    assert columns == PRODUCT_FIELDS and len(PRODUCT_FIELDS) == 32
    assert len(TRIMMED_FIELDS) == 8 and set(TRIMMED_FIELDS) <= set(PRODUCT_FIELDS)
    assert {c: MEDIA_TYPES[c] for c in CODECS} == {"json": "application/json", "orjson": "application/json",
                                                   "msgpack": "application/msgpack"}


def test_encoding_errors_name_the_codec():
    with pytest.raises(BadInputError, match="codec 'yaml'.*json, orjson, msgspec, msgpack"):
        encode({}, "yaml")
    for codec in CODECS:
        with pytest.raises(BadInputError, match=f"codec '{codec}' cannot encode"):
            encode({"when": object()}, codec)
        with pytest.raises(BadInputError, match=f"as {codec}"):
            decode(b"\xc1{not valid", codec)
    with pytest.raises(BadInputError, match="lacks field 'sku'"):
        select_fields({"id": 1}, "trimmed")


# ------------------------------------------------------------------------------------------- cache


def _counting_loader(values: dict[str, str]):
    calls: list[str] = []

    def load(key: str) -> str | None:
        calls.append(key)
        return values.get(key)

    return load, calls


def test_no_cache_loads_every_time():
    load, calls = _counting_loader({"a": "1"})
    cache = ConfigCache(load)
    assert [cache.get(k) for k in "aab"] == ["1", "1", None]
    assert calls == ["a", "a", "b"] and (cache.hits, cache.misses) == (0, 3)


def test_local_cache_counts_hits_and_misses_exactly_on_an_80_20_pattern():
    from labkit.toyshop.dataset import skewed_config_keys

    keys = skewed_config_keys(5_000, "small")
    load, calls = _counting_loader({})
    cache = ConfigCache(load, mode="local")
    for k in keys:
        cache.get(k)
    distinct = len(set(keys))
    s = cache.stats()
    assert (s.hits, s.misses, s.size) == (5_000 - distinct, distinct, distinct) and len(calls) == distinct
    assert s.hit_ratio == pytest.approx((5_000 - distinct) / 5_000)


def test_preload_and_copy_on_write_refresh():
    load, calls = _counting_loader({"a": "new-a", "b": "new-b"})
    cache = ConfigCache(load, mode="local", preload={"a": "old-a"})
    assert cache.get("a") == "old-a" and calls == []
    old = cache._snapshot
    cache.refresh()  # reload every cached key into a new dict, swapped in whole
    assert cache.get("a") == "new-a" and old == {"a": "old-a"} and cache._snapshot is not old
    cache.refresh({"z": "26"})
    assert cache.get("z") == "26" and cache.get("a") == "new-a"
    assert cache.stats()[:3] == (3, 1, 2)
    cache.reset_stats()
    assert cache.stats()[:3] == (0, 0, 0)


def test_lookup_never_loads_and_counts_only_hits():
    load, calls = _counting_loader({"a": "1"})
    cache = ConfigCache(load, mode="local")
    assert cache.lookup("a") == (False, None) and calls == []
    assert cache.get("a") == "1" and cache.lookup("a") == (True, "1")
    assert (cache.hits, cache.misses) == (1, 1)
    assert ConfigCache(load).lookup("a") == (False, None)


def test_counters_are_exact_under_threads():
    cache = ConfigCache(lambda key: key, mode="local", preload={str(i): str(i) for i in range(50)})

    def read() -> None:
        for i in range(20_000):
            cache.get(str(i % 100))

    threads = [threading.Thread(target=read) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert cache.hits + cache.misses == 80_000 and 50 <= cache.misses <= 200


def test_bad_cache_mode():
    with pytest.raises(BadInputError, match="'cache'.*none, local"):
        ConfigCache(str, mode="memcached")
    with pytest.raises(BadInputError, match="product details only"):  # a value of the switch, not of this cache
        ConfigCache(str, mode="redis")

