"""Response encoding: formats, the codecs that produce them, field sets — the same decoded content for all.

A *format* is what goes on the wire, named by its media type (:data:`FORMATS`); a *codec* is the code that
produces it (:data:`CODECS`). ``json``, ``orjson`` and ``msgspec`` all produce JSON:

    codec     formats          how
    json      json             the standard library (baseline): builds a str, escapes, then UTF-8 bytes
    orjson    json             Rust, writes UTF-8 bytes directly
    msgspec   json, msgpack    C; one Encoder built once; decodes into the schema's Struct types when given
                               ``schema=`` (the "compiled schema": one typed Decoder per schema, reused)
    msgpack   msgpack          the msgpack library: binary, self-describing
    protobuf  protobuf         schema-bound: only payloads with a schema (export, order; :mod:`.schemas`)
    pickle    pickle           the core and the lab only — never served: loading pickle runs code

    encode(payload, codec="json", *, format=None, schema=None) -> bytes
    decode(data, codec="json", *, format=None, schema=None) -> dicts/lists, or the schema's typed objects
    to_builtins(decoded) -> the JSON baseline's content (typed objects converted; anything else as is)

Correctness before speed: ``to_builtins(decode(encode(x, c, ...), c, ...))`` equals the JSON baseline's
``json.loads(json.dumps(x))`` for every codec (tuples come back as lists), or encoding raises
:class:`labkit.errors.BadInputError` — never a silent change (tested with hypothesis in
tests/test_serialization.py):

* integers beyond 64 bits: ``orjson``, ``msgpack``, ``protobuf`` and msgspec's MessagePack refuse them;
  ``json``, msgspec's JSON and pickle carry them exactly. (Beware across codecs: ``orjson.loads`` reads such
  a number as a float.)
* NaN and ±infinity: JSON has no such numbers. ``json`` refuses them (``allow_nan=False``); ``orjson`` and
  msgspec would write ``null``, so their encode checks first — through the schema's float fields when
  ``schema=`` is given (one look per item), else by walking the payload (costly: pass the schema).
  MessagePack, protobuf and pickle carry them.
* protobuf cannot say "absent" or "null" for most fields: :func:`labkit.toyshop.core.schemas.to_message`
  refuses a missing key or a null where the schema allows none.

``fields="full"`` (baseline): every product field (the 32 columns of the dataset's ``products`` table,
:data:`PRODUCT_FIELDS`); ``fields="trimmed"``: the 8 a client of the export actually uses
(:data:`TRIMMED_FIELDS`). Speeds and sizes: ``tests/benchmarks/bench_serialization.py`` prints them.
"""

from __future__ import annotations

import io
import json
import math
import pickle
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import msgpack
import msgspec
import orjson

from labkit.errors import BadInputError
from labkit.toyshop.core.schemas import LISTING, Schema, check_schema, to_builtins, to_message
from labkit.toyshop.core.variants import check_variant

__all__ = [
    "PRODUCT_FIELDS",
    "TRIMMED_FIELDS",
    "FIELD_SETS",
    "FORMATS",
    "CODECS",
    "MEDIA_TYPES",
    "encode",
    "decode",
    "to_builtins",
    "codec_label",
    "select_fields",
    "encode_products",
    "make_products",
]

#: The 32 columns of the dataset's ``products`` table, in table order (``fields="full"``).
PRODUCT_FIELDS: tuple[str, ...] = (
    "id", "sku", "name", "brand", "category", "subcategory", "description", "price_cents", "currency",
    "weight_g", "width_mm", "height_mm", "depth_mm", "color", "material", "size_label", "stock", "warehouse",
    "rating", "review_count", "created_at", "updated_at", "tags", "barcode", "origin_country", "supplier",
    "tax_class", "discount_pct", "is_active", "image_url", "thumbnail_url", "warranty_months",
)  # fmt: skip
#: The 8 fields a client of the export/order endpoints uses (``fields="trimmed"``).
TRIMMED_FIELDS: tuple[str, ...] = ("id", "sku", "name", "brand", "category", "price_cents", "currency", "stock")
#: field-set switch value -> field names.
FIELD_SETS: dict[str, tuple[str, ...]] = {"full": PRODUCT_FIELDS, "trimmed": TRIMMED_FIELDS}
#: format -> its media type (the response's Content-Type).
FORMATS: dict[str, str] = {
    "json": "application/json",
    "msgpack": "application/msgpack",
    "protobuf": "application/x-protobuf",
    "pickle": "application/x-python-pickle",
}
#: codec -> the formats it produces, its default first.
CODECS: dict[str, tuple[str, ...]] = {
    "json": ("json",),
    "orjson": ("json",),
    "msgspec": ("json", "msgpack"),
    "msgpack": ("msgpack",),
    "protobuf": ("protobuf",),
    "pickle": ("pickle",),
}
#: codec -> the Content-Type of its default format.
MEDIA_TYPES: dict[str, str] = {codec: FORMATS[formats[0]] for codec, formats in CODECS.items()}


def codec_label(codec: str, format: str | None = None) -> str:  # the word the lab uses
    """A short name for a codec producing a format: ``"orjson"``, ``"msgspec (msgpack)"``."""
    formats = CODECS.get(codec, (format,))
    return codec if len(formats) == 1 else f"{codec} ({format or formats[0]})"


def _first_nonfinite(x: Any) -> str | None:
    """Path of the first NaN/infinity in a JSON-ready value, or None: a walk of every value (costly on big
    payloads; the path is built only when one is found)."""
    t = type(x)
    if t is float:
        return None if math.isfinite(x) else f" = {x!r}"
    if t is dict or t is list or t is tuple:
        for k, v in (x.items() if t is dict else enumerate(x)):
            tv = type(v)
            if (tv is float or tv is dict or tv is list or tv is tuple) and (found := _first_nonfinite(v)):
                return (f".{k}" if t is dict else f"[{k}]") + found
    return None


def _refuse_nonfinite(payload: Any, schema: Schema | None, codec: str) -> None:
    where = schema.first_nonfinite(payload) if schema is not None else _first_nonfinite(payload)
    where = where if where is None or schema is not None else "$" + where
    if where is not None:
        raise BadInputError(f"codec {codec!r} cannot encode {where} as JSON: JSON has no NaN or infinity "
                            "(orjson and msgspec would write null, a silent change; json.dumps would write NaN, "
                            "which is not JSON); send a finite number, or None")


class _NoGlobals(pickle.Unpickler):
    """Loads plain data only: a pickle naming any class or function is refused (it could run code)."""

    def find_class(self, module: str, name: str) -> Any:
        raise BadInputError(
            f"refused to load {module}.{name} from pickle bytes: loading a pickle calls whatever it names, "
            "so pickle must never read bytes from anyone you do not trust (labkit loads plain data only)")


_MSGSPEC_JSON = msgspec.json.Encoder()
_MSGSPEC_MSGPACK = msgspec.msgpack.Encoder()
_TYPED: dict[tuple[str, str], Any] = {}  # (format, schema) -> msgspec Decoder for the schema's Struct, built once


def _typed_decoder(format: str, schema: Schema) -> Any:
    dec = _TYPED.get((format, schema.name))
    if dec is None:
        module = msgspec.json if format == "json" else msgspec.msgpack
        dec = _TYPED[format, schema.name] = module.Decoder(schema.struct)
    return dec


def _encoder(codec: str, format: str, schema: Schema | None) -> Callable[[Any], bytes]:
    if codec == "json":
        def stdlib(p: Any) -> bytes:
            try:
                return json.dumps(p, allow_nan=False).encode()
            except ValueError:
                _refuse_nonfinite(p, schema, codec)  # names the value, if that was the reason
                raise
        return stdlib
    if codec == "orjson" or (codec == "msgspec" and format == "json"):
        enc = orjson.dumps if codec == "orjson" else _MSGSPEC_JSON.encode

        def checked(p: Any) -> bytes:
            _refuse_nonfinite(p, schema, codec)
            return enc(p)
        return checked
    if codec == "msgspec":
        return _MSGSPEC_MSGPACK.encode
    if codec == "msgpack":
        return msgpack.packb
    if codec == "protobuf":
        if schema is None:
            raise BadInputError("protobuf needs a schema: pass schema='export' or schema='order' (no other "
                                "payload has one); use a self-describing format (json, msgpack) for the rest")
        return lambda p: to_message(p, schema).SerializeToString()
    return lambda p: pickle.dumps(p, protocol=5)


def _decoder(codec: str, format: str, schema: Schema | None) -> Callable[[bytes], Any]:
    if codec == "json":
        return json.loads
    if codec == "orjson":
        return orjson.loads
    if codec == "msgspec":
        if schema is not None:
            return _typed_decoder(format, schema).decode
        return msgspec.json.decode if format == "json" else msgspec.msgpack.decode
    if codec == "msgpack":
        return lambda b: msgpack.unpackb(b, raw=False)
    if codec == "protobuf":
        if schema is None:
            raise BadInputError("protobuf bytes can be read only with their schema: pass schema='export' or "
                                "schema='order'")
        return schema.message.FromString
    return lambda b: _NoGlobals(io.BytesIO(b)).load()


def _resolve(codec: str, format: str | None, schema: str | Schema | None) -> tuple[str, Schema | None]:
    formats = CODECS.get(codec)
    if formats is None:
        raise BadInputError(f"unknown codec {codec!r}: use one of {', '.join(CODECS)}")
    if format is None:
        format = formats[0]
    elif format not in formats:
        raise BadInputError(f"codec {codec!r} cannot produce format {format!r}: it produces "
                            f"{', '.join(formats)}; formats are {', '.join(FORMATS)}")
    return format, check_schema(schema)


def encode(payload: Any, codec: str = "json", *, format: str | None = None,
           schema: str | Schema | None = None) -> bytes:
    """Encode a JSON-ready ``payload`` with ``codec`` into ``format`` (default: the codec's first).

    Args:
        payload: dicts (str keys), lists/tuples, str, int, float, bool, None.
        codec: an implementation, a key of :data:`CODECS`.
        format: a key of :data:`FORMATS` that the codec produces.
        schema: ``"export"`` or ``"order"`` when the payload has that schema: required by protobuf; lets the
            JSON encoders check floats cheaply.

    Raises :class:`labkit.errors.BadInputError` for an unknown codec or format, or a value the format cannot
    carry (naming it).
    """
    fmt, sch = _resolve(codec, format, schema)
    try:
        return _encoder(codec, fmt, sch)(payload)
    except BadInputError:
        raise
    except (TypeError, ValueError, OverflowError, pickle.PicklingError) as exc:
        raise BadInputError(
            f"codec {codec!r} cannot encode the payload as {fmt}: {exc}; make it JSON-ready (str keys, 64-bit "
            "ints, finite floats, lists, dicts, str, bool, None)") from exc


def decode(data: bytes, codec: str = "json", *, format: str | None = None,
           schema: str | Schema | None = None) -> Any:
    """Decode bytes made by :func:`encode` with the same ``codec`` and ``format``.

    With a ``schema``, msgspec decodes into its typed Structs (validating every field) and protobuf into its
    message: :func:`to_builtins` turns either into the JSON baseline's content. Raises
    :class:`labkit.errors.BadInputError` for bytes that are not valid for the codec (or the schema).
    """
    fmt, sch = _resolve(codec, format, schema)
    try:
        return _decoder(codec, fmt, sch)(data)
    except BadInputError:
        raise
    except Exception as exc:  # every library has its own error types; all mean "not valid for this codec"
        raise BadInputError(f"cannot decode {len(data)} bytes as {codec_label(codec, fmt)}"
                            f"{f' with the {sch.name!r} schema' if sch else ''}: {exc}; was it encoded so?") from exc


def _field_names(fields: str | Sequence[str]) -> tuple[str, ...]:
    if isinstance(fields, str):
        return FIELD_SETS[check_variant("fields", fields)]
    return tuple(fields)


def select_fields(product: Mapping[str, Any], fields: str | Sequence[str] = "full") -> dict[str, Any]:
    """A new dict holding ``fields`` of ``product`` (a field-set name or explicit names), in that order.

    Raises :class:`labkit.errors.BadInputError` naming a field the product lacks.
    """
    names = _field_names(fields)
    try:
        return {k: product[k] for k in names}
    except (KeyError, IndexError) as exc:
        raise BadInputError(f"product lacks field {exc}; it has {', '.join(map(str, product.keys()))}") from None


def encode_products(
    products: Iterable[Mapping[str, Any]], *, codec: str = "json", fields: str | Sequence[str] = "full"
) -> bytes:
    """The serialize stage of a product listing: ``{"items": [...]}`` with ``fields`` of each, encoded.

    All variants share this signature; ``fields="full"`` still copies each row into a plain dict (as a
    service does when it turns database rows into a response), so only the field count differs.
    """
    names = _field_names(fields)
    try:
        items = [{k: p[k] for k in names} for p in products]
    except (KeyError, IndexError) as exc:
        raise BadInputError(f"a product lacks field {exc}; expected {', '.join(names)}") from None
    return encode({"items": items}, codec, schema=LISTING)


_WORDS = "red blue green steel oak linen wool cotton compact deluxe classic modern travel kids pro mini".split()
_NOUNS = "kettle lamp chair mug backpack jacket clock speaker kite puzzle robot train drum scarf".split()


def make_products(n: int, *, seed: int = 0) -> list[dict[str, Any]]:
    """``n`` deterministic product dicts with all :data:`PRODUCT_FIELDS`, shaped like the dataset's rows
    (texts, ints, a float rating, ISO timestamps, a non-ASCII brand now and then) — for labs and benchmarks
    that must not need the database."""
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= 1_000_000:
        raise BadInputError(f"n={n!r}: the number of products must be an integer 0–1000000")
    rng = random.Random(seed)
    out = []
    for pid in range(1, n + 1):
        w1, w2, noun = rng.choice(_WORDS), rng.choice(_WORDS), rng.choice(_NOUNS)
        desc = " ".join(rng.choice(_WORDS) for _ in range(rng.randrange(8, 30)))
        values = (
            pid, f"SKU-{pid:07d}", f"{w1.title()} {w2} {noun}", rng.choice(("AcmeCo", "Zürich AG", "Brio")),
            noun, f"{noun}-{w2}", f"A {desc} {noun}.", rng.randrange(199, 49_999), "EUR",
            rng.randrange(50, 9_000), rng.randrange(10, 900), rng.randrange(10, 900), rng.randrange(10, 900),
            w1, w2, rng.choice(("XS", "S", "M", "L", "XL", "one")), rng.randrange(0, 500),
            f"WH-{rng.randrange(1, 9)}", round(rng.uniform(1, 5), 1), rng.randrange(0, 5_000),
            "2024-03-01T10:00:00Z", "2024-06-11T08:30:00Z", ",".join(rng.sample(_WORDS, 3)),
            str(rng.randrange(10**12, 10**13)), rng.choice(("DE", "FR", "JP", "US")),
            f"Supplier {rng.randrange(1, 80)}", rng.choice(("standard", "reduced", "zero")),
            rng.choice((0, 0, 0, 5, 10, 20)), int(rng.random() > 0.05),
            f"https://img.toyshop.invalid/p/{pid}.jpg", f"https://img.toyshop.invalid/t/{pid}.jpg",
            rng.choice((0, 12, 24, 36)),
        )  # fmt: skip
        out.append(dict(zip(PRODUCT_FIELDS, values, strict=True)))
    return out
