"""toyshop: the bundled order service that every lab measures.

Modules (import the one you need; nothing heavy is imported here, so the service starts fast):

- :mod:`labkit.toyshop.dataset`: the deterministic SQLite dataset, ``ensure(size) -> Path``
- :mod:`labkit.toyshop.db`: ``connect(path)``, a read-only ``sqlite3.Connection`` subclass
- :mod:`labkit.toyshop.catalog`: the ``Catalog`` protocol, ``CatalogClient``, ``FakeCatalog``;
  :mod:`labkit.toyshop.catalog_server`: the catalog process's app
- :mod:`labkit.toyshop.export`: ``export_naive`` / ``export_batched`` / ``export_join`` (one signature)
- :mod:`labkit.toyshop.app`: the order service (Starlette), its endpoints, over its state in
  :mod:`labkit.toyshop.state` (connections, the pool, the caches); they answer through
  :mod:`labkit.toyshop.pipeline`, ``/stats`` counts in :mod:`labkit.toyshop.inflight`, ``/quote`` and
  ``/statement`` read and render with :mod:`labkit.toyshop.quote` and :mod:`labkit.toyshop.statement`
- :mod:`labkit.toyshop.backends`: the real servers some switches put behind it (a private PostgreSQL, a private
  Redis); :mod:`labkit.toyshop.redisstore`: the products kept in that Redis (``store=redis``),
  :mod:`labkit.toyshop.rediscache`: cached there (``cache=redis``)
- :mod:`labkit.toyshop.switches`: its switches (the one table; for users: ``docs/switches.md``)
- :mod:`labkit.toyshop.core`: the performance core (pricing, encoding, caching)

Start both processes with :func:`labkit.service.start`.
"""

__all__: list[str] = []  # a face of modules only: import the one you need
