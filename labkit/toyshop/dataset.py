"""The toyshop dataset: a deterministic order domain stored in SQLite, built atomically on first use.

Tables: ``customers``, ``products`` (wide rows, 32 fields, for the serialization lab), ``orders``,
``order_items``, ``config`` (tens of thousands of keys, for the caching lab) and ``meta`` (schema and
generator version, size, seed, row counts) which is how a stale or foreign file is recognised.

    path = ensure("small")          # builds datasets/toyshop-small.sqlite the first time (seconds)

A shared install (a hub: the repository read-only to learners) reads the organiser's built file from
:func:`data_dir`; a learner who needs a build gets it, and its lock file, in their own folder
(``$PERFLAB_HOME/.labkit/datasets``, else ``~/.cache/labkit``: :mod:`labkit.paths`), never beside the shared one.

The same size and seed give the same rows on every machine (``random.Random`` with a fixed seed, no clock).
A few *ladder* customers have a known number of orders of exactly 4 items each (:data:`LADDER`), so a lab
can plot latency against item count; the rest follow a skewed distribution (many with few orders, a few
with many), and their order lines follow an 80/20 product popularity: :func:`hot_products` (a fifth of the
products) receive four fifths of their lines, so a product cache preloaded with them has a hit ratio worth
measuring. The ladder's lines pick products uniformly (unchanged since schema 3, so earlier labs' figures hold). A build writes a temporary file and renames it into place, so an interrupted build never
leaves a half-written database; a corrupt, truncated or stale file is detected and rebuilt with a message.
"""

from __future__ import annotations

import fcntl
import os
import random
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

from labkit import paths
from labkit.errors import BadInputError, ResultsError
from labkit.progress import notes

__all__ = ["SIZES", "LADDER", "SCHEMA_VERSION", "data_dir", "own_data_dir", "db_path", "locate", "ensure", "build", "verify",
           "config_key", "skewed_config_keys", "hot_products", "HOT_FRACTION", "HOT_SHARE", "ladder"]

SCHEMA_VERSION = 4  # bump whenever the schema or the generator's output changes: old files are rebuilt
SEED = 20261130
#: size -> (customers, products, config keys, max orders for a random customer)
SIZES: dict[str, tuple[int, int, int, int]] = {
    "small": (300, 1_000, 20_000, 60),
    "default": (3_000, 5_000, 50_000, 120),
    "large": (30_000, 20_000, 200_000, 200),
}
#: customer id -> number of orders (each of exactly 4 items): the latency-vs-item-count ladder.
LADDER: dict[int, int] = {1: 50, 2: 1, 3: 2, 4: 5, 5: 10, 6: 20, 7: 100, 8: 200, 9: 0}
ITEMS_PER_LADDER_ORDER = 4
#: the product popularity of non-ladder order lines: HOT_SHARE of them go to HOT_FRACTION of the products.
HOT_FRACTION, HOT_SHARE = 0.2, 0.8

_AREAS = ("pricing", "feature", "limits", "ui", "search", "shipping", "tax", "promo")
_WORDS = ("red blue green steel oak linen wool cotton compact deluxe classic modern travel kids pro mini "
          "smart solar quiet rapid gentle bold daily garden kitchen office outdoor winter summer").split()
_NOUNS = "kettle lamp chair mug backpack jacket clock speaker kite puzzle robot train drum scarf".split()
_COUNTRIES = ("DE", "FR", "ES", "IT", "NL", "PL", "SE", "US", "GB", "JP", "CN", "BR")
_STATUSES = ("paid", "shipped", "delivered", "delivered", "delivered", "cancelled", "returned")
_EPOCH = 1_704_067_200  # 2024-01-01T00:00:00Z

_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, email TEXT NOT NULL, country TEXT NOT NULL,
  tier TEXT NOT NULL, created_at TEXT NOT NULL);
CREATE TABLE products (id INTEGER PRIMARY KEY, sku TEXT NOT NULL, name TEXT NOT NULL, brand TEXT, category TEXT,
  subcategory TEXT, description TEXT, price_cents INTEGER NOT NULL, currency TEXT, weight_g INTEGER,
  width_mm INTEGER, height_mm INTEGER, depth_mm INTEGER, color TEXT, material TEXT, size_label TEXT,
  stock INTEGER, warehouse TEXT, rating REAL, review_count INTEGER, created_at TEXT, updated_at TEXT, tags TEXT,
  barcode TEXT, origin_country TEXT, supplier TEXT, tax_class TEXT, discount_pct INTEGER, is_active INTEGER,
  image_url TEXT, thumbnail_url TEXT, warranty_months INTEGER);
CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL REFERENCES customers(id),
  created_at TEXT NOT NULL, status TEXT NOT NULL, currency TEXT NOT NULL, shipping_cents INTEGER NOT NULL,
  total_cents INTEGER NOT NULL);
CREATE TABLE order_items (id INTEGER PRIMARY KEY, order_id INTEGER NOT NULL REFERENCES orders(id),
  line_no INTEGER NOT NULL, product_id INTEGER NOT NULL REFERENCES products(id), quantity INTEGER NOT NULL,
  unit_price_cents INTEGER NOT NULL);
CREATE TABLE config (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
"""
_INDEXES = """
CREATE INDEX orders_customer ON orders(customer_id, created_at, id);
CREATE INDEX items_order ON order_items(order_id, line_no);
"""
_TABLES = ("customers", "products", "orders", "order_items", "config")
_verified: set[tuple[str, int, int]] = set()  # (path, inode, mtime_ns) already checked by this process


def data_dir() -> Path:
    """Where datasets live: ``$LABKIT_DATA_DIR``, else the repository's ``datasets/``, else ``~/.cache/labkit``."""
    env = os.environ.get("LABKIT_DATA_DIR")
    if env:
        return Path(os.path.expanduser(env))
    repo = paths.repo_root()
    if repo is not None:
        return repo / "datasets"
    return Path.home() / ".cache" / "labkit"


def own_data_dir() -> tuple[Path, str]:
    """Where this user builds a dataset and takes the build's lock, with the variable that chooses it:
    ``$PERFLAB_HOME/.labkit/datasets``; else :func:`data_dir` when this user can write it; else
    ``~/.cache/labkit`` (the shared folder is read-only to them: a hub's learner)."""
    if paths.home() is not None:
        return paths.user_cache() / "datasets", paths.HOME_ENV
    shared = data_dir()
    if paths.can_write(shared):
        return shared, "LABKIT_DATA_DIR" if os.environ.get("LABKIT_DATA_DIR") else paths.HOME_ENV
    return paths.user_cache(), paths.HOME_ENV


def _check_size(size: str) -> str:
    if size not in SIZES:
        raise BadInputError(f"unknown dataset size {size!r}: choose one of {', '.join(SIZES)} "
                            "(small for CI and quick checks, default for the workshop, large for stress)")
    return size


def db_path(size: str = "small", directory: Path | str | None = None) -> Path:
    """The path of the SQLite file for ``size`` (it may not exist yet; :func:`ensure` builds it)."""
    return Path(directory or data_dir()) / f"toyshop-{_check_size(size)}.sqlite"


def config_key(i: int) -> str:
    """The ``i``-th config key (0-based), e.g. ``cfg.pricing.000008``; computable without the database."""
    return f"cfg.{_AREAS[i % len(_AREAS)]}.{i:06d}"


def skewed_config_keys(n: int, size: str = "small", *, hot_fraction: float = 0.2, hot_share: float = 0.8,
                       seed: int = 1) -> list[str]:
    """A deterministic access pattern of ``n`` config keys where ``hot_share`` of the accesses go to
    ``hot_fraction`` of the keys (80/20 by default): the workload of the caching lesson.

    Args:
        n: how many accesses to generate.
        size: which dataset's key space to draw from.
        hot_fraction: the share of keys that are hot (0 < x < 1).
        hot_share: the share of accesses that hit a hot key (0 <= x <= 1).
        seed: the pattern's seed (the hot set is fixed per size; the seed changes the order).
    """
    if not (0 < hot_fraction < 1 and 0 <= hot_share <= 1) or n < 0:
        raise BadInputError(f"skewed_config_keys needs n >= 0, 0 < hot_fraction < 1 and 0 <= hot_share <= 1; "
                            f"got n={n}, hot_fraction={hot_fraction}, hot_share={hot_share}")
    total = SIZES[_check_size(size)][2]
    order = list(range(total))
    random.Random(SEED).shuffle(order)  # the hot set is scattered over the key space, not the first keys
    n_hot = max(1, int(total * hot_fraction))
    hot, cold = order[:n_hot], order[n_hot:]
    rng = random.Random(seed)
    return [config_key(rng.choice(hot) if rng.random() < hot_share else rng.choice(cold)) for _ in range(n)]


def hot_products(size: str = "small") -> list[int]:
    """The popular products of a dataset, sorted: :data:`HOT_FRACTION` of the product ids, which receive
    :data:`HOT_SHARE` of the non-ladder customers' order lines. Computable without the database (a fixed
    shuffle of the ids), so a service can preload them at start."""
    n_products = SIZES[_check_size(size)][1]
    order = list(range(1, n_products + 1))
    random.Random(f"{SEED}:hot-products").shuffle(order)  # scattered over the ids, not the first ones
    return sorted(order[:max(1, int(n_products * HOT_FRACTION))])


def ladder(conn: sqlite3.Connection) -> list[tuple[int, int, int]]:
    """The ladder customers as ``(customer_id, orders, items)``, sorted by item count."""
    rows = conn.execute(
        "SELECT c.id, COUNT(DISTINCT o.id), COUNT(i.id) FROM customers c LEFT JOIN orders o ON o.customer_id = c.id "
        f"LEFT JOIN order_items i ON i.order_id = o.id WHERE c.id IN ({','.join('?' * len(LADDER))}) "
        "GROUP BY c.id", tuple(LADDER)).fetchall()
    return sorted(((r[0], r[1], r[2]) for r in rows), key=lambda r: (r[2], r[0]))


def _iso(ts: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


def _products(rng: random.Random, n: int) -> Iterator[tuple]:
    for pid in range(1, n + 1):
        w1, w2, noun = rng.choice(_WORDS), rng.choice(_WORDS), rng.choice(_NOUNS)
        created = _EPOCH - rng.randrange(3 * 365 * 86400)
        desc = " ".join(rng.choice(_WORDS) for _ in range(rng.randrange(8, 30)))
        yield (pid, f"SKU-{pid:07d}", f"{w1.title()} {w2} {noun}", f"{rng.choice(_WORDS).title()}Co",
               noun, f"{noun}-{rng.choice(_WORDS)}", f"A {desc} {noun}.", rng.randrange(199, 49_999), "EUR",
               rng.randrange(50, 9_000), rng.randrange(10, 900), rng.randrange(10, 900), rng.randrange(10, 900),
               rng.choice(_WORDS[:3]), rng.choice(_WORDS[3:7]), rng.choice(("XS", "S", "M", "L", "XL", "one")),
               rng.randrange(0, 500), f"WH-{rng.randrange(1, 9)}", round(rng.uniform(1, 5), 1),
               rng.randrange(0, 5_000), _iso(created), _iso(created + rng.randrange(86400 * 300)),
               ",".join(rng.sample(_WORDS, 3)), f"{rng.randrange(10**12, 10**13)}", rng.choice(_COUNTRIES),
               f"Supplier {rng.randrange(1, 80)}", rng.choice(("standard", "reduced", "zero")),
               rng.choice((0, 0, 0, 5, 10, 20)), int(rng.random() > 0.05),
               f"https://img.toyshop.invalid/p/{pid}.jpg", f"https://img.toyshop.invalid/t/{pid}.jpg",
               rng.choice((0, 12, 24, 36)))


def _order_count(rng: random.Random, cap: int) -> int:
    """Skewed: half the customers have a handful of orders, a few have many."""
    r = rng.random()
    if r < 0.5:
        return rng.randrange(1, 6)
    if r < 0.8:
        return rng.randrange(6, 21)
    if r < 0.95:
        return rng.randrange(21, max(22, cap // 2))
    return rng.randrange(cap // 2, cap + 1)


def build(size: str = "small", path: Path | str | None = None) -> Path:
    """Generate the dataset for ``size`` into ``path`` (default :func:`db_path`) atomically and return the path.

    The rows are written to ``<path>.tmp-<pid>``, checked, fsynced and renamed over ``path``: readers
    see either the old file or the complete new one, never a half-written one.
    """
    n_customers, n_products, n_config, cap = SIZES[_check_size(size)]
    final = Path(path) if path else db_path(size)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.with_name(f"{final.name}.tmp-{os.getpid()}")
    tmp.unlink(missing_ok=True)
    try:
        conn = sqlite3.connect(tmp, isolation_level=None)
        try:
            _fill(conn, size, n_customers, n_products, n_config, cap)
        finally:
            conn.close()
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, final)
        dfd = os.open(final.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError as exc:
        raise ResultsError(f"could not build the {size} dataset at {final}: {exc}. Check that the folder is "
                           "writable and has free space, or set PERFLAB_HOME to a folder you can write.") from exc
    finally:
        tmp.unlink(missing_ok=True)
    return final


def _fill(conn: sqlite3.Connection, size: str, n_customers: int, n_products: int, n_config: int,
          cap: int) -> None:
    conn.execute("PRAGMA journal_mode=OFF")
    conn.execute("PRAGMA synchronous=OFF")
    conn.executescript(_SCHEMA)
    rng = random.Random(f"{SEED}:{size}")
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO customers VALUES (?,?,?,?,?,?)", (
        (cid, f"Customer {cid}", f"customer{cid}@example.invalid", rng.choice(_COUNTRIES),
         rng.choice(("basic", "basic", "basic", "silver", "gold")), _iso(_EPOCH - rng.randrange(5 * 365 * 86400)))
        for cid in range(1, n_customers + 1)))
    products = list(_products(rng, n_products))
    conn.executemany(f"INSERT INTO products VALUES ({','.join('?' * 32)})", products)
    prices = [p[7] for p in products]
    hot = hot_products(size)
    hot_set = set(hot)
    cold = [pid for pid in range(1, n_products + 1) if pid not in hot_set]
    # a second stream for the 80/20 product choice, so the main stream (order counts, dates, quantities) and
    # therefore every ladder customer's rows stay exactly as they were before the skew
    popular = random.Random(f"{SEED}:{size}:popularity")
    orders, items = [], []
    oid = iid = 0
    for cid in range(1, n_customers + 1):
        ladder_n = LADDER.get(cid)
        count = ladder_n if ladder_n is not None else _order_count(rng, cap)
        t = _EPOCH + rng.randrange(86400 * 30)
        for _ in range(count):
            oid += 1
            t += rng.randrange(3600, 86400 * 20)
            n_items = ITEMS_PER_LADDER_ORDER if ladder_n is not None else rng.choice((1, 2, 2, 3, 4, 4, 5, 6, 8))
            total = 0
            for line in range(1, n_items + 1):
                iid += 1
                pid = rng.randrange(1, n_products + 1)
                if ladder_n is None:
                    pid = popular.choice(hot) if popular.random() < HOT_SHARE else popular.choice(cold)
                qty = rng.choice((1, 1, 1, 2, 3))
                unit = prices[pid - 1] * (100 - rng.choice((0, 0, 5, 10))) // 100
                total += qty * unit
                items.append((iid, oid, line, pid, qty, unit))
            shipping = 0 if total > 5_000 else 495
            orders.append((oid, cid, _iso(t), rng.choice(_STATUSES), "EUR", shipping, total + shipping))
    conn.executemany("INSERT INTO orders VALUES (?,?,?,?,?,?,?)", orders)
    conn.executemany("INSERT INTO order_items VALUES (?,?,?,?,?,?)", items)
    conn.executemany("INSERT INTO config VALUES (?,?)", (
        (config_key(i), f"{rng.choice(_WORDS)}:" + "x" * rng.randrange(4, 160)) for i in range(n_config)))
    counts = {"customers": n_customers, "products": n_products, "orders": len(orders),
              "order_items": len(items), "config": n_config}
    meta = {"schema_version": str(SCHEMA_VERSION), "size": size, "seed": str(SEED),
            **{f"rows.{k}": str(v) for k, v in counts.items()}}
    conn.executemany("INSERT INTO meta VALUES (?,?)", sorted(meta.items()))
    conn.execute("COMMIT")
    conn.executescript(_INDEXES)
    conn.execute("ANALYZE")
    conn.execute("PRAGMA journal_mode=DELETE")


def verify(path: Path | str, size: str = "small") -> str | None:
    """Check a dataset file; return None when it is sound, else the reason it must be rebuilt.

    Checks: the file is SQLite, its length matches its page count (truncation), the ``meta`` table names
    this schema version and size, the row counts match, and ``PRAGMA quick_check`` passes.
    """
    path = Path(path)
    if not path.exists():
        return "it does not exist yet"
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            page_size, pages = (conn.execute(f"PRAGMA {p}").fetchone()[0] for p in ("page_size", "page_count"))
            if page_size * pages != path.stat().st_size:
                return f"its length ({path.stat().st_size} bytes) does not match its {pages} pages (truncated?)"
            meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
            if meta.get("schema_version") != str(SCHEMA_VERSION) or meta.get("size") != size:
                return (f"it is stale (schema {meta.get('schema_version')}, size {meta.get('size')}; "
                        f"this labkit expects schema {SCHEMA_VERSION}, size {size})")
            for table in _TABLES:
                (n,) = conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()
                if str(n) != meta.get(f"rows.{table}"):
                    return f"table {table} has {n} rows but its meta says {meta.get(f'rows.{table}')}"
            result = conn.execute("PRAGMA quick_check").fetchone()[0]
            if result != "ok":
                return f"SQLite's quick_check reports damage: {result}"
        finally:
            conn.close()
    except sqlite3.Error as exc:
        return f"SQLite cannot read it ({exc})"
    return None


def ensure(size: str = "small", *, directory: Path | str | None = None, quiet: bool = False,
           force: bool = False) -> Path:
    """Return the path of a sound dataset for ``size``, building (or rebuilding) it first if needed.

    Looks for a sound file in this user's own folder, then in the shared :func:`data_dir` (read-only is
    enough), and builds one only when neither is: in :func:`own_data_dir`, serialised between processes by a
    lock file next to it. ``directory`` uses that folder alone. A folder that cannot be written raises
    :class:`ResultsError` naming it and the variable to set (``PERFLAB_HOME``).
    A rebuilt file prints why it was rebuilt (on stderr) unless ``quiet``; ``force`` rebuilds regardless.
    """
    if directory is not None:
        return _ensure_in(db_path(size, directory), size, quiet, force, "the directory argument", None)
    own, variable = own_data_dir()
    shared = db_path(size)
    mine = db_path(size, own)
    shared_problem = None
    if not force and mine != shared:
        # the organiser's file, read-only, is as good as one's own: no lock is needed to read a file that is
        # only ever replaced whole (build renames a complete file into place)
        for path in (mine, shared):
            problem = None if _stamp(path) in _verified else verify(path, size)
            if problem is None:
                _verified.add(_stamp(path))  # type: ignore[arg-type]
                return path
            if path == shared:
                shared_problem = f"the shared copy at {shared} cannot be used ({problem})"
    return _ensure_in(mine, size, quiet, force, variable, shared_problem)


def locate(size: str = "small") -> Path:
    """The file :func:`ensure` would return, without building it: this user's own copy or the shared one when
    either is sound, else where a build would go."""
    own, _ = own_data_dir()
    for path in (db_path(size, own), db_path(size)):
        if verify(path, size) is None:
            return path
    return db_path(size, own)


def _ensure_in(path: Path, size: str, quiet: bool, force: bool, variable: str, why: str | None) -> Path:
    key = _stamp(path)
    if key is not None and key in _verified and not force:
        return path
    paths.writable(path.parent, variable, f"the {size} toyshop dataset and its lock file")
    try:
        lock = open(path.with_name(path.name + "-lock"), "a+")  # noqa: SIM115 - closed by the with below
    except OSError as e:
        raise ResultsError(f"labkit cannot create the dataset's lock file in {path.parent}: {e.strerror or e}. "
                           f"Set {variable} to a folder this user can write") from e
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        problem = "a rebuild was asked for (force)" if force else verify(path, size)
        if problem is not None and why is not None:
            problem = f"{why}, and your own copy: {problem}"
        if problem is not None:
            t0 = time.perf_counter()
            if not quiet:
                print(f"labkit: building the {size} toyshop dataset at {path} because {problem} ...",
                      file=notes(), flush=True)
            build(size, path)
            if not quiet:
                print(f"labkit: built {path} ({path.stat().st_size / 1e6:.1f} MB) in "
                      f"{time.perf_counter() - t0:.1f} s", file=notes(), flush=True)
    key = _stamp(path)
    if key is not None:
        _verified.add(key)
    return path


def _stamp(path: Path) -> tuple[str, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (str(path), st.st_ino, st.st_mtime_ns)
