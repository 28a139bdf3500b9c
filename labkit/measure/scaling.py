"""How a function's cost grows with its input: a size sweep, time per item, bytes per second, crossovers.

    sw = sweep_sizes({"csv": parse_csv, "pandas": parse_pandas}, sizes=(1_000, 10_000, 100_000),
                     make_input=lambda n: make_csv(rows=n))
    sw.to_frame()              # name, size, median_ns, ns_per_item, bytes, bytes_per_s
    sw.crossover("csv", "pandas")   # the size where their medians cross (None if they never do)

Each size's input is made once by ``make_input(size)`` (not timed) and every candidate is timed on it with
:func:`labkit.bench`, the candidates in turn at each size. ``size`` counts the items (rows, records); bytes
per second needs the input's size in bytes, found for ``bytes``/``str``/NumPy arrays/existing file paths or
given by ``nbytes=``. The crossover is where the two *medians* cross, interpolated linearly between the two
sizes that bracket it — a reading of the curves, not a significance test: confirm a decision at the sizes
that matter with :func:`labkit.compare`.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from labkit.clock import Clock
from labkit.errors import BadInputError
from labkit.measure.machine import fingerprint
from labkit.measure.microbench import bench
from labkit.measure.stats import format_duration
from labkit.progress import LazySteps
from labkit.results import Saveable

__all__ = ["SizeSweep", "sweep_sizes", "size_in_bytes"]


def size_in_bytes(x: Any) -> int | None:
    """The input's size in bytes where it has an obvious one: bytes-like, text (UTF-8), a NumPy array, or the
    path of an existing file (or a one-item tuple of those); None otherwise."""
    if isinstance(x, tuple) and len(x) == 1:
        x = x[0]
    if isinstance(x, bytes | bytearray | memoryview):
        return len(x)
    if isinstance(x, str) and not os.path.isfile(x):
        return len(x.encode())
    if isinstance(x, np.ndarray):
        return int(x.nbytes)
    if isinstance(x, str | Path) and os.path.isfile(x):
        return os.path.getsize(x)
    return None


@dataclass(frozen=True)
class SizeSweep(Saveable):
    """Candidates timed at several input sizes (from :func:`sweep_sizes`).

    Attributes:
        names: the candidates, in order.
        sizes: the input sizes (items), ascending.
        samples_ns: ``samples_ns[c][s]``: per-call samples of candidate ``c`` at size ``s``.
        nbytes: each size's input in bytes (None where unknown).
    """

    KIND = "size-sweep"

    names: tuple[str, ...]
    sizes: tuple[int, ...]
    samples_ns: tuple[tuple[tuple[float, ...], ...], ...]
    nbytes: tuple[int | None, ...]
    fingerprint: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SizeSweep:
        """Rebuild from :meth:`to_dict` output (the samples nest three deep)."""
        sweep = super().from_dict(data)
        deep = tuple(tuple(tuple(float(v) for v in s) for s in c) for c in data.get("samples_ns", ()))
        return dataclasses.replace(sweep, samples_ns=deep)

    def _index(self, name: str) -> int:
        if name not in self.names:
            raise BadInputError(f"no candidate {name!r} in this sweep; its candidates are {', '.join(self.names)}")
        return self.names.index(name)

    def medians_ns(self, name: str) -> np.ndarray:
        """The median per-call time of ``name`` at each size."""
        return np.array([float(np.median(s)) for s in self.samples_ns[self._index(name)]])

    def ns_per_item(self, name: str) -> np.ndarray:
        """Median time per item (ns) at each size: flat for a linear cost, falling when a fixed cost dominates."""
        return self.medians_ns(name) / np.asarray(self.sizes, dtype=float)

    def bytes_per_s(self, name: str) -> np.ndarray:
        """Throughput at each size (NaN where the input's bytes are unknown)."""
        b = np.array([np.nan if n is None else float(n) for n in self.nbytes])
        return b / (self.medians_ns(name) / 1e9)

    def crossover(self, a: str, b: str) -> float | None:
        """The size where the medians of ``a`` and ``b`` cross, interpolated between the two sizes that bracket
        the first change of which one is faster; None when one is faster (or they tie) at every size."""
        d = self.medians_ns(a) - self.medians_ns(b)
        for i in range(len(d) - 1):
            if d[i] == 0:
                return float(self.sizes[i])
            if (d[i] < 0) != (d[i + 1] < 0) and d[i + 1] != 0:
                s0, s1 = self.sizes[i], self.sizes[i + 1]
                return float(s0 + (s1 - s0) * d[i] / (d[i] - d[i + 1]))
        return None

    def to_frame(self) -> Any:
        """One row per candidate and size: name, size, median_ns, ns_per_item, bytes, bytes_per_s."""
        import pandas as pd

        rows = []
        for name in self.names:
            med, per, bps = self.medians_ns(name), self.ns_per_item(name), self.bytes_per_s(name)
            rows += [(name, s, med[i], per[i], self.nbytes[i], bps[i]) for i, s in enumerate(self.sizes)]
        return pd.DataFrame(rows, columns=["name", "size", "median_ns", "ns_per_item", "bytes", "bytes_per_s"])

    def __str__(self) -> str:
        lines = []
        for name in self.names:
            med, per = self.medians_ns(name), self.ns_per_item(name)
            cells = ", ".join(f"{s:,}: {format_duration(m)} ({format_duration(p)}/item)"
                              for s, m, p in zip(self.sizes, med, per, strict=True))
            lines.append(f"{name}: {cells}")
        for i, a in enumerate(self.names):
            for b in self.names[i + 1:]:
                x = self.crossover(a, b)
                if x is not None:
                    lines.append(f"{a} and {b} cross near size {x:,.0f} (medians, interpolated)")
        return "\n".join(lines)


def sweep_sizes(candidates: Callable[..., Any] | Sequence[Callable[..., Any]] | Mapping[str, Callable[..., Any]],
                sizes: Sequence[int], make_input: Callable[[int], Any], *, nbytes: Callable[[Any], int] | None = None,
                repeat: int = 7, min_sample_time: float = 0.001, clock: Clock = time.perf_counter_ns,
                progress: bool | None = None) -> SizeSweep:
    """Time each candidate on inputs of each size.

    Args:
        candidates: one function, several, or ``{name: function}``; each is called as ``fn(x)``, or
            ``fn(*x)`` when ``make_input`` returns a tuple.
        sizes: input sizes in items (positive integers), timed smallest first.
        make_input: builds the input of a size (not timed; once per size, shared by the candidates).
        nbytes: the input's size in bytes, for throughput (default: :func:`size_in_bytes`).
        repeat, min_sample_time, clock: as in :func:`labkit.bench`, per candidate and size.
        progress: a bar over the (size, candidate) steps, saying which one runs and for how long, at least every
            30 s (:class:`labkit.progress.LazySteps`: in a notebook once the sweep proves long, and on the terminal
            of a ``labkit report``). It is redrawn from another thread every 10 s during a step: a sample that
            redraw lands in is longer by it, which the medians reported here do not follow.

    Raises:
        BadInputError: no candidate, a candidate that is not callable, or sizes that are not positive integers.
    """
    if callable(candidates):
        named = {getattr(candidates, "__name__", "candidate"): candidates}
    elif isinstance(candidates, Mapping):
        named = dict(candidates)
    else:
        named = {}
        for i, f in enumerate(candidates):
            name = getattr(f, "__name__", f"candidate {i + 1}")
            named[name if name not in named else f"{name} ({i + 1})"] = f
    if not named or not all(callable(f) for f in named.values()):
        raise BadInputError("sweep_sizes needs one or more functions (or {name: function}) to time")
    if not sizes or not all(isinstance(s, int | np.integer) and not isinstance(s, bool) and s > 0 for s in sizes):
        raise BadInputError(f"sizes must be positive whole numbers of items, e.g. (1_000, 10_000), got {sizes!r}")
    order = sorted(int(s) for s in sizes)
    samples: list[list[tuple[float, ...]]] = [[] for _ in named]
    found: list[int | None] = []
    steps = LazySteps(progress, len(order) * len(named), "size sweep", "step")
    try:
        for size in order:
            with steps.during(f"making the input of size {size:,}"):
                x = make_input(size)
            args = x if isinstance(x, tuple) else (x,)
            found.append(nbytes(x) if nbytes is not None else size_in_bytes(x))
            for i, (label, fn) in enumerate(named.items()):
                with steps.during(f"{label} at size {size:,}"):
                    r = bench(fn, *args, repeat=repeat, min_sample_time=min_sample_time, clock=clock)
                samples[i].append(r.samples_ns)
                steps.done(f"{label} at {size:,}: {format_duration(r.median_ns)}")
    finally:
        steps.close()
    return SizeSweep(tuple(named), tuple(order), tuple(tuple(s) for s in samples), tuple(found), fingerprint())
