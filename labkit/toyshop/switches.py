"""toyshop's switches, declared once: the table that checking, start-up, presets, the OpenAPI schema and the
reference page (``docs/switches.md``) are all read from.

Each :class:`Switch` names its values with the slow baseline first (the default), or an integer range with a
default. *Request* switches may be set at start (as the process default) and overridden per request with a
query parameter, so A and B can be interleaved against one warm process
(``/customers/1/export?n1=batched&codec=orjson``). *Process* switches are chosen at start only, because they
change the process itself (garbage collector, thread pool). ``core=True`` marks the switches the performance
core reads itself: :data:`labkit.toyshop.core.VARIANTS` is their view, importable without the service.

    SWITCHES["n1"].values                 ('naive', 'batched', 'join')
    check("n1", "join")                   'join', or BadInputError naming the switch, the value and the choices
    resolve({"n1": "join", "pool": 2})    every switch, defaults filled in and values checked (start-up)
    with_preset(defaults, {"preset": "all", "cache": "none"})   a request's switches, the preset applied

This module imports nothing of the service, so the core can import it. To regenerate the reference page after
changing the table: ``python -m labkit.toyshop.switches > docs/switches.md`` (a test compares them).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal

from labkit.errors import BadInputError

__all__ = ["Switch", "TABLE", "SWITCHES", "REQUEST_SWITCHES", "PROCESS_SWITCHES", "PRESETS", "check", "resolve",
           "with_preset", "reference_page"]


@dataclass(frozen=True)
class Switch:
    """One switch: its name, its values (or an integer range) with the default, its scope, its lesson, what it does.

    Attributes:
        name: the query parameter / ``variants=`` key.
        scope: ``request`` (a process default, overridable per request) or ``process`` (start only).
        lesson: the notebook (stem under ``notebooks/``) whose lesson the switch belongs to.
        does: one line of what it does, value by value.
        values: the allowed values, the default (the slow baseline) first; empty for an integer switch.
        range: ``(low, high)`` allowed for an integer switch, inclusive.
        default: an integer switch's default (a choice switch's is its first value).
        hint: what an error about a bad value adds (the integer switches' rules of thumb).
        core: the performance core reads it (:data:`labkit.toyshop.core.VARIANTS`).
        acts_in: the modules of ``labkit.toyshop`` that read its value (``"pipeline"``, ``"core.pricing"``), where
            the switch changes what the service does; ``tests/test_switches.py`` holds the list to the code.
    """

    name: str
    scope: Literal["request", "process"]
    lesson: str
    does: str
    values: tuple[str, ...] = ()
    range: tuple[int, int] | None = None
    default: str | int = ""
    hint: str = ""
    core: bool = False
    acts_in: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.values and self.range is None:
            raise ValueError(f"switch {self.name!r}: give values, an integer range, or both")
        if self.values and self.range is None:
            object.__setattr__(self, "default", self.values[0])

    @property
    def choices(self) -> str:
        """The allowed values as a user reads them: ``naive, batched, join``, ``an integer 1–1024``, or both
        (``unbounded, or an integer 0–1000000``)."""
        if self.range is not None:
            number = f"an integer {self.range[0]}–{self.range[1]}"
            return f"{', '.join(self.values)}, or {number}" if self.values else number
        return ", ".join(self.values)

    def check(self, value: Any) -> Any:
        """``value`` if allowed (an integer switch's as an int: ``"2"`` → 2; a named value of a switch that also
        takes integers as given), else raise BadInputError saying what is allowed and the default."""
        if self.range is not None:
            if self.values and value in self.values:
                return value
            lo, hi = self.range
            if isinstance(value, bool) or not isinstance(value, int | str) or not str(value).isdigit() \
                    or not lo <= int(value) <= hi:
                raise BadInputError(f"variant {self.name}={value!r}: must be {self.choices}, default {self.default} "
                                    f"({self.hint})")
            return int(value)
        if value not in self.values:
            raise BadInputError(f"bad value {value!r} for switch {self.name!r}: use one of {self.choices} "
                                f"(default {self.default!r})")
        return value


#: the capstone's two configurations (lab 08). ``all`` keeps the JSON format and every product field: the
#: fixes change how the answer is made, never what it says (trimming fields is a change of contract).
PRESETS: Mapping[str, Mapping[str, str]] = MappingProxyType({
    "baseline": MappingProxyType({"n1": "naive", "io": "serial", "codec": "json", "compress": "none",
                                  "fields": "full", "cache": "none", "log": "sync", "hop": "pool",
                                  "layout": "aos", "buffers": "grow"}),
    "all": MappingProxyType({"n1": "join", "io": "concurrent", "codec": "orjson", "compress": "none",
                             "fields": "full", "cache": "local", "log": "queued", "hop": "inline",
                             "layout": "soa", "buffers": "prealloc"}),
})

_R, _P = "request", "process"
#: every switch, in the order responses list them (``X-Variant``, ``/health``).
TABLE: tuple[Switch, ...] = (
    Switch("n1", _R, "02_nplusone", "N+1 queries and catalog calls (naive) vs batched IN (...) vs one JOIN",
           ("naive", "batched", "join"),
           acts_in=("app",)),
    Switch("io", _R, "02_nplusone", "catalog batches one after another vs fanned out on threads (batched and "
                                    "join exports, orders; naive stays one call at a time)", ("serial", "concurrent"),
           acts_in=("state",)),
    Switch("layout", _R, "04_data_layout", "quote pricing over per-line dicts vs NumPy columns", ("aos", "soa"),
           core=True,
           acts_in=("app", "core.pricing")),
    Switch("buffers", _R, "03_preallocation", "fresh containers per call vs reused per-thread buffers; pooled "
                                             "(statements only): a shared pool with a deliberate stale-state bug",
           ("grow", "prealloc", "pooled"), core=True,
           acts_in=("app", "core.pricing", "statement")),
    Switch("codec", _R, "05_serialization", "the encoder (the format comes from the Accept header; protobuf: "
                                            "export and order only)",
           ("json", "orjson", "msgspec", "msgpack", "protobuf"), core=True,
           acts_in=("pipeline",)),
    Switch("compress", _R, "05_serialization", "asks for a response compression (Content-Encoding), sent only "
                                               "if the request's Accept-Encoding accepts it, else identity "
                                               "(X-Variant says which)", ("none", "gzip", "zstd"), core=True,
           acts_in=("pipeline",)),
    Switch("fields", _R, "05_serialization", "every product field per item (32) vs the 8 a client shows",
           ("full", "trimmed"), core=True,
           acts_in=("app", "core.encoding")),
    Switch("cache", _R, "08_capstone", "config lookups and product details every time from SQLite and the "
                                       "catalog vs in-process caches; redis: product details from a Redis "
                                       "server (a round trip and a decode per lookup; the service must be "
                                       "started with cache=redis)", ("none", "local", "redis"), core=True,
           acts_in=("app", "core.cache", "state")),
    Switch("log", _R, "08_capstone", "access log: none (keeps other labs' measurements unchanged) / written on "
                                     "the request path / queued to a listener thread", ("off", "sync", "queued"),
           acts_in=("pipeline",)),
    Switch("hop", _R, "08_capstone", "SQLite work always handed to a pool thread vs run on the event loop unless "
                                     "it needs the network (a catalog call)", ("pool", "inline"),
           acts_in=("state",)),
    Switch("stats", _R, "09_contention", "per-request statistics: none (keeps other labs' measurements "
                                         "unchanged) / under one process-wide lock held for the whole update / "
                                         "the lock held only to merge / per-thread shards merged on read / "
                                         "queued to a background thread (GET /tally)",
           ("off", "locked", "short", "sharded", "queued"),
           acts_in=("state",)),
    Switch("loop", _R, "09_contention", "GET /recommendations' blocking recommender call made on the event loop "
                                        "vs handed to a worker thread (GET /loop: the loop's lag)",
           ("blocking", "thread"),
           acts_in=("app",)),
    Switch("preset", _R, "08_capstone", "none: each switch as given; baseline / all: the capstone's slow "
                                        "configuration / every request-level fix (a switch given beside it wins)",
           ("none", *PRESETS),
           acts_in=("pipeline",)),
    Switch("gc", _P, "06_gc_profiling", "default: CPython's collector as it is; frozen: gc.collect() then "
                                          "gc.freeze() once the service has answered 100 requests (after "
                                          "warm-up); threshold: only the young generation's threshold raised to "
                                          "50,000; tuned: both of those, two changes at once (lab 08)",
           ("default", "frozen", "threshold", "tuned"),
           acts_in=("server", "state")),
    Switch("heap", _P, "06_gc_profiling", "a long-lived stock snapshot of 300,000 rows reloaded every second in "
                                          "the background: none; objects: one small list per row (containers "
                                          "the collector tracks); flat: the same rows in NumPy arrays (nothing "
                                          "for it to traverse)", ("none", "objects", "flat"),
           acts_in=("state",)),
    Switch("db", _P, "02_nplusone", "where the order service's queries go: the SQLite file, in the process; or a "
                                    "private PostgreSQL that labkit starts and loads with the dataset, over its "
                                    "Unix socket, one connection per pool thread", ("sqlite", "postgres"),
           acts_in=("state",)),
    Switch("store", _P, "02_nplusone", "where product details live: the catalog process, over HTTP; or a private "
                                       "Redis that labkit starts and loads with the products, one key each (a "
                                       "GET per product, an MGET per batch)", ("catalog", "redis"),
           acts_in=("server", "state")),
    Switch("pool", _P, "07_tail_latency", "threads that run the blocking SQLite work", range=(1, 1024),
           default=40, hint="the thread-pool size, as Starlette's; try 1 or 2 for SQLite work",
           acts_in=("state",)),
    Switch("queue", _P, "07_tail_latency", "unbounded: requests wait for a pool thread however many are waiting; "
                                           "N: at most N wait, so beyond pool + N requests in flight the service "
                                           "answers 503 at once (load shedding; 0: none wait)",
           ("unbounded",), range=(0, 1_000_000), default="unbounded",
           hint="unbounded = every request waits its turn; N = answer 503 when more than pool + N requests are in "
                "flight",
           acts_in=("state",)),
    Switch("scribble", _P, "03_preallocation", "debug: fill released pool buffers with 0xDD (and a red zone)",
           ("off", "on"),
           acts_in=("state",)),
    Switch("alloc", _P, "03_preallocation", "count allocator calls per request (memray) into Server-Timing alloc; "
                                            "serves one request at a time (pool 1)", ("off", "census"),
           acts_in=("app", "pipeline")),
)
SWITCHES: Mapping[str, Switch] = MappingProxyType({s.name: s for s in TABLE})
#: per-request switches: name -> allowed values, baseline first.
REQUEST_SWITCHES: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {s.name: s.values for s in TABLE if s.scope == "request"})
#: process switches: name -> allowed values (none for ``pool``, an integer; ``unbounded`` for ``queue``, which also
#: takes an integer).
PROCESS_SWITCHES: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {s.name: s.values for s in TABLE if s.scope == "process"})


def check(name: str, value: Any, among: Iterable[str] = REQUEST_SWITCHES, what: str = "per-request") -> Any:
    """``value`` if allowed for the switch ``name`` (one of ``among``, described as ``what`` in the error), else
    raise :class:`labkit.errors.BadInputError` naming the switch, the value and what is allowed."""
    names = among if isinstance(among, Mapping) else tuple(among)
    if name not in names:
        raise BadInputError(f"unknown variant switch {name!r}; {what} switches are {', '.join(names)}")
    return SWITCHES[name].check(value)


def with_preset(defaults: Mapping[str, Any], given: Mapping[str, str]) -> dict[str, Any]:
    """A request's switches: ``defaults`` (the process's), then the preset in force (``given`` or the default)
    applied, then the switches ``given`` in the request itself on top."""
    sw = dict(defaults)
    preset = given.get("preset", sw.get("preset", "none"))
    if preset != "none":
        sw.update(PRESETS[preset])
    sw.update(given)
    return sw


def resolve(variants: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """All switches with defaults filled in and values checked: the process's starting configuration.

    Raises :class:`labkit.errors.BadInputError` naming an unknown switch or a bad value.
    """
    out: dict[str, Any] = {s.name: s.default for s in TABLE}
    for name, value in (variants or {}).items():
        out[name] = check(name, value, SWITCHES, "toyshop's")
    if out["store"] == "redis" and out["cache"] == "redis":
        raise BadInputError("cache=redis copies product details into a Redis, and with store=redis they already live "
                            "in one: start with cache=local to keep them in the process (lab 08's lesson) or "
                            "cache=none to read the store every time")
    if out["alloc"] == "census":  # the census is process-wide: one request at a time, so one pool thread
        out["pool"] = 1
    return out


def _read_in(s: Switch) -> str:
    links = (f"[`{m}`](../labkit/toyshop/{m.replace('.', '/')}.py)" for m in s.acts_in)
    return ", ".join(links)


def reference_page() -> str:
    """``docs/switches.md``: the table for users, in Markdown."""
    rows = [f"| `{s.name}` | {' · '.join(f'`{v}`' for v in s.values) or s.choices} | `{s.default}` | {s.scope} | "
            f"[{s.lesson}](../notebooks/{s.lesson}.ipynb) | {s.does} | "
            f"{_read_in(s)} |" for s in TABLE]
    presets = [f"| `{name}` | {', '.join(f'{k}={v}' for k, v in sw.items())} |" for name, sw in PRESETS.items()]
    return "\n".join([
        "# toyshop's switches",
        "",
        "<!-- generated from labkit/toyshop/switches.py by `python -m labkit.toyshop.switches > docs/switches.md`;"
        " a test keeps them equal -->",
        "",
        "Every lesson's fix is a switch of the bundled service. Set a process default at start",
        "(`labkit.service.start(variants={\"n1\": \"join\"})`, `labkit serve --variant n1=join`); a *request* switch",
        "may also ride on any request as a query parameter (`/customers/1/export?n1=join&codec=orjson`), so A and B",
        "can be interleaved against one warm process. *Process* switches are chosen at start only. Each response",
        "names the switches it was made with in its `X-Variant` header; `/health` lists the process's, and",
        "`/openapi.json` lists the request switches as every endpoint's parameters.",
        "",
        "| switch | values | default | scope | lesson | what it does | read in (`labkit/toyshop/`) |",
        "|---|---|---|---|---|---|---|",
        *rows,
        "",
        "The default is the slow baseline, except `log=off` and `stats=off` (keep other labs' measurements",
        "unchanged) and",
        "`preset=none` (leaves every switch as given). A preset sets these switches; a switch given in the same",
        "request overrides it (`?preset=all&cache=none`: every fix but the cache). Process switches are never part",
        "of a preset.",
        "",
        "| preset | sets |",
        "|---|---|",
        *presets,
        "",
    ])


if __name__ == "__main__":
    print(reference_page(), end="")
