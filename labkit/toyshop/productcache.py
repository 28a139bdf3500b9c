"""Product details kept in the order service: a copy-on-write snapshot that readers use without a lock.

The export asks the catalog for the details of every product it lists — a round trip per call. With
``cache=local`` it asks a :class:`ProductCache` first (seed 000, 2024: the remote lookup was replaced by an
in-process table, copy-on-write, "readers always get the old table or the new one, without locks").

**How it works.** The cache holds one :class:`Snapshot`: a dict of products, the catalog version it reflects
and the moment the poll that built it was sent. A reader loads the snapshot attribute once and looks ids up
in its dict — no lock, no wait, whatever a refresh does meanwhile. A product not in the snapshot (a *miss*)
is fetched from the catalog in one batch and back-filled into the snapshot the reader holds (one dict store
per id, atomic under the GIL), while the snapshot has room (``capacity``).

**The refresh rule.** A background thread polls the catalog's change feed (``GET /products/changes?since=V``)
every ``refresh_s`` seconds and swaps in the next snapshot: a copy of the current dict without the products
written since version ``V`` (the preloaded *hot* products among them are fetched again at once; the others
on their next miss). The swap is one attribute store: a reader sees the old snapshot or the new one, never a
half-built one. The first poll preloads the hot products (:func:`labkit.toyshop.dataset.hot_products`).

**The staleness bound.** Every entry of a snapshot is at least as recent as the snapshot's poll. A snapshot
is served only while it is younger than ``max_stale_s``; an older one (the catalog unreachable, the refresher
starved) is bypassed — every lookup goes to the catalog until a poll succeeds. So a change written to the
catalog at time *t* is seen by every lookup that starts after *t* + ``max_stale_s``, whatever happens.

**Visible.** Each request's ``Server-Timing`` carries ``cache_hit;count=…``, ``cache_miss;count=…`` and
``cache_age;dur=…`` (how old the snapshot it read was, ms); :meth:`ProductCache.stats` (``GET /cache`` on the
service) has the totals. Callers must not mutate the dicts they get: they are shared by every request.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from labkit import trace
from labkit.errors import BadInputError, LabkitError
from labkit.toyshop.catalog import Catalog, Observer, RemoteCatalog

__all__ = ["ProductCache", "Snapshot", "CacheTotals", "WouldBlock", "OFFLINE", "REFRESH_S", "MAX_STALE_S"]

REFRESH_S = 0.5  #: how often the refresher polls the catalog's change feed (seconds)
MAX_STALE_S = 2.0  #: a snapshot older than this (since its poll was sent) is not served (seconds)


class WouldBlock(LabkitError):
    """A lookup missed the cache while its caller may not wait for the network (see :data:`OFFLINE`)."""


class _Offline:
    """A catalog that never calls out: any lookup raises :class:`WouldBlock` (nothing fetched, nothing counted)."""

    observers: list[Observer] = []

    def get_many(self, product_ids: Iterable[int]) -> dict[int, dict[str, Any]]:
        raise WouldBlock(f"{len(list(product_ids))} products not in the cache; fetching them would block")


#: the catalog for code that must not block, such as a request run on the event loop (``hop=inline``):
#: ``cache.view(OFFLINE)`` answers hits and raises :class:`WouldBlock` on a miss, before counting anything, so
#: the caller can run the work again where it may wait (on a pool thread, with a real catalog)
OFFLINE = _Offline()


class Snapshot(NamedTuple):
    """One version of the cache: products by id (None: the catalog has no such product), the catalog
    version they reflect, and when the poll that built it was sent (``time.monotonic_ns``)."""

    products: dict[int, dict[str, Any] | None]
    version: int
    taken_ns: int


class CacheTotals(NamedTuple):
    """Counts since the cache was made: lookups answered from the snapshot (hits) or the catalog (misses)."""

    hits: int
    misses: int
    refreshes: int
    failed_refreshes: int
    size: int
    capacity: int
    version: int
    age_ms: float
    max_stale_ms: float
    running: bool

    @property
    def hit_ratio(self) -> float:
        """hits / (hits + misses), 0.0 before any lookup."""
        total = self.hits + self.misses
        return self.hits / total if total else 0.0


class ProductCache:
    """The order service's copy of product details (see the module docstring for the rules).

    Args:
        catalog: the catalog client that misses and refreshes go to (``get_many``, ``changes``).
        preload: the hot product ids, loaded by the first refresh and refetched when they change.
        refresh_s: seconds between two polls of the change feed.
        max_stale_s: the staleness bound: a snapshot older than this is bypassed.
        capacity: the most products a snapshot holds (back-fill stops there); default twice the preload, at
            least 100.
        clock: monotonic nanoseconds (inject a fake one in tests).
        autostart: the first lookup starts the background refresher (False: call :meth:`refresh` yourself).
    """

    def __init__(self, catalog: RemoteCatalog, *, preload: Iterable[int] = (), refresh_s: float = REFRESH_S,
                 max_stale_s: float = MAX_STALE_S, capacity: int | None = None,
                 clock: Callable[[], int] = time.monotonic_ns, autostart: bool = True) -> None:
        if not 0 < refresh_s < max_stale_s:
            raise BadInputError(f"need 0 < refresh_s < max_stale_s (a poll must come before the bound runs out), "
                                f"got refresh_s={refresh_s}, max_stale_s={max_stale_s}")
        self.catalog = catalog
        self.preload = tuple(dict.fromkeys(int(i) for i in preload))
        self._hot = frozenset(self.preload)
        self.capacity = capacity if capacity is not None else max(100, 2 * len(self.preload))
        if self.capacity < len(self.preload):
            raise BadInputError(f"capacity {self.capacity} is smaller than the {len(self.preload)} preloaded products")
        self.refresh_s, self.max_stale_s = float(refresh_s), float(max_stale_s)
        self._max_stale_ns = int(max_stale_s * 1e9)
        self._clock = clock
        self._autostart = autostart
        self._snap = Snapshot({}, 0, clock())  # empty, so back-fill works before the first poll
        self._polled = False
        self._counters: list[list[int]] = []  # one [hits, misses] per thread: each written by its own thread only
        self._local = threading.local()
        self._lock = threading.Lock()  # start/stop and counter registration only: never on a lookup
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.refreshes = self.failed_refreshes = 0
        self.last_error: str | None = None

    # -- reading -------------------------------------------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        """The snapshot readers use now (one attribute load)."""
        return self._snap

    def _count(self) -> list[int]:
        c = getattr(self._local, "c", None)
        if c is None:
            c = self._local.c = [0, 0]
            with self._lock:
                self._counters.append(c)
        return c

    def get_many(self, ids: Iterable[int], catalog: Catalog | None = None) -> dict[int, dict[str, Any]]:
        """Details of each distinct id, like ``catalog.get_many``: hits from the snapshot, misses from
        ``catalog`` (default: the cache's own) in one batch, back-filled. Unknown ids are left out."""
        if self._thread is None and self._autostart:
            self.start()
        snap = self._snap  # the one read of the shared state: everything below uses this snapshot
        age_ns = self._clock() - snap.taken_ns
        fresh = age_ns <= self._max_stale_ns
        table = snap.products
        found: dict[int, dict[str, Any]] = {}
        missing: list[int] = []
        hits = 0
        for pid in dict.fromkeys(ids):
            if fresh and pid in table:
                hits += 1
                product = table[pid]
                if product is not None:
                    found[pid] = product
            else:
                missing.append(pid)
        if missing:
            fetched = (catalog or self.catalog).get_many(missing)
            found.update(fetched)
            if fresh:  # back-fill the snapshot this lookup read (never a newer one: its entries may be older)
                room = self.capacity - len(table)
                for pid in missing[:max(0, room)]:
                    table[pid] = fetched.get(pid)
        counts = self._count()
        counts[0] += hits
        counts[1] += len(missing)
        trace.add("cache_hit", count=hits)
        trace.add("cache_miss", count=len(missing), desc=None if fresh else "snapshot too old: bypassed")
        return found

    def get(self, product_id: int, catalog: Catalog | None = None) -> dict[str, Any] | None:
        """One product's details (see :meth:`get_many`), or None if the catalog does not know it."""
        return self.get_many((int(product_id),), catalog).get(int(product_id))

    def view(self, catalog: Catalog | None = None) -> CachedCatalog:
        """A catalog client for one request: ``get``/``get_many``/``get_each`` answer through this cache, misses
        go to ``catalog`` (default: the cache's own; pass ``io=concurrent``'s fanned-out client). It adds the
        snapshot's age to the request's ``Server-Timing`` once (``cache_age``)."""
        return CachedCatalog(self, catalog or self.catalog)

    # -- refreshing ----------------------------------------------------------------------------------------------
    def refresh(self) -> Snapshot:
        """One poll of the change feed and the swap (what the background thread does every ``refresh_s``):
        the next snapshot is a copy of the current one without the products written since its version, hot
        ones refetched. The first poll preloads the hot products. Raises if the catalog does not answer."""
        old = self._snap
        taken = self._clock()  # before the poll: every entry of the result is at least this recent
        version, changed = self.catalog.changes(old.version)
        products = old.products.copy()  # one C call: atomic under the GIL, even with back-fills going on
        for pid in changed:
            products.pop(pid, None)
        want = [pid for pid in (self.preload if not self._polled else changed) if pid in self._hot
                and pid not in products]
        if want:
            fetched = self.catalog.get_many(want)
            for pid in want:
                products[pid] = fetched.get(pid)
        new = Snapshot(products, version, taken)
        self._snap = new  # the copy-on-write swap: one reference store
        self._polled = True
        self.refreshes += 1
        return new

    def start(self) -> ProductCache:
        """Start the background refresher (once; a daemon thread). Lookups start it themselves."""
        with self._lock:
            if self._thread is None:
                self._stop.clear()
                self._thread = threading.Thread(target=self._run, name="product-cache-refresh", daemon=True)
                self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the refresher (lookups go on with the last snapshot until it is too old)."""
        with self._lock:
            thread, self._thread = self._thread, None
        self._stop.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.refresh()
                self.last_error = None
                wait = self.refresh_s
            except (LabkitError, OSError, ValueError, KeyError) as exc:  # catalog down or restarting: retry soon
                self.failed_refreshes += 1
                self.last_error = f"{type(exc).__name__}: {exc}"[:300]
                wait = min(self.refresh_s, 0.05 if not self._polled else self.refresh_s)
            self._stop.wait(wait)

    def wait_until_loaded(self, timeout: float = 10.0) -> bool:
        """Start the refresher and wait for its first poll (the preload); False on timeout."""
        self.start()
        deadline = time.monotonic() + timeout
        while not self._polled and time.monotonic() < deadline:
            time.sleep(0.005)
        return self._polled

    # -- reporting -----------------------------------------------------------------------------------------------
    def stats(self) -> CacheTotals:
        """Totals since the cache was made (exact: each thread counts into its own slot)."""
        with self._lock:
            counters = [tuple(c) for c in self._counters]
        snap = self._snap
        return CacheTotals(sum(c[0] for c in counters), sum(c[1] for c in counters), self.refreshes,
                           self.failed_refreshes, len(snap.products), self.capacity, snap.version,
                           (self._clock() - snap.taken_ns) / 1e6, self.max_stale_s * 1e3, self._thread is not None)

    def __repr__(self) -> str:
        s = self.stats()
        return (f"ProductCache({s.size}/{s.capacity} products, version {s.version}, {s.hits} hits, {s.misses} misses, "
                f"age {s.age_ms:.0f} ms of at most {s.max_stale_ms:.0f})")


class CachedCatalog:
    """A catalog client that answers through a :class:`ProductCache` (one per request: :meth:`ProductCache.view`)."""

    def __init__(self, cache: ProductCache, catalog: Catalog) -> None:
        self.cache, self.catalog = cache, catalog
        self._aged = False

    @property
    def observers(self) -> list[Observer]:
        """The underlying client's observers (misses are real calls and notify them)."""
        return self.catalog.observers

    def _age(self) -> None:
        if not self._aged:
            self._aged = True
            trace.add("cache_age", self.cache._clock() - self.cache.snapshot().taken_ns)

    def get_many(self, product_ids: Iterable[int]) -> dict[int, dict[str, Any]]:
        """Like the catalog's ``get_many``, through the cache."""
        self._age()
        return self.cache.get_many([int(i) for i in product_ids], self.catalog)

    get_each = get_many

    def get(self, product_id: int) -> dict[str, Any] | None:
        """Like the catalog's ``get``, through the cache."""
        self._age()
        return self.cache.get(product_id, self.catalog)
