"""The N+1 report: a value holding every recorded query, with shapes, totals and suspects derived from it."""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from labkit.nplusone.shapes import batch_size, normalise_command, normalise_sql, normalise_url
from labkit.results import Saveable, jsonable

__all__ = ["Query", "ShapeStats", "Report", "DEFAULT_THRESHOLD"]

# A shape sent more than DEFAULT_THRESHOLD times from one calling line (in one calling context, not batched) in
# one block is a suspect. 1: a loop that ran twice already shows the pattern, and that is the peers' rule too:
# django-zeal alerts when one (model, field, file, line) key reaches ZEAL_NPLUSONE_THRESHOLD calls, default 2
# (zeal/listeners.py, NPlusOneListener.notify: `count >= threshold`), and nplusone flags any lazy load on a row
# of a multi-row result. Repeats of a fixed, small count are then suspects too; raise the threshold where only
# longer loops matter (lab 02's grader passes threshold=5).
DEFAULT_THRESHOLD = 1


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
    """Shape of one recorded statement (``"GET http://…"`` for HTTP, a command for Redis, SQL otherwise); cached."""
    shape = _EXACT.get((kind, statement))
    if shape is not None:
        return shape
    if kind == "http":
        shape = _shape_cached(kind, _URL_IDS.sub(_url_key, statement))
    elif kind == "redis":
        shape = _shape_cached(kind, statement)
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
    if kind == "redis":
        return normalise_command(statement)
    return normalise_sql(statement)


class Query(NamedTuple):
    """One recorded query or HTTP call (a named tuple: cheap to build while recording, immutable).

    Attributes:
        kind: ``"sql"``, ``"http"`` or ``"redis"``.
        target: which watched object issued it (``"sqlite"``, ``"sqlalchemy:sqlite"``, ``"http:CatalogClient"``).
        statement: the SQL text or ``"METHOD url"`` as issued.
        params: ``repr`` of the bound parameters ("" when none or not visible).
        shape: the normalised statement (see ``labkit.nplusone.shapes``).
        start_ns: start, relative to the start of the watched block.
        duration_ns: how long it took, measured as ``timing`` says.
        site: ``file:line`` of the code that issued it (the first frame in your code, see
            ``labkit.nplusone.sites``).
        timing: ``"call"``, ``"vm"``, ``"hook"`` or ``"observer"`` (see ``labkit.nplusone.taps``).
        caller: ``file:line`` of the frame that called *site*'s function ("" when none).
        fetch: *site* was a ``for`` loop fetching its next item: the query is the iterable's own (chunked)
            load, not the loop body's.
        site_at, caller_at: the expression of *site* and of *caller* on their lines, as columns ``"start-end"``
            ("" when not known, as in files saved before version 3): a repeat is the same *expression* run
            again, so ``node.parent.parent`` — two relations on one line — is two places, not a loop of two.
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
    caller: str = ""
    fetch: bool = False
    site_at: str = ""
    caller_at: str = ""


@dataclass(frozen=True)
class ShapeStats:
    """All queries of one shape: how many, how long in total, and from where.

    Attributes:
        shape, kind: the normalised statement and ``"sql"``, ``"http"`` or ``"redis"``.
        count, total_ns: every query of this shape in the block, from all lines.
        sites: ``(file:line, count)`` per calling line, the suspect lines first, then the busiest.
        suspect: some line sent this shape more than the threshold times, one item at a time.
        repeats: the most queries of this shape sent one item at a time from one calling line (in one calling
            context): what the threshold is compared with. Queries carrying a list of two or more ids
            (``IN (…)``, ``?ids=…``) and those sent by a ``for`` loop fetching its next item are batches and do
            not count.
    """

    shape: str
    kind: str
    count: int
    total_ns: int
    sites: tuple[tuple[str, int], ...]
    suspect: bool
    repeats: int = 0

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
        threshold: a shape sent more than this many times from one calling line, one item at a time, is a
            suspect (see ``ShapeStats.repeats``).
        label: free text (the function name for the decorator form).
        fingerprint: environment fingerprint, filled when saved.
    """

    KIND = "labkit.nplusone.report"
    VERSION = 3  # 2: each query's caller and fetch (version 1 files load with "" and False); 3: the columns of
    # its site's and caller's expressions (version 1 and 2 files load with "", so they group by line)

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
    def _groups(self) -> dict[tuple[str, str, str, str, str], list[int]]:
        """Queries (their indices) by shape, calling expression and caller's: one group per place a shape is sent
        from (two expressions on one line are two places)."""
        groups: dict[tuple[str, str, str, str, str], list[int]] = {}
        for i, q in enumerate(self.queries):
            groups.setdefault((q.shape, q.site, q.caller, q.site_at, q.caller_at), []).append(i)
        return groups

    @functools.cached_property
    def _repeats(self) -> dict[tuple[str, str, str, str, str], int]:
        """Per group, how many of its queries were sent one item at a time (0 for a batched load)."""
        queries = self.queries
        out = {}
        for key, members in self._groups.items():
            n = len(members)
            if n > self.threshold:  # only a candidate needs its statements read
                first = queries[members[0]]
                # else no list to count (a Redis command: its keys, a pipeline's commands)
                listed = "IN (...)" in first.shape or "{ids}" in first.shape or first.kind == "redis"
                if any(queries[i].fetch for i in members) or listed and any(
                        batch_size(first.kind, queries[i].statement) >= 2 for i in members):
                    n = 0
            out[key] = n
        return out

    @functools.cached_property
    def shapes(self) -> tuple[ShapeStats, ...]:
        """Per-shape statistics, worst first: suspects before the rest, then by total time."""
        count: Counter[str] = Counter()
        total: Counter[str] = Counter()
        sites: dict[str, Counter[str]] = {}
        worst: dict[str, Counter[str]] = {}  # per shape and line: the most single-item repeats
        kinds: dict[str, str] = {}
        for q in self.queries:
            count[q.shape] += 1
            total[q.shape] += q.duration_ns
            sites.setdefault(q.shape, Counter())[q.site] += 1
            kinds[q.shape] = q.kind
        for (shape, site, *_where), n in self._repeats.items():
            line = worst.setdefault(shape, Counter())
            line[site] = max(line[site], n)
        stats = []
        for s, n in count.items():
            rep = worst[s]
            by_line = sorted(sites[s].items(), key=lambda kv: (-(rep[kv[0]] > self.threshold), -kv[1], kv[0]))
            top = max(rep.values())
            stats.append(ShapeStats(s, kinds[s], n, total[s], tuple(by_line), top > self.threshold, top))
        stats.sort(key=lambda st: (not st.suspect, -st.total_ns, -st.count, st.shape))
        return tuple(stats)

    @property
    def suspects(self) -> tuple[ShapeStats, ...]:
        """Shapes sent more than ``threshold`` times from one calling line, one item at a time: N+1
        candidates, worst first (see ``ShapeStats.repeats``)."""
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
        bad = [False] * len(self.queries)
        for key, members in self._groups.items():
            if self._repeats[key] > self.threshold:
                for i in members:
                    bad[i] = True
        frame = pd.DataFrame(self.queries, columns=cols)
        frame["suspect"] = bad
        return frame

    def shapes_frame(self) -> Any:
        """One row per shape, worst first (pandas DataFrame)."""
        import pandas as pd

        rows = [
            {"shape": s.shape, "kind": s.kind, "count": s.count, "repeats": s.repeats, "total_ns": s.total_ns,
             "mean_ns": s.mean_ns, "site": s.site, "suspect": s.suspect}
            for s in self.shapes
        ]
        return pd.DataFrame(rows, columns=["shape", "kind", "count", "repeats", "total_ns", "mean_ns", "site",
                                           "suspect"])

    def to_dict(self) -> dict[str, Any]:
        """The shared result format (``kind``, ``version``); each query as a dict of its fields; the environment
        fingerprint is taken now if the report has none (recording skips it: it costs more than a block)."""
        from labkit.measure.machine import fingerprint

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
