"""toyshop's performance core: the compute behind the endpoints, importable and callable on its own.

Pure functions and small classes; no HTTP, no database. Every lesson's fix is a *variant*: a named switch
whose first value is the slow baseline (the default). Variants of one step share one signature, so a lab
can run them side by side (``labkit.compare(quote_aos_grow, quote_soa_grow, lines)``) and the service can
pick one per request (``/quote?layout=soa&buffers=prealloc``, ``?codec=orjson&fields=trimmed``).

Switches — :data:`VARIANTS` (name -> allowed values, default first), :data:`DEFAULTS`: the switches the core
reads (``layout``, ``buffers``, ``codec``, ``compress``, ``fields``, ``cache``), a view of toyshop's one table
(:data:`labkit.toyshop.switches.TABLE`; what each does: ``docs/switches.md``):

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

    How the variants compare is measured, not stated here: ``tests/benchmarks/bench_core.py`` prints, side
    by side, SoA against AoS at each size (kernels only, and from SQL tuple rows with the conversion
    included — converting rows to columns per request is O(n) Python work too), prealloc against grow for
    each layout and size, and the allocations and GC runs behind them. SoA carries a fixed per-call cost
    that AoS does not, so where they cross depends on the number of lines (``/quote?lines=N``).

Encoding (:mod:`.encoding`, :mod:`.schemas`, :mod:`.compression`) — same decoded content whatever the codec:

    FORMATS[format] -> media type; CODECS[codec] -> formats it produces; MEDIA_TYPES[codec] (default format)
    encode(payload, codec="json", *, format=None, schema=None) -> bytes
    decode(data, codec="json", *, format=None, schema=None) -> object (typed Structs/messages with a schema)
    to_builtins(decoded) -> the JSON baseline's content; SCHEMAS["export" | "order"]; codec_label(codec, fmt)
    encode_products(products, codec="json", fields="full") -> bytes     {"items": [selected fields...]}
    select_fields(product, fields="full") -> dict; PRODUCT_FIELDS (32, the dataset's products table),
    TRIMMED_FIELDS (8), FIELD_SETS; make_products(n, seed=0) -> list[dict] (no database needed)
    compress(data, coding) / decompress(data, coding); CODINGS = none | gzip | zstd

    tests/benchmarks/bench_serialization.py prints every codec's encode/decode time and bytes side by side.

Config cache (:mod:`.cache`):

    cache = ConfigCache(load, mode="none" | "local", preload=None)   load(key) -> value | None
    cache.get(key) (loads on a miss); cache.lookup(key) -> (hit, value) (never loads: for an async caller)
    cache.refresh(source=None)   copy-on-write swap of the whole snapshot, readers never lock
    cache.hits, cache.misses, cache.stats() -> CacheStats(hits, misses, refreshes, size).hit_ratio
    (80/20 key pattern: labkit.toyshop.dataset.skewed_config_keys). ``tests/benchmarks/bench_core.py``
    prints none against local over in-memory SQLite, with the hit ratio.

Statements (:mod:`.statement`) — a customer's order lines as CSV bytes, built three ways:

    statement_grow / statement_prealloc / statement_pooled  (customer, rows) -> bytes
    statement_lines(customer, rows) -> the encoded lines, one at a time (what every kernel writes)
    STATEMENT_KERNELS[buffers]; make_statement_rows(n, seed=0) -> synthetic rows
    BufferPool(scribble=False).acquire() -> bytearray / .release(buf, used); POOL; SENTINEL; RED_ZONE

    grow concatenates bytes (quadratic); prealloc overwrites this thread's reused bytearray in place;
    pooled takes buffers from a shared pool and returns the *whole* buffer: a deliberate stale-state bug
    (a shorter statement carries a longer, earlier one's tail), reachable only with buffers=pooled.

Allocation counts are measured from outside the service: :mod:`labkit.alloc`.

Errors are :class:`labkit.errors.BadInputError` (a ``ValueError``) naming the bad argument and what to use.
"""

from labkit.toyshop.core.cache import CacheStats, ConfigCache
from labkit.toyshop.core.compression import CODINGS, compress, decompress
from labkit.toyshop.core.encoding import (
    CODECS,
    FIELD_SETS,
    FORMATS,
    MEDIA_TYPES,
    PRODUCT_FIELDS,
    TRIMMED_FIELDS,
    codec_label,
    decode,
    encode,
    encode_products,
    make_products,
    select_fields,
    to_builtins,
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
from labkit.toyshop.core.schemas import SCHEMAS
from labkit.toyshop.core.statement import (
    POOL,
    RED_ZONE,
    SENTINEL,
    STATEMENT_KERNELS,
    BufferPool,
    make_statement_rows,
    statement_grow,
    statement_lines,
    statement_pooled,
    statement_prealloc,
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
    "FORMATS",
    "CODECS",
    "SCHEMAS",
    "CODINGS",
    "encode",
    "decode",
    "to_builtins",
    "codec_label",
    "compress",
    "decompress",
    "select_fields",
    "encode_products",
    "make_products",
    "ConfigCache",
    "CacheStats",
    "statement_grow",
    "statement_prealloc",
    "statement_pooled",
    "STATEMENT_KERNELS",
    "BufferPool",
    "POOL",
    "SENTINEL",
    "RED_ZONE",
    "make_statement_rows",
    "statement_lines",
]
