"""The N+1 report: a value holding every recorded query, with shapes, totals and suspects derived from it."""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from labkit.nplusone.shapes import normalise_sql, normalise_url
from labkit.results import Saveable, jsonable

__all__ = ["Query", "ShapeStats", "Report", "DEFAULT_THRESHOLD"]

DEFAULT_THRESHOLD = 5  # more than 5 repeats of one shape in a block is a suspect (nplusone/zeal practice)


# Cheap pre-normalisation used as the cache key, so that statements differing only in ids share one cache
# entry (the full tokenizer is far slower than these regexes). Only applied where it cannot change the final shape.
_URL_IDS = re.compile(r"(?<=/)\d+(?=/|\?|$)|(?<==)\d+(?:,\d+)+(?=&|$)|(?<==)\d+(?=&|$)")
_UNSAFE_FOR_KEY = re.compile(r"--|/\*|[\"`\[]|\w'")  # comments, quoted identifiers, x'..' blobs
_SQL_LITERALS = re.compile(r"'(?:[^']|'')*'|(?<![\w.])\d+(?:\.\d+)?(?![\w.])")


def _url_key(m: re.Match[str]) -> str:
    text = m.group()
    return "{ids}" if "," in text else "{id}"


_EXACT: dict[tuple[str, str], str] = {}  # statement -> shape, for statements seen verbatim before


def shape_of(kind: str, statement: str) -> str:
    """Shape of one recorded statement (``"GET http://…"`` for HTTP, SQL otherwise); cached."""
    shape = _EXACT.get((kind, statement))
    if shape is not None:
        return shape
    if kind == "http":
        shape = _shape_cached(kind, _URL_IDS.sub(_url_key, statement))
    elif not _UNSAFE_FOR_KEY.search(statement):
        shape = _shape_cached(kind, _SQL_LITERALS.sub("?", statement))
    else:
        shape = _shape_cached(kind, statement)
    if len(_EXACT) > 20_000:  # bounded: statements with literals inline are endless
        _EXACT.clear()
    _EXACT[(kind, statement)] = shape
    return shape


@functools.lru_cache(maxsize=4096)
def _shape_cached(kind: str, statement: str) -> str:
    if kind == "http":
        method, _, url = statement.partition(" ")
        return normalise_url(url, method)
    return normalise_sql(statement)


class Query(NamedTuple):
    """One recorded query or HTTP call (a named tuple: cheap to build while recording, immutable).

    Attributes:
        kind: ``"sql"`` or ``"http"``.
        target: which watched object issued it (``"sqlite"``, ``"sqlalchemy:sqlite"``, ``"http:CatalogClient"``).
        statement: the SQL text or ``"METHOD url"`` as issued.
        params: ``repr`` of the bound parameters ("" when none or not visible).
        shape: the normalised statement (see ``labkit.nplusone.shapes``).
        start_ns: start, relative to the start of the watched block.
        duration_ns: how long it took, measured as ``timing`` says.
        site: ``file:line`` of the code that issued it.
        timing: ``"call"``, ``"vm"``, ``"hook"`` or ``"observer"`` (see ``labkit.nplusone.taps``).
    """

    kind: str
    target: str
    statement: str
    params: str
    shape: str
    start_ns: int
    duration_ns: int
    site: str
    timing: str


@dataclass(frozen=True)
class ShapeStats:
    """All queries of one shape: how many, how long in total, and from where (most frequent site first)."""

    shape: str
    kind: str
    count: int
    total_ns: int
    sites: tuple[tuple[str, int], ...]
    suspect: bool

    @property
    def site(self) -> str:
        """The call site that issued most of this shape's queries."""
        return self.sites[0][0] if self.sites else "?"

    @property
    def mean_ns(self) -> float:
        """Mean duration of one query of this shape."""
        return self.total_ns / self.count if self.count else 0.0


@dataclass(frozen=True, repr=False)
class Report(Saveable):
    """What a ``watch`` block saw.

    Attributes:
        queries: every query in the order issued.
        wall_ns: wall time of the block.
        threshold: a shape repeated more than this many times is a suspect.
        label: free text (the function name for the decorator form).
        fingerprint: environment fingerprint, filled when saved.
    """

    KIND = "labkit.nplusone.report"

    queries: tuple[Query, ...]
    wall_ns: int
    threshold: int = DEFAULT_THRESHOLD
    label: str = ""
    fingerprint: dict[str, Any] = field(default_factory=dict, compare=False)

    @classmethod
    def deferred(cls, build: Callable[[], tuple[Query, ...]], wall_ns: int, threshold: int = DEFAULT_THRESHOLD,
                 label: str = "") -> Report:
        """A report whose ``queries`` are made by ``build()`` when first read (a recorder's raw buffer is
        turned into ``Query`` values then, not at the end of the watched block)."""
        report = object.__new__(cls)
        report.__dict__.update(_build=build, wall_ns=wall_ns, threshold=threshold, label=label, fingerprint={})
        return report

    def __getattr__(self, name: str) -> Any:
        # only reached while ``queries`` is not built yet (a deferred report)
        build = self.__dict__.get("_build")
        if name != "queries" or build is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        queries = build()
        object.__setattr__(self, "queries", queries)
        self.__dict__.pop("_build", None)
        return queries

    @functools.cached_property
    def shapes(self) -> tuple[ShapeStats, ...]:
        """Per-shape statistics, worst first: suspects before the rest, then by total time."""
        count: Counter[str] = Counter()
        total: Counter[str] = Counter()
        sites: dict[str, Counter[str]] = {}
        kinds: dict[str, str] = {}
        for q in self.queries:
            count[q.shape] += 1
            total[q.shape] += q.duration_ns
            sites.setdefault(q.shape, Counter())[q.site] += 1
            kinds[q.shape] = q.kind
        stats = [
            ShapeStats(s, kinds[s], n, total[s], tuple(sites[s].most_common()), n > self.threshold)
            for s, n in count.items()
        ]
        stats.sort(key=lambda st: (not st.suspect, -st.total_ns, -st.count, st.shape))
        return tuple(stats)

    @property
    def suspects(self) -> tuple[ShapeStats, ...]:
        """Shapes repeated more than ``threshold`` times: N+1 candidates, worst first."""
        return tuple(s for s in self.shapes if s.suspect)

    @property
    def count(self) -> int:
        """Number of queries recorded."""
        return len(self.queries)

    @property
    def query_ns(self) -> int:
        """Wall time during which at least one query was running (overlaps counted once)."""
        busy = 0
        end = None
        for q in sorted(self.queries, key=lambda q: q.start_ns):
            s, e = q.start_ns, q.start_ns + q.duration_ns
            if end is None or s >= end:
                busy += e - s
                end = e
            elif e > end:
                busy += e - end
                end = e
        return busy

    @property
    def query_share(self) -> float:
        """Share of the block's wall time spent waiting on queries (0…1)."""
        return min(1.0, self.query_ns / self.wall_ns) if self.wall_ns > 0 else 0.0

    @property
    def clean(self) -> bool:
        """True when no shape is a suspect."""
        return not self.suspects

    def to_frame(self) -> Any:
        """One row per query (pandas DataFrame), with a ``suspect`` column."""
        import pandas as pd

        cols = list(Query._fields)
        bad = {s.shape for s in self.suspects}
        frame = pd.DataFrame(self.queries, columns=cols)
        frame["suspect"] = frame["shape"].isin(bad)
        return frame

    def shapes_frame(self) -> Any:
        """One row per shape, worst first (pandas DataFrame)."""
        import pandas as pd

        rows = [
            {"shape": s.shape, "kind": s.kind, "count": s.count, "total_ns": s.total_ns, "mean_ns": s.mean_ns,
             "site": s.site, "suspect": s.suspect}
            for s in self.shapes
        ]
        return pd.DataFrame(rows, columns=["shape", "kind", "count", "total_ns", "mean_ns", "site", "suspect"])

    def to_dict(self) -> dict[str, Any]:
        """The shared result format (``kind``, ``version``); each query as a dict of its fields; the environment
        fingerprint is taken now if the report has none (recording skips it: it costs more than a block)."""
        from labkit.machine import fingerprint

        data = super().to_dict()
        data["queries"] = [q._asdict() for q in self.queries]
        data["fingerprint"] = jsonable(self.fingerprint or fingerprint())
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Report:
        """Inverse of ``to_dict``; raises ResultsError on another kind or a newer version."""
        cls.check_header(data)
        return cls(
            queries=tuple(Query(**q) for q in data["queries"]),
            wall_ns=int(data["wall_ns"]),
            threshold=int(data["threshold"]),
            label=data.get("label", ""),
            fingerprint=dict(data.get("fingerprint") or {}),
        )

    def __str__(self) -> str:
        from labkit.nplusone.render import render_text

        return render_text(self)

    def __repr__(self) -> str:
        return (f"<Report {self.label + ': ' if self.label else ''}{self.count} queries, {len(self.shapes)} shapes, "
                f"{len(self.suspects)} suspects, threshold {self.threshold}>")

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self) if cycle else str(self))

    def _repr_html_(self) -> str:
        from labkit.nplusone.render import render_html

        return render_html(self)
