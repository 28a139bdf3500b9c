"""The measurement core: clocks' statistics, microbenchmarks, A/B comparisons, size sweeps, where a side runs, the
collector during a measurement, and the machine's fingerprint with its cgroup readers.

The names labs use are re-exported by :mod:`labkit` itself (``labkit.compare``, ``labkit.bench``,
``labkit.sweep_sizes``, ``labkit.fingerprint``); each module keeps its old name too (``labkit.stats`` is
``labkit.measure.stats``).
"""

from labkit.lazy import submodules as _submodules

__all__: list[str] = []  # a family of modules, each imported by its own name
__getattr__ = _submodules(__name__, __path__)
