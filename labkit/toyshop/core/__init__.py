"""toyshop's performance core: the compute behind the endpoints, importable and callable on its own.

Pure functions and small classes; no HTTP, no database. Every lesson's fix is a *variant*: a named switch
whose first value is the slow baseline (the default). Variants of one step share one signature, so a lab
can run them side by side (``labkit.compare(quote_aos_grow, quote_soa_grow, lines)``) and the service can
pick one per request (``/quote?layout=soa&buffers=prealloc``, ``?codec=orjson&fields=trimmed``).

Switches — :data:`VARIANTS` (name -> allowed values, default first), :data:`DEFAULTS`:

    layout   aos | soa                quote pricing over per-line dicts vs NumPy columns
    buffers  grow | prealloc          fresh containers per call vs reused per-thread buffers
    codec    json | orjson | msgpack  response encoding
    fields   full | trimmed           32 product fields per item vs 8
    cache    none | local             config lookup: load every time vs in-process snapshot

    check_variant(switch, value) -> value       raises BadInputError naming switch, value and allowed values
    resolve_variants(choices=None, *, ignore_unknown=False) -> dict   every switch, defaults filled in

Pricing (:mod:`.lines`, :mod:`.pricing`) — integer cents and basis points, so all variants agree *exactly*:

    lines = OrderLines.from_rows(rows)          rows: dicts keyed by LINE_FIELDS, or tuples in that order:
                                                (product_id, qty, unit_price, discount_bp, tax_class)
    lines = OrderLines.from_columns(pid, qty, unit_price, discount_bp, tax_class)   any int sequences
    lines = make_order_lines(n, seed=0)         deterministic synthetic lines, both views built
    quote(lines, layout="aos", buffers="grow") -> Quote
    quote_aos_grow / quote_aos_prealloc / quote_soa_grow / quote_soa_prealloc  (lines) -> Quote
    QUOTE_KERNELS[(layout, buffers)]            the same four kernels
    Quote(lines, quantity, gross, discount, net, tax, total, by_tax_class).to_dict()
    DEFAULT_TAX_RATES_BP = (0, 550, 1000, 2000); OrderLines(..., tax_rates_bp=...) to change them

    ``lines.rows`` (AoS) and ``lines.columns`` (SoA) are built — and the input validated, raising
    BadInputError naming the field — on first access, each the way its layout would (a Python pass making
    dicts; one np.array call + vectorised checks), so a request pays only for the view its variant uses.
    ``lines.materialize()`` builds both, so a timed kernel never times a conversion.

    Measured here (tests/benchmarks/bench_core.py, busy 2-vCPU VM, interleaved medians): SoA has a fixed
    ~15–20 µs per call, so it *loses* below ~20 lines (0.65× at 10), then wins: 1.5× at 30, ~4× at 100,
    ~25× at 1,000 lines (kernels only). Pricing SQL tuple rows, conversion included: 0.8× at 30, 1.8× at
    100, 3.8× at 1,000 — converting rows to columns per request is O(n) Python work too. prealloc helps
    AoS at every size (1.3–1.5×: no per-line dict, so no GC collections — 13 gen-0 runs per 10k-line call
    before, none after — though the allocation count barely moves: boxed ints dominate it) and SoA only
    for big arrays (2–5× at 100k lines, run to run; ~5 % slower at ≤10k lines, where malloc simply hands back the chunk just freed
    and ``out=`` only adds call overhead).
    The quote endpoint therefore shows the layout lesson best at ≥100 lines (``/quote?lines=N``).

Encoding (:mod:`.encoding`) — same decoded content whatever the codec:

    encode(payload, codec="json") -> bytes; decode(data, codec="json") -> object; MEDIA_TYPES[codec]
    encode_products(products, codec="json", fields="full") -> bytes     {"items": [selected fields...]}
    select_fields(product, fields="full") -> dict; PRODUCT_FIELDS (32, the dataset's products table),
    TRIMMED_FIELDS (8), FIELD_SETS; make_products(n, seed=0) -> list[dict] (no database needed)

    Measured on 50 products: encode() alone json → orjson 12.7×, → msgpack 3.8×; with the field
    selection a service does, 3.5× and 2.3×; full → trimmed 3.3–3.8× whatever the codec.

Config cache (:mod:`.cache`):

    cache = ConfigCache(load, mode="none" | "local", preload=None)   load(key) -> value | None
    cache.get(key) (loads on a miss); cache.lookup(key) -> (hit, value) (never loads: for an async caller)
    cache.refresh(source=None)   copy-on-write swap of the whole snapshot, readers never lock
    cache.hits, cache.misses, cache.stats() -> CacheStats(hits, misses, refreshes, size).hit_ratio
    (80/20 key pattern: labkit.toyshop.dataset.skewed_config_keys). Measured: 1,000 lookups against
    in-memory SQLite, none → local (warm, hit ratio 0.97): ~22× (2.2 ms → 0.1 ms).

Allocation counts are measured from outside the service: :mod:`labkit.alloc`.

Errors are :class:`labkit.errors.BadInputError` (a ``ValueError``) naming the bad argument and what to use.
"""

from labkit.toyshop.core.cache import CacheStats, ConfigCache
from labkit.toyshop.core.encoding import (
    FIELD_SETS,
    MEDIA_TYPES,
    PRODUCT_FIELDS,
    TRIMMED_FIELDS,
    decode,
    encode,
    encode_products,
    make_products,
    select_fields,
)
from labkit.toyshop.core.lines import (
    DEFAULT_TAX_RATES_BP,
    LINE_FIELDS,
    LineColumns,
    OrderLines,
    make_order_lines,
)
from labkit.toyshop.core.pricing import (
    QUOTE_KERNELS,
    Quote,
    TaxClassTotal,
    quote,
    quote_aos_grow,
    quote_aos_prealloc,
    quote_soa_grow,
    quote_soa_prealloc,
    release_buffers,
)
from labkit.toyshop.core.variants import DEFAULTS, VARIANTS, check_variant, resolve_variants

__all__ = [
    "VARIANTS",
    "DEFAULTS",
    "check_variant",
    "resolve_variants",
    "LINE_FIELDS",
    "DEFAULT_TAX_RATES_BP",
    "LineColumns",
    "OrderLines",
    "TaxClassTotal",
    "Quote",
    "quote",
    "quote_aos_grow",
    "quote_aos_prealloc",
    "quote_soa_grow",
    "quote_soa_prealloc",
    "QUOTE_KERNELS",
    "make_order_lines",
    "release_buffers",
    "PRODUCT_FIELDS",
    "TRIMMED_FIELDS",
    "FIELD_SETS",
    "MEDIA_TYPES",
    "encode",
    "decode",
    "select_fields",
    "encode_products",
    "make_products",
    "ConfigCache",
    "CacheStats",
]
