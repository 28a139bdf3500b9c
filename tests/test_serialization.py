"""Every codec carries the export and order payloads exactly, or refuses — never a silent change.

Property tests (hypothesis) over the payloads' types: unicode text, empty and nested lists, large and negative
integers, money as integer cents, optional (absent or null) fields, dates as ISO strings. Every codec's bytes
decode to the JSON baseline's content (``json.loads(json.dumps(payload))``).
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import json
import math
import pickle
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from labkit.errors import BadInputError
from labkit.toyshop.core import (
    CODECS,
    CODINGS,
    FORMATS,
    PRODUCT_FIELDS,
    SCHEMAS,
    TRIMMED_FIELDS,
    compress,
    decode,
    decompress,
    encode,
    to_builtins,
)
from labkit.toyshop.core.compression import pays_off
from labkit.toyshop.core.schemas import PRODUCT_TYPES

PAIRS = [(codec, fmt) for codec, fmts in CODECS.items() for fmt in fmts]
PROTO_DIR = Path(__file__).resolve().parents[1] / "labkit" / "toyshop" / "core" / "proto"

int64 = st.integers(-(2**63), 2**63 - 1)
cents = st.integers(0, 10**12) | st.integers(-(10**6), 0)  # money as integer cents (refunds are negative)
text = st.text(max_size=12)  # any unicode, including surrogate-free astral characters and NUL
iso = st.datetimes(min_value=dt.datetime(1970, 1, 1), max_value=dt.datetime(2100, 1, 1)).map(
    lambda d: d.replace(microsecond=0).isoformat() + "Z")
finite = st.floats(allow_nan=False, allow_infinity=False)
_VALUE = {int: int64, str: text | iso, float: finite}


@st.composite
def products(draw: st.DrawFn) -> dict | None:
    if draw(st.integers(0, 9)) == 0:
        return None  # the catalog does not know the product
    names = draw(st.sampled_from([PRODUCT_FIELDS, TRIMMED_FIELDS]) | st.lists(
        st.sampled_from(PRODUCT_FIELDS), unique=True, max_size=6).map(tuple))
    return {n: draw(st.none() | _VALUE[PRODUCT_TYPES[n]]) if draw(st.booleans()) else draw(_VALUE[PRODUCT_TYPES[n]])
            for n in names}


items = st.fixed_dictionaries({
    "line_no": st.integers(1, 100), "product_id": int64, "sku": text, "name": text, "quantity": st.integers(0, 10**6),
    "unit_price_cents": cents, "line_total_cents": cents, "product": products()})
order_head = {"id": int64, "created_at": iso, "status": text, "currency": st.sampled_from(["EUR", "USD", "¥"]),
              "shipping_cents": cents, "total_cents": cents, "items": st.lists(items, max_size=4)}
orders = st.fixed_dictionaries(order_head)
exports = st.fixed_dictionaries({
    "customer": st.fixed_dictionaries({"id": int64, "name": text, "email": text, "country": text, "tier": text}),
    "order_count": int64, "item_count": int64, "orders": st.lists(orders, max_size=4)})
order_details = st.fixed_dictionaries({**order_head, "customer_id": int64})


def _baseline(payload):
    return json.loads(json.dumps(payload))


def _round_trip(payload, codec, fmt, schema):
    return to_builtins(decode(encode(payload, codec, format=fmt, schema=schema), codec, format=fmt, schema=schema))


@settings(max_examples=60, deadline=None)
@given(payload=exports)
def test_every_codec_carries_the_export_payload_exactly(payload):
    want = _baseline(payload)
    for codec, fmt in PAIRS:
        assert _round_trip(payload, codec, fmt, "export") == want, (codec, fmt)


@settings(max_examples=60, deadline=None)
@given(payload=order_details)
def test_every_codec_carries_the_order_payload_exactly(payload):
    want = _baseline(payload)
    for codec, fmt in PAIRS:
        assert _round_trip(payload, codec, fmt, "order") == want, (codec, fmt)


@settings(max_examples=40, deadline=None)
@given(payload=exports)
def test_self_describing_codecs_need_no_schema(payload):
    want = _baseline(payload)
    for codec, fmt in PAIRS:
        if fmt != "protobuf":
            assert _round_trip(payload, codec, fmt, None) == want, (codec, fmt)


def _with_rating(value):
    return {"id": 1, "created_at": "2024-01-01T00:00:00Z", "status": "paid", "currency": "EUR", "shipping_cents": 0,
            "total_cents": 0, "customer_id": 3,
            "items": [{"line_no": 1, "product_id": 1, "sku": "S", "name": "N", "quantity": 1, "unit_price_cents": 1,
                       "line_total_cents": 1, "product": {"id": 1, "rating": value}}]}


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("schema", ["order", None])
def test_json_refuses_nan_and_infinity_the_binary_formats_carry_them(value, schema):
    payload = _with_rating(value)
    for codec, fmt in PAIRS:
        if fmt == "protobuf" and schema is None:
            continue
        if fmt == "json":
            with pytest.raises(BadInputError, match="rating"):
                encode(payload, codec, format=fmt, schema=schema)
            continue
        back = to_builtins(decode(encode(payload, codec, format=fmt, schema=schema), codec, format=fmt, schema=schema))
        got = back["items"][0]["product"]["rating"]
        assert (math.isnan(got) if math.isnan(value) else got == value), (codec, fmt)


@pytest.mark.parametrize("big", [2**64, -(2**63) - 1, 2**100])
def test_an_int_beyond_64_bits_is_carried_exactly_or_refused(big):
    payload = {**_with_rating(1.5), "customer_id": big}
    refused = set()
    for codec, fmt in PAIRS:
        try:
            b = encode(payload, codec, format=fmt, schema="order")
        except BadInputError:
            refused.add((codec, fmt))
            continue
        assert to_builtins(decode(b, codec, format=fmt, schema="order")) == payload, (codec, fmt)
    assert {("orjson", "json"), ("msgpack", "msgpack"), ("msgspec", "msgpack"), ("protobuf", "protobuf")} <= refused
    assert ("json", "json") not in refused and ("pickle", "pickle") not in refused


@pytest.mark.parametrize("change, match", [
    (lambda p: p.pop("status"), "missing key"),
    (lambda p: p.update(status=None), "null in"),
    (lambda p: p["items"][0].pop("sku"), r"items\[0\].*missing key"),
    (lambda p: p["items"][0].update(quantity="3"), "cannot carry"),
    (lambda p: p["items"][0].update(quantity=True), "cannot carry"),
    (lambda p: p["items"][0]["product"].update(colour="red"), "colour"),
])
def test_protobuf_refuses_what_it_would_change_silently(change, match):
    payload = _with_rating(4.5)
    change(payload)
    with pytest.raises(BadInputError, match=match):
        encode(payload, "protobuf", schema="order")


def test_typed_decoders_validate_and_name_the_field():
    wrong = json.dumps({**_with_rating(4.5), "customer_id": "seven"}).encode()
    with pytest.raises(BadInputError, match="customer_id"):
        decode(wrong, "msgspec", schema="order")
    assert decode(wrong, "msgspec")["customer_id"] == "seven"  # without a schema nothing is checked


def test_a_null_product_field_and_an_absent_one_stay_different():
    payload = _with_rating(None)
    payload["items"][0]["product"] = {"id": 4, "brand": None, "rating": 2.5}
    for codec, fmt in PAIRS:
        back = _round_trip(payload, codec, fmt, "order")
        assert back["items"][0]["product"] == {"id": 4, "brand": None, "rating": 2.5}, (codec, fmt)


def test_unknown_codec_format_or_schema_name_the_choices():
    with pytest.raises(BadInputError, match="json, orjson, msgspec"):
        encode({}, "yaml")
    with pytest.raises(BadInputError, match="produces json$|produces json;"):
        encode({}, "orjson", format="msgpack")
    with pytest.raises(BadInputError, match="'export', 'order'"):
        encode({}, "msgspec", schema="quote")
    with pytest.raises(BadInputError, match="needs a schema"):
        encode({"a": 1}, "protobuf")
    for codec, fmt in PAIRS:
        with pytest.raises(BadInputError, match="cannot decode"):
            decode(b"\xc1{not valid", codec, format=fmt, schema="order" if fmt == "protobuf" else None)
    assert set(FORMATS) == {"json", "msgpack", "protobuf", "pickle"}


def test_pickle_refuses_a_pickle_that_names_a_function(capsys):
    # a pickle whose loading would call print(...): harmless here, but it could name os.system just as well
    class Sneaky:
        def __reduce__(self):
            return (print, ("this ran while the bytes were being decoded",))

    data = pickle.dumps({"ok": Sneaky()})
    with pytest.raises(BadInputError, match="builtins.print"):
        decode(data, "pickle")
    assert "this ran" not in capsys.readouterr().out
    assert decode(pickle.dumps({"plain": [1, "two", None]}), "pickle") == {"plain": [1, "two", None]}


def test_product_types_match_the_dataset_table():
    from labkit.toyshop import dataset

    conn = sqlite3.connect(":memory:")
    conn.executescript(dataset._SCHEMA)
    sql = {r[1]: r[2] for r in conn.execute("PRAGMA table_info(products)")}
    py = {"INTEGER": int, "TEXT": str, "REAL": float}
    assert {name: py[t] for name, t in sql.items()} == PRODUCT_TYPES
    assert tuple(PRODUCT_TYPES) == PRODUCT_FIELDS


def test_generated_protobuf_code_is_up_to_date_with_the_proto(tmp_path):
    # GIVEN the .proto compiled afresh WHEN its descriptor is compared with the committed module's THEN equal
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{PROTO_DIR}", f"--python_out={tmp_path}",
                    str(PROTO_DIR / "toyshop.proto")], check=True, capture_output=True)
    fresh = (tmp_path / "toyshop_pb2.py").read_text()
    committed = (PROTO_DIR / "toyshop_pb2.py").read_text()

    def descriptor(source: str) -> bytes:
        start = source.index("AddSerializedFile(") + len("AddSerializedFile(")
        return eval(source[start:source.index(")\n", start)])  # the bytes literal protoc wrote

    assert descriptor(fresh) == descriptor(committed), (
        "labkit/toyshop/core/proto/toyshop_pb2.py is older than toyshop.proto: regenerate it with the command "
        "in toyshop.proto's header")
    assert importlib.util.find_spec("labkit.toyshop.core.proto.toyshop_pb2") is not None


def test_schemas_describe_both_payloads():
    assert set(SCHEMAS) == {"export", "order"}
    assert SCHEMAS["order"].keys[-1] == "customer_id"


@settings(max_examples=50, deadline=None)
@given(data=st.binary(max_size=3000) | st.text(max_size=500).map(lambda s: (s * 7).encode()))
def test_compression_round_trips(data):
    for coding in CODINGS:
        assert decompress(compress(data, coding), coding) == data


def test_compression_errors_and_napkin():
    with pytest.raises(BadInputError, match="none, gzip, zstd"):
        compress(b"x", "brotli")
    with pytest.raises(BadInputError, match="cannot decompress"):
        decompress(b"not zstd at all", "zstd")
    # 100 kB saved on a 1 MB/s link is 100 ms; 1 ms of CPU leaves 99 ms saved
    assert pays_off(120_000, 20_000, 1e6, 1e6) == pytest.approx(99e6)
    assert pays_off(120_000, 20_000, 1e6, 1e12) < 0  # loopback-like speed: the CPU is not paid back
