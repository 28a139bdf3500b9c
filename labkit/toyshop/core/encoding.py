"""Response encoding: three codecs and two field sets, giving the same decoded content.

* ``codec="json"`` (baseline): the standard library, ``json.dumps(payload).encode()`` — a pure
  C-accelerated encoder that still builds an intermediate ``str`` (and escapes every non-ASCII character)
  before the UTF-8 bytes exist.
* ``codec="orjson"``: a Rust encoder writing UTF-8 bytes directly, with no intermediate ``str``.
* ``codec="msgpack"``: a binary format (the seed's "JSON → binary"): no text escaping, a smaller payload.
  Whether "binary" is what makes an encoder fast is for the measurement to say. Clients need a msgpack
  decoder.
* ``fields="full"`` (baseline): every product field (the 32 columns of the dataset's ``products`` table,
  :data:`PRODUCT_FIELDS`). ``fields="trimmed"``: the 8 a client actually uses (:data:`TRIMMED_FIELDS`).
  Fewer fields means fewer keys and values to walk, escape and write, and a smaller response.

``tests/benchmarks/bench_core.py`` prints each codec and field set side by side: time, bytes and
allocations per call.

Payloads must be JSON-ready: ``dict`` (with ``str`` keys), ``list``/``tuple``, ``str``, ``int`` (64-bit),
finite ``float``, ``bool``, ``None``. Then ``decode(encode(x, c), c)`` is the same for every codec
(tuples come back as lists). NaN/infinity are not JSON: json would write ``NaN``, orjson ``null``.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import msgpack
import orjson

from labkit.errors import BadInputError
from labkit.toyshop.core.variants import check_variant

__all__ = [
    "PRODUCT_FIELDS",
    "TRIMMED_FIELDS",
    "FIELD_SETS",
    "MEDIA_TYPES",
    "encode",
    "decode",
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
#: codec -> the Content-Type of its responses.
MEDIA_TYPES: dict[str, str] = {
    "json": "application/json",
    "orjson": "application/json",
    "msgpack": "application/msgpack",
}


def _json_dumps(payload: Any) -> bytes:
    return json.dumps(payload).encode()


def _json_loads(data: bytes) -> Any:
    return json.loads(data)


def _msgpack_loads(data: bytes) -> Any:
    return msgpack.unpackb(data, raw=False)


_ENCODERS = {"json": _json_dumps, "orjson": orjson.dumps, "msgpack": msgpack.packb}
_DECODERS = {"json": _json_loads, "orjson": orjson.loads, "msgpack": _msgpack_loads}


def encode(payload: Any, codec: str = "json") -> bytes:
    """Encode a JSON-ready ``payload`` to bytes with ``codec`` (``json``, ``orjson`` or ``msgpack``).

    Raises :class:`labkit.errors.BadInputError` for an unknown codec or a value the codec cannot encode.
    """
    encoder = _ENCODERS.get(codec) or _ENCODERS[check_variant("codec", codec)]
    try:
        return encoder(payload)
    except (TypeError, ValueError, OverflowError) as exc:
        raise BadInputError(
            f"codec {codec!r} cannot encode the payload: {exc}; make it JSON-ready (str keys, 64-bit ints, "
            "finite floats, lists, dicts, str, bool, None)"
        ) from exc


def decode(data: bytes, codec: str = "json") -> Any:
    """Decode bytes made by :func:`encode` with the same ``codec``.

    Raises :class:`labkit.errors.BadInputError` for an unknown codec or bytes that are not valid for it.
    """
    decoder = _DECODERS.get(codec) or _DECODERS[check_variant("codec", codec)]
    try:
        return decoder(data)
    except (TypeError, ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as exc:
        raise BadInputError(f"cannot decode {len(data)} bytes as {codec!r}: {exc}; was it encoded with it?") from exc


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
    return encode({"items": items}, codec)


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
