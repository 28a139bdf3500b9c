"""The compiled schemas of the export and order payloads: msgspec ``Struct`` types and protobuf messages.

A *schema* names the shape of a payload ahead of time, so a codec need not discover it per call. Two
payloads have one — the only ones a schema-bound format is offered for:

    SCHEMAS["export"]   GET /customers/{id}/export   Struct: Export       protobuf: toyshop.Export
    SCHEMAS["order"]    GET /orders/{id}             Struct: OrderDetail  protobuf: toyshop.OrderDetail

Both mirror the JSON payload key for key (``labkit/toyshop/export.py`` builds it), and both decode back to
exactly the JSON baseline's content through :func:`to_builtins`:

* msgspec ``Struct`` types: products are one type whatever the field set — every product key may be absent
  (``UNSET``: a trimmed set) or ``None``; every other key is required, with its type checked on decode.
* protobuf (``proto/toyshop.proto``, generated ``proto/toyshop_pb2.py``): ``optional`` product fields for
  absent keys and ``null_fields`` for keys present as ``null``; int64 integers.

:func:`to_message` checks what protobuf would otherwise change silently — a missing key or a ``None`` in a
field that cannot be null would decode as ``0`` or ``""`` — and raises :class:`labkit.errors.BadInputError`
instead. Floats live only in ``product.rating``: :meth:`Schema.first_nonfinite` finds a NaN or infinity
there without walking the whole payload (the JSON encoders use it: JSON cannot carry one).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

from labkit.errors import BadInputError
from labkit.toyshop.core.proto import toyshop_pb2 as pb

__all__ = ["PRODUCT_TYPES", "Schema", "SCHEMAS", "LISTING", "check_schema", "to_builtins", "to_message",
           "Customer", "Product", "Item", "Order", "Export", "OrderDetail"]

_UNSET = msgspec.UNSET
_Unset = msgspec.UnsetType

#: product field -> its Python type (INTEGER -> int, TEXT -> str, REAL -> float in the dataset's table).
PRODUCT_TYPES: dict[str, type] = {
    "id": int, "sku": str, "name": str, "brand": str, "category": str, "subcategory": str, "description": str,
    "price_cents": int, "currency": str, "weight_g": int, "width_mm": int, "height_mm": int, "depth_mm": int,
    "color": str, "material": str, "size_label": str, "stock": int, "warehouse": str, "rating": float,
    "review_count": int, "created_at": str, "updated_at": str, "tags": str, "barcode": str,
    "origin_country": str, "supplier": str, "tax_class": str, "discount_pct": int, "is_active": int,
    "image_url": str, "thumbnail_url": str, "warranty_months": int,
}  # fmt: skip


class Customer(msgspec.Struct):
    """The export's customer."""

    id: int
    name: str
    email: str
    country: str
    tier: str


#: A product: any subset of the 32 fields (absent = UNSET, not encoded), each of its column's type or None.
Product = msgspec.defstruct(
    "Product", [(name, t | None | _Unset, _UNSET) for name, t in PRODUCT_TYPES.items()],
    module=__name__)


class Item(msgspec.Struct):
    """One order line with its product's details (None: the catalog does not know the product)."""

    line_no: int
    product_id: int
    sku: str
    name: str
    quantity: int
    unit_price_cents: int
    line_total_cents: int
    product: Product | None  # type: ignore[valid-type]


class Order(msgspec.Struct):
    """An order in the export."""

    id: int
    created_at: str
    status: str
    currency: str
    shipping_cents: int
    total_cents: int
    items: list[Item]


class Export(msgspec.Struct):
    """GET /customers/{id}/export."""

    customer: Customer
    order_count: int
    item_count: int
    orders: list[Order]


class OrderDetail(msgspec.Struct):
    """GET /orders/{id}: an order and its customer's id."""

    id: int
    created_at: str
    status: str
    currency: str
    shipping_cents: int
    total_cents: int
    items: list[Item]
    customer_id: int


@dataclass(frozen=True)
class Schema:
    """One payload's schema: its name, msgspec Struct type, protobuf message class, and where items live."""

    name: str
    struct: type
    message: type
    keys: tuple[str, ...]

    def items(self, payload: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
        """Every item of the payload (export: of every order; order: its own)."""
        if self.name == "export":
            for order in payload["orders"]:
                yield from order["items"]
        else:
            yield from payload["items"]

    def products(self, payload: Mapping[str, Any]) -> Iterator[Mapping[str, Any] | None]:
        """Every product of the payload (a listing's items are products)."""
        if self.name == "listing":
            yield from payload["items"]
        else:
            for item in self.items(payload):
                yield item["product"]

    def first_nonfinite(self, payload: Mapping[str, Any]) -> str | None:
        """Where the payload holds a NaN or infinity (``orders[3].items[0].product.rating``), or None.

        The schema's only float is ``product.rating``: one look per item, not a walk of every value.
        """
        isfinite = math.isfinite
        try:
            for n, product in enumerate(self.products(payload)):
                if product is not None:
                    rating = product.get("rating")
                    if type(rating) is float and not isfinite(rating):
                        return f"item {n} product.rating = {rating!r}"
        except (KeyError, TypeError, AttributeError) as exc:
            raise BadInputError(f"the payload does not have the {self.name!r} schema's shape ({exc!r}); "
                                "encode it without schema=") from None
        return None


SCHEMAS: dict[str, Schema] = {
    "export": Schema("export", Export, pb.Export, ("customer", "order_count", "item_count", "orders")),
    "order": Schema("order", OrderDetail, pb.OrderDetail,
                    ("id", "created_at", "status", "currency", "shipping_cents", "total_cents", "items",
                     "customer_id")),
}


#: The product listing of :func:`labkit.toyshop.core.encode_products` (``{"items": [product, ...]}``): only its
#: float check — no Struct or message, so not one of :data:`SCHEMAS`.
LISTING = Schema("listing", dict, dict, ("items",))


def check_schema(schema: str | Schema | None) -> Schema | None:
    """The :class:`Schema` named ``schema`` (or None); raises BadInputError naming the known ones."""
    if schema is None or isinstance(schema, Schema):
        return schema
    found = SCHEMAS.get(schema) if isinstance(schema, str) else None
    if found is None:
        raise BadInputError(f"unknown schema {schema!r}: only the payloads {', '.join(map(repr, SCHEMAS))} "
                            "have one; leave schema=None for any other payload")
    return found


# ------------------------------------------------------------------------------------------ protobuf

_PRODUCT_NUMBERS = {f.name: f.number for f in pb.Product.DESCRIPTOR.fields if f.name != "null_fields"}
_PRODUCT_NAMES = {n: name for name, n in _PRODUCT_NUMBERS.items()}
_ITEM_KEYS = tuple(f.name for f in pb.Item.DESCRIPTOR.fields)
_ORDER_KEYS = tuple(f.name for f in pb.Order.DESCRIPTOR.fields)
_CUSTOMER_KEYS = tuple(f.name for f in pb.Customer.DESCRIPTOR.fields)


def _keys(d: Any, want: tuple[str, ...], where: str, nullable: tuple[str, ...] = ()) -> None:
    """Every key of ``want`` present, no None: protobuf would decode a missing or null one as 0 or ''."""
    if not isinstance(d, Mapping):
        raise BadInputError(f"{where} must be a mapping (JSON object), got {type(d).__name__}")
    if len(d) != len(want) or None in d.values():
        missing = [k for k in want if k not in d]
        nulls = [k for k in want if k in d and d[k] is None and k not in nullable]
        if missing or nulls:
            raise BadInputError(
                f"protobuf cannot carry {where}: " + (f"missing key(s) {missing}" if missing else
                                                      f"null in {nulls}, which the schema says is never null")
                + " — a missing or null value would decode as 0 or '' (a silent change); fix the payload")


def _product(p: Mapping[str, Any]) -> Any:
    if None not in p.values():
        return p
    out = {k: v for k, v in p.items() if v is not None}
    try:
        out["null_fields"] = [_PRODUCT_NUMBERS[k] for k, v in p.items() if v is None]
    except KeyError as exc:
        raise BadInputError(f"protobuf cannot carry product field {exc}: toyshop.proto's Product has "
                            f"{', '.join(_PRODUCT_NUMBERS)}") from None
    return out


def _items(items: list[Any], where: str) -> list[Any]:
    if not isinstance(items, list):
        raise BadInputError(f"{where}.items must be a list, got {type(items).__name__}")
    out = items
    for n, item in enumerate(items):
        _keys(item, _ITEM_KEYS, f"{where}.items[{n}]", nullable=("product",))
        product = item["product"]
        if product is not None:
            if not isinstance(product, Mapping):
                raise BadInputError(f"{where}.items[{n}].product must be a mapping or None")
            fixed = _product(product)
            if fixed is not product:
                if out is items:
                    out = list(items)
                out[n] = {**item, "product": fixed}
    return out


def to_message(payload: Mapping[str, Any], schema: str | Schema) -> Any:
    """The protobuf message for ``payload`` (an export or order dict); raises BadInputError for a value the
    schema cannot carry (a missing key, a null where none may be, a wrong type, an int beyond 64 bits)."""
    s = check_schema(schema)
    assert s is not None
    _keys(payload, s.keys, s.name)
    try:
        if s.name == "export":
            _keys(payload["customer"], _CUSTOMER_KEYS, "customer")
            orders = payload["orders"]
            if not isinstance(orders, list):
                raise BadInputError(f"orders must be a list, got {type(orders).__name__}")
            fixed = []
            for n, o in enumerate(orders):
                _keys(o, _ORDER_KEYS, f"orders[{n}]")
                items = _items(o["items"], f"orders[{n}]")
                fixed.append(o if items is o["items"] else {**o, "items": items})
            return s.message(customer=payload["customer"], order_count=payload["order_count"],
                             item_count=payload["item_count"], orders=fixed)
        return s.message(**{**payload, "items": _items(payload["items"], "order")})
    except (TypeError, ValueError) as exc:
        if isinstance(exc, BadInputError):
            raise
        raise BadInputError(f"protobuf cannot carry this {s.name} payload: {exc} (the types are fixed by "
                            "labkit/toyshop/core/proto/toyshop.proto; integers are int64)") from None


def _product_dict(p: Any) -> dict[str, Any]:
    out = {f.name: v for f, v in p.ListFields() if f.number != 100}
    if p.null_fields:
        for n in p.null_fields:
            out[_PRODUCT_NAMES[n]] = None
        out = {k: out[k] for k in _PRODUCT_NUMBERS if k in out}  # table order, as the JSON has it
    return out


def _item_dict(it: Any) -> dict[str, Any]:
    return {"line_no": it.line_no, "product_id": it.product_id, "sku": it.sku, "name": it.name,
            "quantity": it.quantity, "unit_price_cents": it.unit_price_cents,
            "line_total_cents": it.line_total_cents,
            "product": _product_dict(it.product) if it.HasField("product") else None}


def _order_dict(o: Any) -> dict[str, Any]:
    return {"id": o.id, "created_at": o.created_at, "status": o.status, "currency": o.currency,
            "shipping_cents": o.shipping_cents, "total_cents": o.total_cents,
            "items": [_item_dict(i) for i in o.items]}


def to_builtins(obj: Any) -> Any:
    """What a decoded value means as JSON-ready Python data: a msgspec Struct or a protobuf message of these
    schemas becomes the dicts and lists of the JSON baseline; anything else is returned as it is."""
    if isinstance(obj, msgspec.Struct):
        return msgspec.to_builtins(obj)
    if isinstance(obj, pb.Export):
        c = obj.customer
        return {"customer": {"id": c.id, "name": c.name, "email": c.email, "country": c.country, "tier": c.tier},
                "order_count": obj.order_count, "item_count": obj.item_count,
                "orders": [_order_dict(o) for o in obj.orders]}
    if isinstance(obj, pb.OrderDetail):
        return {**_order_dict(obj), "customer_id": obj.customer_id}
    return obj
