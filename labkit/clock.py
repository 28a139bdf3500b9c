"""``Clock``: what every timing function in labkit takes as its clock — a zero-argument callable returning ns.

The default is ``time.perf_counter_ns``; tests inject a fake one that moves only when told, so they can
assert exact numbers. Kept in a module of its own (no imports beyond the standard library) so that even the
service's request path can use it without pulling in numpy.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["Clock"]

Clock = Callable[[], int]
