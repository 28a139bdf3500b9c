"""Weighted call stacks — the one shape every profile here comes in — and the tables read from them.

    s = Stacks.from_collapsed(text, unit="samples")   # py-spy's raw format: "a (f.py:1);b (g.py:7) 42"
    s.total                                           # samples (or bytes, or allocations) in all
    s.top(10)                                         # functions by self and by total weight
    s.focus("handle")                                 # only stacks through a frame, cut above it
    s.layout()                                        # rectangles of an icicle chart (labkit.profile.render)

A stack lists its frames from the outermost (the thread's entry) to the innermost (where the sample or the
allocation was taken), each frame a ``"function (file:line)"`` string. *Self* weight is what a frame
carries as the innermost one; *total* weight is every stack it appears in (counted once per stack, so
recursion is not double-counted).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from labkit.errors import BadInputError
from labkit.results import Saveable

__all__ = ["Stacks", "frame_parts"]

Stack = tuple[str, ...]
_FRAME = re.compile(r"^(?P<fn>.*?) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")


def frame_parts(frame: str) -> tuple[str, str, str]:
    """``"fn (path/file.py:12)"`` → ``("fn", "path/file.py", "12")`` (file and line may be empty)."""
    m = _FRAME.match(frame)
    if not m:
        return frame, "", ""
    return m.group("fn"), m.group("file"), m.group("line") or ""


def _package(file: str) -> str:
    if not file:
        return "native"
    if file.startswith("<"):
        return "python internals"
    if "ipykernel_" in file or file.startswith("<ipython") or re.fullmatch(r"\d+\.py", file.rsplit("/", 1)[-1]):
        return "this notebook"  # a cell's code: ipykernel names it <tmp>/ipykernel_<pid>/<hash>.py (memray: <hash>.py)
    if file.endswith((".so", ".so.1.0")) or ".so." in file:
        return "native"
    parts = [p for p in file.split("/") if p]
    if "site-packages" in parts:
        parts = parts[parts.index("site-packages") + 1:]
    if parts and parts[0] == "labkit" and len(parts) > 2:
        return f"labkit.{parts[1]}"  # our own code, by subpackage: toyshop, profile, load…
    head = parts[0] if parts else file
    return head.removesuffix(".py")


@dataclass(frozen=True)
class Stacks(Saveable):
    """Call stacks with a weight each: samples (CPU), bytes or allocations (memory).

    Attributes:
        stacks: ``((frame, …), weight)`` pairs, frames outermost first; the same stack appears once.
        unit: what a weight counts (``"samples"``, ``"bytes"``, ``"allocations"``).
    """

    KIND = "stacks"

    stacks: tuple[tuple[Stack, int], ...]
    unit: str = "samples"

    @classmethod
    def from_counts(cls, counts: Iterable[tuple[Stack, int]], unit: str = "samples") -> Stacks:
        """Build from ``(stack, weight)`` pairs, merging repeated stacks and dropping zero weights."""
        merged: Counter[Stack] = Counter()
        for stack, weight in counts:
            if weight:
                merged[tuple(stack)] += int(weight)
        return cls(tuple(sorted(merged.items(), key=lambda kv: -kv[1])), unit)

    @classmethod
    def from_collapsed(cls, text: str, unit: str = "samples") -> Stacks:
        """Parse the *collapsed* format (one ``frame;frame;frame weight`` per line), as py-spy's ``raw``
        output and Brendan Gregg's ``stackcollapse`` tools write it. Malformed lines are refused, naming the
        first one."""
        pairs = []
        for n, line in enumerate(text.splitlines(), 1):
            line = line.rstrip()
            if not line:
                continue
            stack, _, weight = line.rpartition(" ")
            if not weight.isdigit():
                raise BadInputError(f"line {n} is not in the collapsed format 'frame;frame weight': {line[:120]!r}")
            # py-spy writes an empty stack for a thread caught outside any Python frame
            pairs.append((tuple(stack.split(";")) if stack.strip() else ("(no Python frame)",), int(weight)))
        return cls.from_counts(pairs, unit)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Stacks:
        """Rebuild from :meth:`to_dict` output."""
        cls.check_header(data)
        return cls(tuple((tuple(s), int(w)) for s, w in data["stacks"]), data.get("unit", "samples"))

    def to_collapsed(self) -> str:
        """The collapsed format (the input of ``flamegraph.pl``, speedscope, inferno…)."""
        return "".join(f"{';'.join(s)} {w}\n" for s, w in self.stacks)

    @property
    def total(self) -> int:
        """The weight of every stack together."""
        return sum(w for _, w in self.stacks)

    def __len__(self) -> int:
        return len(self.stacks)

    def focus(self, frame: str, *, keep_outer: bool = False) -> Stacks:
        """Only the stacks that pass through a frame containing ``frame`` (its outermost occurrence), cut so
        that frame is the root (``keep_outer=True`` keeps the frames above it)."""
        out = []
        for stack, w in self.stacks:
            for i, f in enumerate(stack):
                if frame in f:
                    out.append((stack if keep_outer else stack[i:], w))
                    break
        return Stacks.from_counts(out, self.unit)

    def without(self, frame: str) -> Stacks:
        """The stacks that do *not* pass through a frame containing ``frame``."""
        return Stacks.from_counts(((s, w) for s, w in self.stacks if not any(frame in f for f in s)), self.unit)

    def share(self, frame: str) -> float:
        """Fraction of the total weight in stacks that pass through a frame containing ``frame``."""
        total = self.total
        hit = sum(w for s, w in self.stacks if any(frame in f for f in s))
        return hit / total if total else 0.0

    def top(self, n: int = 15, *, by: str = "self") -> Any:
        """The ``n`` heaviest functions as a DataFrame: function, file, package, self, total and their shares,
        sorted by ``by`` (``"self"`` or ``"total"``)."""
        import pandas as pd

        if by not in ("self", "total"):
            raise BadInputError(f"by must be 'self' or 'total', got {by!r}")
        own: Counter[str] = Counter()
        incl: Counter[str] = Counter()
        for stack, w in self.stacks:
            if stack:
                own[stack[-1]] += w
            for f in set(stack):
                incl[f] += w
        total = self.total or 1
        rows = []
        for f, t in incl.items():
            fn, file, line = frame_parts(f)
            rows.append({"function": fn, "file": f"{file}:{line}" if line else file, "package": _package(file),
                         "self": own.get(f, 0), "total": t, "self %": 100 * own.get(f, 0) / total,
                         "total %": 100 * t / total})
        cols = ["function", "file", "package", "self", "total", "self %", "total %"]
        df = pd.DataFrame(rows, columns=cols)
        return df.sort_values([by, "total" if by == "self" else "self"], ascending=False).head(n).reset_index(drop=True)

    def by_location(self, n: int = 15) -> Any:
        """Weight per innermost frame (where the sample or allocation happened), heaviest first."""
        return self.top(n, by="self")[["function", "file", "package", "self", "self %"]].rename(
            columns={"self": self.unit, "self %": "share %"})

    def layout(self, *, max_depth: int = 40, min_share: float = 0.002) -> Any:
        """The rectangles of an icicle chart: one row per node of the merged call tree.

        Columns: ``x0``, ``x1`` (fractions of the total), ``depth`` (0 = the root, "all"), ``frame``,
        ``function``, ``file``, ``package``, ``value``, ``share``. Nodes narrower than ``min_share`` of the
        total, and frames deeper than ``max_depth``, are left out (their weight stays in their parent), so
        the chart stays readable and small whatever the profile's size.
        """
        import pandas as pd

        total = self.total
        if total == 0:
            return pd.DataFrame(columns=["x0", "x1", "depth", "frame", "function", "file", "package", "value",
                                         "share"])
        tree: dict[str, Any] = {"w": 0, "kids": {}}
        for stack, w in self.stacks:
            node = tree
            node["w"] += w
            for f in stack[:max_depth]:
                node = node["kids"].setdefault(f, {"w": 0, "kids": {}})
                node["w"] += w
        rows: list[dict[str, Any]] = [{"x0": 0.0, "x1": 1.0, "depth": 0, "frame": "all", "function": "all",
                                       "file": "", "package": "all", "value": total, "share": 1.0}]
        todo = [(tree, 0.0, 0)]
        while todo:
            node, x, depth = todo.pop()
            for f, kid in sorted(node["kids"].items(), key=lambda kv: -kv[1]["w"]):
                width = kid["w"] / total
                if width >= min_share:
                    fn, file, line = frame_parts(f)
                    rows.append({"x0": x, "x1": x + width, "depth": depth + 1, "frame": f, "function": fn,
                                 "file": f"{file}:{line}" if line else file, "package": _package(file),
                                 "value": kid["w"], "share": width})
                    todo.append((kid, x, depth + 1))
                x += width
        return pd.DataFrame(rows)

    def to_frame(self) -> Any:
        """One row per stack: stack (frames joined by ';'), depth, weight, share."""
        import pandas as pd

        total = self.total or 1
        return pd.DataFrame([{"stack": ";".join(s), "depth": len(s), self.unit: w, "share": w / total}
                             for s, w in self.stacks])

    def __str__(self) -> str:
        return f"{len(self.stacks):,} distinct stacks, {self.total:,} {self.unit}"
