"""The labs, declared once: each notebook's QUICK budget (``tests/test_notebooks.py`` holds each QUICK run to it).

How long a lab's cells ran when measured here, and the hub culler's check against that, are
:mod:`labkit.workshop.culler`'s.
"""

from __future__ import annotations

__all__ = ["QUICK_BUDGET_S"]

#: seconds each notebook's QUICK run may take on a 2-core machine (LABS.md: 90 s for a lab)
QUICK_BUDGET_S: dict[str, float] = {
    "index.ipynb": 30,
    "00_method.ipynb": 90,
    "01_latency_numbers.ipynb": 90,
    "02_nplusone.ipynb": 90,
    "03_preallocation.ipynb": 90,
    "04_data_layout.ipynb": 90,
    "05_serialization.ipynb": 90,
    "06_gc_profiling.ipynb": 90,
    "07_tail_latency.ipynb": 90,
    "08_capstone.ipynb": 90,
    "09_contention.ipynb": 90,
}
