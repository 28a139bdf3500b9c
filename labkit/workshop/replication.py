"""Did the speed-up hold across the room? One experiment's ratios from every learner's machine, pooled.

    room = labkit.room.collect("/home")
    for study in replicate(room):
        print(study)             # "orjson export: pooled ratio 0.41 (0.37–0.45), I² 0.62; held on 27 of 30 machines;
                                 #  2 were throttled, 1 busy"
        study.chart()            # a forest plot, drawn offline

Each machine measured the ratio with an interval of its own (``labkit.compare``'s, at its stated confidence).
On the log scale a ratio's interval is symmetric, so each machine gives an effect ``ln(ratio)`` with a standard
error read off its interval; a random-effects meta-analysis (DerSimonian–Laird, ``statsmodels``'
``combine_effects``) pools them, allowing each machine its own true effect: the pooled interval is for the
room's average effect, and I² is the share of the spread between machines that their own noise does not explain
(0: one effect everywhere; near 1: the machines disagree). A machine *held* when its own interval lies on the same
side of 1 as the pooled one (or, when the pooled interval covers 1, when its own does too); the exceptions are named with what the room page read from their fingerprints
(throttled, busy, a wide spread) or their CPU, when it differs from the room's usual one.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from labkit.workshop.room import Entry, Room

__all__ = ["Machine", "Replication", "replicate"]


@dataclass(frozen=True)
class Machine:
    """One learner's measurement of the experiment, and whether it went the pooled way."""

    learner: str
    ratio: float
    ci: tuple[float, float]
    verdict: str | None
    noise: str
    cpu: str
    held: bool


@dataclass(frozen=True)
class Replication:
    """One experiment across the room's machines (:func:`replicate`).

    Attributes:
        title: the experiment's title (how records are matched across learners).
        machines: each machine's ratio and interval, and whether it held.
        ratio, ci: the pooled ratio (random effects) and its 95 % interval.
        i2: between-machine heterogeneity, 0–1.
        tau2: the between-machine variance of the log effect.
        direction: ``faster``, ``slower`` or ``unclear`` (the pooled interval covers 1).
        method: how it was pooled.
    """

    title: str
    machines: tuple[Machine, ...]
    ratio: float
    ci: tuple[float, float]
    i2: float
    tau2: float
    direction: str
    method: str = "random effects, DerSimonian–Laird"

    @property
    def exceptions(self) -> tuple[Machine, ...]:
        """The machines where it did not hold."""
        return tuple(m for m in self.machines if not m.held)

    def why(self, machine: Machine) -> str:
        """What sets an exception apart: its noise on the room page, else a CPU other than the room's usual."""
        if machine.noise in ("throttled", "busy", "wide spread"):
            return machine.noise
        usual = Counter(m.cpu for m in self.machines).most_common(1)[0][0]
        return f"another CPU ({machine.cpu})" if machine.cpu and machine.cpu != usual else "quiet, yet it did not hold"

    def summary(self) -> str:
        """One line: the pooled ratio, I², and where it held."""
        held = sum(m.held for m in self.machines)
        reasons = Counter(self.why(m) for m in self.exceptions)
        said = "; " + ", ".join(f"{n} {'were' if n > 1 else 'was'} {r}" for r, n in reasons.most_common()) \
            if reasons else ""
        way = "" if self.direction != "unclear" else " (the pooled interval covers no change)"
        return (f"{self.title}: pooled ratio {self.ratio:.3g} ({self.ci[0]:.3g}–{self.ci[1]:.3g}), "
                f"I² {self.i2:.2f}{way}; held on {held} of {len(self.machines)} machines{said}")

    def __str__(self) -> str:
        return self.summary()

    def to_frame(self) -> Any:
        """One row per machine: learner, ratio, lo, hi, verdict, noise, cpu, held."""
        import pandas as pd

        return pd.DataFrame([{"learner": m.learner, "ratio": m.ratio, "lo": m.ci[0], "hi": m.ci[1],
                              "verdict": m.verdict, "noise": m.noise, "cpu": m.cpu, "held": m.held}
                             for m in self.machines])

    def chart(self) -> Any:
        """A forest plot (Altair): each machine's ratio and interval on a log axis, coloured by whether it held,
        the pooled interval as a band and its ratio as a line."""
        import altair as alt
        import pandas as pd

        frame = self.to_frame()
        frame["held"] = frame["held"].map({True: "held", False: "did not hold"})
        x = alt.X("ratio:Q", scale=alt.Scale(type="log", zero=False), title="ratio (candidate / baseline), log")
        y = alt.Y("learner:N", sort=list(frame.sort_values("ratio")["learner"]), title=None)
        colour = alt.Color("held:N", scale=alt.Scale(domain=["held", "did not hold"], range=["#1a7f37", "#cf222e"]))
        points = alt.Chart(frame).mark_point(filled=True).encode(x=x, y=y, color=colour,
                                                                  tooltip=["learner", "ratio", "noise", "cpu"])
        rules = alt.Chart(frame).mark_rule().encode(x="lo:Q", x2="hi:Q", y=y, color=colour)
        pooled = pd.DataFrame([{"lo": self.ci[0], "hi": self.ci[1], "ratio": self.ratio}])
        band = alt.Chart(pooled).mark_rect(opacity=0.15, color="#0969da").encode(x="lo:Q", x2="hi:Q")
        line = alt.Chart(pooled).mark_rule(color="#0969da", strokeDash=[4, 3]).encode(x="ratio:Q")
        return (band + line + rules + points).properties(
            title=f"{self.title}: pooled {self.ratio:.3g} ({self.ci[0]:.3g}–{self.ci[1]:.3g}), I² {self.i2:.2f}",
            width=520, height=max(120, 16 * len(frame)))


def _z(confidence: float) -> float:
    from scipy.stats import norm

    return float(norm.ppf(1 - (1 - confidence) / 2))


def _pool(effects: Sequence[float], variances: Sequence[float]) -> tuple[float, float, float, float]:
    """Random-effects mean, its standard error, I² and τ² (DerSimonian–Laird, τ² truncated at 0)."""
    import numpy as np
    from statsmodels.stats.meta_analysis import combine_effects

    y, v = np.asarray(effects, dtype=float), np.asarray(variances, dtype=float)
    res = combine_effects(y, v, method_re="dl", use_t=False)
    frame = res.summary_frame()
    tau2 = float(res.tau2)
    if tau2 <= 0:  # no spread beyond the machines' own noise: the random-effects model is the fixed-effect one
        row = frame.loc["fixed effect"]
        return float(row["eff"]), float(row["sd_eff"]), 0.0, 0.0
    row = frame.loc["random effect"]
    return float(row["eff"]), float(row["sd_eff"]), min(1.0, max(0.0, float(res.i2))), tau2


def _side(lo: float, hi: float) -> str:
    return "faster" if hi < 1 else "slower" if lo > 1 else "unclear"


def replicate(room: Room | Iterable[Entry], *, title: str | None = None, at_least: int = 2) -> tuple[Replication, ...]:
    """Pool each experiment's ratios across the room's machines (see the module docstring).

    Args:
        room: what :func:`labkit.workshop.room.collect` found (or its entries).
        title: only this experiment (default: every experiment measured on at least ``at_least`` machines).
        at_least: the fewest machines worth pooling.

    Returns:
        One :class:`Replication` per experiment, in title order. A learner's latest record of an experiment
        stands for their machine; records without an interval (not concluded) are left out.
    """
    entries = room.entries if isinstance(room, Room) else tuple(room)
    latest: dict[tuple[str, str], Entry] = {}
    for e in entries:
        if e.measured_ratio is None or not e.ci or e.measured_ratio <= 0 or e.ci[0] <= 0 or e.ci[1] <= e.ci[0]:
            continue
        if title is not None and e.title != title:
            continue
        latest[(e.title, e.learner)] = e  # collect() sorts by title then learner; a later file replaces
    studies = []
    for name in sorted({t for t, _ in latest}):
        rows = [e for (t, _), e in latest.items() if t == name]
        if len(rows) < at_least:
            continue
        effects = [math.log(e.measured_ratio) for e in rows]  # type: ignore[arg-type]
        variances = [((math.log(e.ci[1]) - math.log(e.ci[0])) / (2 * _z(e.confidence))) ** 2 for e in rows]
        mean, se, i2, tau2 = _pool(effects, variances)
        lo, hi = math.exp(mean - 1.959964 * se), math.exp(mean + 1.959964 * se)
        direction = _side(lo, hi)
        machines = tuple(Machine(e.learner, e.measured_ratio, e.ci, e.verdict, e.noise, e.cpu,  # type: ignore[arg-type]
                                 held=_side(*e.ci) == direction) for e in rows)
        studies.append(Replication(name, machines, math.exp(mean), (lo, hi), i2, tau2, direction))
    return tuple(studies)
