"""``GET /recommendations?customer_id=ID``: popular products a customer has not bought yet — an ``async``
endpoint with a deliberate blocking call in it, for lab 09's event-loop section (request switch
``loop=blocking|thread``).

The endpoint reads the customer's order lines on the pool (:func:`bought`), then asks the recommender
(:func:`recommend`). The recommender stands for a call a real service makes to a model or another service
with a *synchronous* client — here ``time.sleep(RECOMMENDER_S)`` stands for its round trip, said so wherever it
is used. ``loop=blocking`` (the mistake) calls it on the event loop: for its duration the loop runs nothing
else, so every request in flight and every timer waits (``GET /loop`` shows the lag). ``loop=thread`` hands it
to a worker thread (``anyio.to_thread.run_sync``, the twin of ``asyncio.to_thread``), and the loop serves
others meanwhile.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence

from labkit.toyshop.db import NotFoundError

__all__ = ["bought", "recommend", "RECOMMENDER_S", "PICKS"]

RECOMMENDER_S = 0.003  #: the emulated recommender's round trip (seconds, a ``time.sleep``)
PICKS = 5  #: products recommended per answer


def bought(conn: sqlite3.Connection, customer_id: int) -> frozenset[int]:
    """The ids of every product the customer has ordered; :class:`NotFoundError` for an unknown customer."""
    if conn.execute("SELECT 1 FROM customers WHERE id = ?", (customer_id,)).fetchone() is None:
        raise NotFoundError(f"no customer with id {customer_id}")
    rows = conn.execute("SELECT DISTINCT i.product_id FROM orders o JOIN order_items i ON i.order_id = o.id "
                        "WHERE o.customer_id = ?", (customer_id,)).fetchall()
    return frozenset(r[0] for r in rows)


def recommend(owned: frozenset[int], popular: Sequence[int], n: int = PICKS) -> list[int]:
    """The first ``n`` of ``popular`` not in ``owned`` — after a blocking ``time.sleep(RECOMMENDER_S)`` that
    stands for a synchronous call to a recommender service (an emulation)."""
    time.sleep(RECOMMENDER_S)
    return [p for p in popular if p not in owned][:n]
