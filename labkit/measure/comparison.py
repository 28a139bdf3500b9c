"""A/B comparison with a verdict: faster, slower, the same, or too noisy to tell.

Two functions are timed *interleaved* — A B, B A, A B … — so that whatever the machine does meanwhile
(another program, a frequency change) lands on both alike. Two already-measured results (load tests, say)
are compared the same way, as independent samples.

The verdict reads an interval of the ratio of medians (candidate / baseline) and a significance test:

* ``same``: the whole interval lies within ±``min_effect`` of 1 — any difference is too small to matter;
* ``faster`` / ``slower``: the interval excludes 1 and the significance test agrees (p below the look's α);
* ``inconclusive``: anything else — the noise is too large to tell.

Looking more than once, honestly. Timing two functions, ``compare`` does not fix the number of rounds in
advance: a clear difference is decided after the first ``rounds``, a subtle one gets more. Testing again at
the same α after each batch would be *optional stopping*: with four looks at 5 % each, the chance of a false
"faster" or "slower" (or a false "same") is well above 5 %, and the stated 95 % interval covers the truth less
often than it says. So the looks are planned before any counted round, and α is *spent* across them: look
``k`` (after ``n_k`` rounds of at most ``n_max``) tests at ``α_k = α · (n_k − n_{k−1}) / n_max`` and reads the
``1 − α_k`` interval (linear α-spending; four equal batches at α = 0.05 give 0.0125 per look and a 98.75 %
interval). A look too early for the sign test ever to get below its α (``n`` rounds all one way give
p = 2 / 2ⁿ) is not planned and its share goes to the next look. The α's of all planned looks add up to α, so by the union (Bonferroni) bound the chance that *any*
look gives a false verdict is at most α, however the looks depend on one another (exactly so for the sign
test, which assumes nothing about the samples' distribution; as nearly as the bootstrap interval holds its
level for "same"). The plan is ``rounds``, ``2 × rounds`` … up to ``max_rounds``, cut to what ``max_time`` allows
at the pace the warm-up showed (decided before counting, so it cannot peek at the verdict); if the machine
slows down and the time runs out early, the remaining looks are skipped and their α is left unspent (which
only makes the error rate smaller). The result reports the level of the interval actually read
(``confidence``), the look it stopped at and the looks planned. ``max_rounds=rounds`` is a fixed design: one
look, at α, with the ``1 − α`` interval. An inconclusive verdict is final for that comparison: rerunning until
one says "faster" is optional stopping again — change something (quieten the machine, plan more rounds) first.

Two measured results (compared as independent samples) get one look, at α.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import math
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from labkit.clock import Clock
from labkit.errors import BadInputError
from labkit.inputs import function, integer
from labkit.measure.collector import MODES, check_mode, collector
from labkit.measure.machine import fingerprint
from labkit.measure.microbench import WIDE_SPREAD, _result
from labkit.measure.stats import RatioEstimate, format_duration, ratio_of_medians, spread
from labkit.measure.workers import LocalSide, WorkerSide
from labkit.progress import LazySteps, refreshing, steps_bar
from labkit.results import Saveable

__all__ = ["Comparison", "compare", "compare_sides", "plan_looks", "verdict_for", "measured_here"]

#: this process's key for :func:`measured_here`: drawn at import, never saved or shown
_KEY = secrets.token_bytes(32)


def _digest(c: Any) -> str:
    body = repr((c.baseline_name, c.candidate_name, c.baseline_ns, c.candidate_ns, c.ratio, tuple(c.ci), c.p_value,
                 c.verdict, c.paired, c.min_effect, c.alpha, c.confidence))
    return hmac.new(_KEY, body.encode(), hashlib.blake2b).hexdigest()


def _signed(c: Comparison) -> Comparison:
    """``c`` with the token that :func:`measured_here` checks (only labkit's own measurements are signed)."""
    return dataclasses.replace(c, token=_digest(c))


def measured_here(c: Any) -> bool:
    """True when ``c`` is a :class:`Comparison` that labkit measured in this process, unchanged since: its token
    is a keyed hash of its fields under a key drawn when this process imported labkit. A comparison built by
    hand, edited with ``dataclasses.replace``, or loaded from a file (another process's key) is not."""
    if type(c) is not Comparison or type(c.token) is not str or not c.token:
        return False
    try:
        return hmac.compare_digest(c.token, _digest(c))
    except Exception:  # fields of foreign types that cannot be hashed: not ours
        return False

VERDICTS = ("faster", "slower", "same", "inconclusive")


@dataclass(frozen=True)
class Comparison(Saveable):
    """The outcome of :func:`compare`.

    Attributes:
        baseline_name, candidate_name: labels of A and B.
        baseline_ns, candidate_ns: the raw samples of each side (per-call or per-request ns).
        ratio: median(candidate) / median(baseline); below 1 means the candidate is faster.
        ci: the bootstrap interval of ``ratio`` at level ``confidence``.
        p_value: two-sided; the sign test on paired rounds, Mann–Whitney U otherwise.
        verdict: ``faster``, ``slower``, ``same`` or ``inconclusive`` (the candidate relative to the baseline).
        paired: True when A and B were measured interleaved, round by round.
        min_effect: relative differences smaller than this count as the same.
        alpha: the overall significance level, shared out over the planned looks (see the module docstring).
        warnings: what looked wrong on either side, with what to do.
        confidence: the level of ``ci``, ``1 − α`` of the look that gave the verdict; the verdict tested
            ``p_value`` against ``1 − confidence``.
        look, looks: the look the verdict came from, and how many were planned (1 and 1: a fixed design).
        baseline_gc, candidate_gc: garbage collections that landed in each timed sample (callables only).
        baseline_gc_ns, candidate_gc_ns: the time each sample spent in them, on the comparison's clock.
        gc: the collector's mode while timing (``as-is``, ``frozen``, ``disabled``).
    """

    KIND = "comparison"
    VERSION = 3  # 2: confidence, look, looks (version 1 always read a 95 % interval); 3: the collector's counts

    baseline_name: str
    candidate_name: str
    baseline_ns: tuple[float, ...]
    candidate_ns: tuple[float, ...]
    ratio: float
    ci: tuple[float, float]
    p_value: float
    verdict: str
    paired: bool
    min_effect: float = 0.05
    alpha: float = 0.05
    warnings: tuple[str, ...] = ()
    fingerprint: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    confidence: float = 0.95
    look: int = 1
    looks: int = 1
    baseline_gc: tuple[int, ...] = ()
    candidate_gc: tuple[int, ...] = ()
    baseline_gc_ns: tuple[int, ...] = ()
    candidate_gc_ns: tuple[int, ...] = ()
    gc: str = "as-is"
    #: a keyed hash of the fields, valid only in the process that measured it (:func:`measured_here`)
    token: str = field(default="", compare=False, repr=False)

    @property
    def speedup(self) -> float:
        """How many times faster the candidate is (baseline / candidate medians); below 1 means slower."""
        return 1.0 / self.ratio

    def summary(self) -> str:
        """One sentence: the verdict, the ratio with its interval, and the p-value."""
        a, b = self.baseline_name, self.candidate_name
        lo, hi = self.ci
        stats = f"ratio {self.ratio:.3f}, {self.ci_label} {lo:.3f}–{hi:.3f}, p={self.p_value:.2g}"
        if self.looks > 1:
            stats += f", look {self.look} of {self.looks}"
        if self.verdict == "faster":
            return f"{b} is {self.speedup:.2f}× faster than {a} ({stats})"
        if self.verdict == "slower":
            return f"{b} is {self.ratio:.2f}× slower than {a} ({stats})"
        if self.verdict == "same":
            return f"no significant difference between {b} and {a}: within ±{self.min_effect:.0%} ({stats})"
        return (f"inconclusive: too noisy to tell {b} from {a} ({stats}); quieten the machine, or plan "
                "more rounds (max_rounds=), before measuring again")

    @property
    def ci_label(self) -> str:
        """``"95% CI"``, ``"98.75% CI"``: the interval's level as it should be printed beside it."""
        return f"{self.confidence * 100:.4g}% CI"

    def to_frame(self) -> Any:
        """Long format: side (name), role (baseline/candidate), round, ns."""
        import pandas as pd

        rows = [(self.baseline_name, "baseline", i, v) for i, v in enumerate(self.baseline_ns)]
        rows += [(self.candidate_name, "candidate", i, v) for i, v in enumerate(self.candidate_ns)]
        return pd.DataFrame(rows, columns=["name", "role", "round", "ns"])

    def __str__(self) -> str:
        med = (f"  {self.baseline_name}: median {format_duration(float(np.median(self.baseline_ns)))}; "
               f"{self.candidate_name}: median {format_duration(float(np.median(self.candidate_ns)))}")
        return "\n".join([self.summary(), med, *(f"  warning: {w}" for w in self.warnings)])

    def _repr_html_(self) -> str:
        from html import escape

        colour = {"faster": "#1a7f37", "slower": "#cf222e", "same": "#57606a"}.get(self.verdict, "#9a6700")
        return (f"<div><b style='color:{colour}'>{escape(self.verdict.upper())}</b> — "
                f"{escape(self.summary())}<pre>{escape(str(self).split(chr(10), 1)[-1])}</pre></div>")


def verdict_for(ci: tuple[float, float], p_value: float, min_effect: float, alpha: float) -> str:
    """The verdict rule (see the module docstring), on its own so it can be tested exactly."""
    lo, hi = ci
    if 1 / (1 + min_effect) <= lo and hi <= 1 + min_effect:
        return "same"
    if p_value < alpha and hi < 1:
        return "faster"
    if p_value < alpha and lo > 1:
        return "slower"
    return "inconclusive"


def _samples_of(x: Any) -> np.ndarray | None:
    if isinstance(x, list | tuple | np.ndarray):
        return np.asarray(x, dtype=float)  # raw samples in ns
    s = getattr(x, "samples_ns", None)
    return None if s is None else np.asarray(s, dtype=float)


def compare(baseline: Any, candidate: Any, *args: Any, names: tuple[str, str] | None = None, rounds: int = 30,
            max_rounds: int | None = None, max_time: float = 3.0, min_effect: float = 0.05, alpha: float = 0.05,
            warmup: int = 2, min_sample_time: float = 0.001, clock: Clock = time.perf_counter_ns,
            seed: int = 0, progress: bool | None = None,
            inputs: Callable[[int], tuple[Any, ...]] | None = None, gc: str = "as-is",
            processes: bool = False, paired: bool | None = None) -> Comparison:
    """Compare a candidate against a baseline and say whether it is faster, slower, the same, or unclear.

    Args:
        baseline, candidate: two callables (timed interleaved here, each called as ``fn(*args)``), or two
            measured results — anything with a ``samples_ns`` attribute, such as a BenchResult or a
            load-test result, or plain sequences of durations in ns — compared as independent samples unless
            ``paired=True``.
        names: labels for the two sides (default: function names, or "baseline"/"candidate").
        rounds: interleaved A/B rounds before the first look (callables only); each round takes one sample of
            each. A look the sign test could never pass at its α is not planned (see :func:`plan_looks`), so
            the first look may come later.
        max_rounds: while the verdict is still inconclusive, ``rounds`` more are added, up to this many
            (default: four times ``rounds``) — a clear difference is decided fast, a subtle one gets more data.
            Each look spends part of ``alpha`` (see the module docstring). Pass ``max_rounds=rounds`` for a
            fixed count: one look, at ``alpha``.
        max_time: the time budget in seconds for the whole comparison, calibration and warm-up included: the
            looks planned are those the time left allows at the pace the warm-up showed, and once it is spent
            no round starts — past the fewest rounds a verdict needs (6 at α = 0.05), which are always taken.
            A comparison cut short says so in its warnings.
        min_effect: the relative difference below which the two count as the same (0.05 = ±5 %).
        alpha: the chance of a false verdict, over all looks together (0.05: the interval read at a single
            look is 95 %; with four planned looks, 98.75 % at each).
        warmup, min_sample_time, clock: as in :func:`labkit.bench`.
        seed: seeds the bootstrap, so the interval is reproducible.
        progress: a progress bar over the rounds (:mod:`labkit.progress`: by default inside a notebook, when
            the rounds look like they will take two seconds or more).
        inputs: fresh inputs instead of ``*args``: ``inputs(k)`` returns the argument tuple for the k-th
            input. Every timed call then gets an input never used before — round ``r`` times the baseline on
            ``inputs(r)`` and the candidate on another ``inputs(r)`` (built separately, equal in content), so
            both sides do the same work and no cache keyed on the input can answer for either. Each sample
            is one call (no loop calibration), and building the input is not timed: make inputs big enough
            that one call lasts well over 10 µs. Warm-up calls use inputs of their own (negative ``k``).
            This is what exercise graders time with (see :mod:`labkit.grading.kit`).
        gc: the cyclic garbage collector while timing (see :data:`labkit.measure.collector.MODES`): ``"as-is"``
            (default) leaves it as the program has it; ``"frozen"`` runs ``gc.collect()`` then ``gc.freeze()``
            first, so collections skip every object alive before the comparison — in a notebook, the kernel's
            — and see only what the calls allocate; ``"disabled"`` turns it off. Either way the collections
            that land in each timed sample are counted (``baseline_gc``, ``candidate_gc``), and a warning names
            the collector when they take 1 % of a side's timed time or more.
        processes: time each side in a fresh worker process of its own (``spawn``, as pyperf does), driven
            round by round from here, so the verdict does not rest on this process's heap, imports or caches
            (in a notebook, the kernel's): what it says carries over to a program running only that code.
            The functions, arguments and ``inputs`` must be picklable (defined in a module); ``clock`` must
            be the default. The statistics are the same.
        paired: for two measured results only: True when they were taken interleaved, round by round — sample
            *i* of each from the same round, as :func:`labkit.latency.http_samples` takes them — so that they
            are compared as pairs, as callables are (a drift in the machine's load then cancels within each
            pair instead of widening the interval); both must hold the same number of samples. Default: False
            for results; callables are always paired.

    Raises:
        BadInputError: mixed inputs (a callable and a result), bad counts, or too few samples.
    """
    if not 0 < min_effect < 1:
        raise BadInputError(f"min_effect must be between 0 and 1 (0.05 means ±5 %), got {min_effect!r}")
    if not 0 < alpha < 1:
        raise BadInputError(f"alpha must be between 0 and 1 (usually 0.05), got {alpha!r}")
    sa, sb = _samples_of(baseline), _samples_of(candidate)
    if sa is not None and sb is not None:
        na, nb = names or (getattr(baseline, "name", "baseline"), getattr(candidate, "name", "candidate"))
        if paired and len(sa) != len(sb):
            raise BadInputError(
                f"paired=True pairs sample i of each side, but {na} has {len(sa)} samples and {nb} {len(sb)}: "
                "pass two results taken round by round together (e.g. one latency.http_samples call), or "
                "leave paired= out to compare them as independent samples")
        warnings = tuple(getattr(baseline, "warnings", ())) + tuple(getattr(candidate, "warnings", ()))
        return _build(str(na), str(nb), sa, sb, bool(paired), min_effect, alpha, warnings, seed)
    if paired is False and sa is None and sb is None:
        raise BadInputError("paired=False is for measured results: two callables are always timed in interleaved "
                            "pairs here; leave paired= out")
    if (sa is None) != (sb is None):
        raise BadInputError(
            "compare() needs two callables or two measured results, got one of each: pass both functions "
            "(compare(f, g)) or both results (compare(run_a, run_b))")
    function(baseline, "baseline")
    function(candidate, "candidate")
    if inputs is not None:
        function(inputs, "inputs")
        if args:
            raise BadInputError("give the arguments either as *args or through inputs=, not both")
    rounds = integer(rounds, "rounds", low=3)
    max_rounds = rounds * 4 if max_rounds is None else integer(max_rounds, "max_rounds", low=rounds)
    warmup = integer(warmup, "warmup", low=0)
    if not min_sample_time > 0:
        raise BadInputError(f"min_sample_time must be a positive number of seconds, got {min_sample_time!r}")
    if not (isinstance(max_time, int | float) and max_time > 0):
        raise BadInputError(f"max_time must be a positive number of seconds, got {max_time!r}")
    gc_mode = check_mode(gc)
    processes = bool(processes)
    if processes and clock is not time.perf_counter_ns:
        raise BadInputError("processes=True times each side in its own process with time.perf_counter_ns: "
                            "pass no clock= with it")
    with collector("as-is" if processes else gc_mode, clock) as watch:
        fns = (baseline, candidate)
        sides: list[Any] = []
        try:
            for i, fn in enumerate(fns):
                sides.append(WorkerSide(fn, i, args, inputs, warmup, min_sample_time, gc_mode) if processes
                             else LocalSide(fn, i, args, inputs, warmup, min_sample_time, clock, watch))
            run = _interleaved(sides, rounds, max_rounds, max_time, alpha, min_effect, clock, seed, progress)
            full = sum(side.full for side in sides) if processes else watch.full
        finally:
            for side in sides:
                side.close()
    na, nb = names or (getattr(baseline, "__name__", "baseline"), getattr(candidate, "__name__", "candidate"))
    if na == nb:
        na, nb = f"{na} (baseline)", f"{nb} (candidate)"
    hint = "min_sample_time=" if inputs is None else "the size of what inputs= makes"
    return _concluded(run, na, nb, hint, gc_mode, full, max_time, min_effect, alpha, seed)


def compare_sides(sides: list[Any], names: tuple[str, str], *, rounds: int = 30, max_rounds: int | None = None,
                  max_time: float = 3.0, min_effect: float = 0.05, alpha: float = 0.05, seed: int = 0,
                  progress: bool | None = None) -> Comparison:
    """:func:`compare` for two sides that time themselves — objects with ``warm()``, ``sample(r)`` and
    ``close()`` as :mod:`labkit.measure.workers`' sides have (``labkit.gate`` runs each in a tree of its own) —
    with the same interleaving, planned looks and verdict. The sides are closed at the end."""
    max_rounds = rounds * 4 if max_rounds is None else max_rounds
    clock = time.perf_counter_ns
    try:
        run = _interleaved(sides, rounds, max_rounds, max_time, alpha, min_effect, clock, seed, progress)
    finally:
        for side in sides:
            side.close()
    full = sum(getattr(side, "full", 0) for side in sides)
    return _concluded(run, *names, "min_sample_time=", "as-is", full, max_time, min_effect, alpha, seed)


def _concluded(run: Any, na: str, nb: str, hint: str, gc_mode: str, full: int, max_time: float, min_effect: float,
               alpha: float, seed: int) -> Comparison:
    """The comparison from an interleaved run: each side's result and warnings, the collector's, the cut, the
    verdict."""
    samples, loops, warm, est, plan, look, counts, gc_ns, cut = run
    # a side's wide spread points at the collector only where the collector's share could explain it
    ra, rb = (_result(n, samples[k], loops[k], warm[k], more="max_rounds=", loops_hint=hint, interleaved=True,
                      collections=sum(c > 0 for c in counts[k]) if _gc_explains(samples[k], gc_ns[k]) else 0)
              for k, n in enumerate((na, nb)))
    warnings = _named(na, ra.warnings, nb, rb.warnings)
    warnings += _gc_warnings((na, nb), samples, counts, gc_ns, gc_mode, full)
    if cut is not None:
        warnings += (f"max_time={max_time:g} s ran out after {cut[0]} of the {cut[1]} rounds planned: the verdict "
                     f"rests on {cut[0]} rounds; raise max_time= for more, or make one call cheaper (a smaller "
                     "input)",)
    return _build(na, nb, np.asarray(samples[0]), np.asarray(samples[1]), True, min_effect, alpha, warnings, seed,
                  est=est, alpha_look=plan[look - 1][1], look=look, looks=len(plan),
                  gc_counts=(tuple(counts[0]), tuple(counts[1])), gc_ns=(tuple(gc_ns[0]), tuple(gc_ns[1])),
                  gc_mode=gc_mode)


def _interleaved(sides: list[Any], rounds: int, max_rounds: int, max_time: float, alpha: float, min_effect: float,
                 clock: Clock, seed: int, progress: bool | None) -> Any:
    """Calibrate, warm up, plan the looks, then time interleaved rounds until a look decides or time is up."""
    begun = clock()
    deadline = begun + max_time * 1e9  # the whole comparison: calibration and warm-up included
    loops, warm = [], []
    round_ns = 0.0  # the pace: one round's wall time, as the warm-up showed it
    early = LazySteps(progress, rounds, "A/B rounds", "round")  # a bar already, if warming up is slow
    with early.during("calibrating and warming up"):
        for side in sides:
            n, seen, share = side.warm()
            loops.append(n)
            warm.append(seen)
            round_ns += share
    # the plan is fixed here, before any counted round: how many rounds the time left allows at the warm-up's pace
    left = max(0.0, deadline - clock())
    plan = plan_looks(rounds, max_rounds, alpha, affordable=left / round_ns if round_ns > 0 else None)
    floor = _fewest_rounds(plan[0][1])  # out of time, a look still gets the rounds a verdict needs at the least
    samples: list[list[float]] = [[], []]
    counts: list[list[int]] = [[], []]
    gc_ns: list[list[int]] = [[], []]
    bar = early.bar
    if bar is None:
        bar = steps_bar(progress, rounds, "A/B rounds", "round", expected_s=rounds * round_ns / 1e9)
    else:
        bar.set_postfix_str("", refresh=False)
    look, cut = 0, None
    with refreshing(bar):  # a round past 30 s still shows progress: the bar's clock moves every 10 s
        for look, (target, alpha_look) in enumerate(plan, 1):
            if bar is not None and look > 1:
                bar.total = target
                bar.set_postfix_str(f"unclear so far: look {look} of {len(plan)}")
            for r in range(len(samples[0]), target):
                if r >= floor and clock() > deadline:
                    cut = (r, plan[-1][0])
                    break
                order = (0, 1) if r % 2 == 0 else (1, 0)  # alternate who goes first: no side always runs warm
                for i in order:
                    ns, collections, in_gc = sides[i].sample(r)
                    samples[i].append(ns)
                    counts[i].append(collections)
                    gc_ns[i].append(in_gc)
                if bar is not None:
                    bar.update(1)
            est = _estimate(samples[0], samples[1], True, alpha_look, seed)
            if cut is not None or verdict_for(est.ci, est.p_value, min_effect, alpha_look) != "inconclusive" \
                    or clock() > deadline:
                break  # decided; or out of time: the looks left are skipped and their α stays unspent
    if bar is not None:
        bar.close()
    return samples, loops, warm, est, plan, look, counts, gc_ns, cut


def _gc_share(samples: list[float], gc_ns: list[int]) -> float:
    """The collector's share of one side's timed time."""
    return float(np.sum(gc_ns)) / (float(np.sum(samples)) or 1.0) if gc_ns else 0.0


def _gc_explains(samples: list[float], gc_ns: list[int]) -> bool:
    """Whether the collector's share of one side's timed time could explain its spread: at least half of it
    (IQR / median), or the spread is not wide. A collector that took 1 % of the time does not make a 15 % IQR."""
    s = spread(samples) if len(samples) > 1 else 0.0
    return s <= WIDE_SPREAD or _gc_share(samples, gc_ns) >= s / 2


def _named(na: str, wa: tuple[str, ...], nb: str, wb: tuple[str, ...]) -> tuple[str, ...]:
    """Each side's own warnings, named by side; one both sides raise word for word said once, for both."""
    both = [w for w in wa if w in wb]
    return (tuple(f"both sides: {w}" for w in both) + tuple(f"{na}: {w}" for w in wa if w not in both)
            + tuple(f"{nb}: {w}" for w in wb if w not in both))


def _gc_warnings(names: tuple[str, str], samples: list[list[float]], counts: list[list[int]],
                 gc_ns: list[list[int]], mode: str, full: int) -> tuple[str, ...]:
    """The collector's share of the timed calls, when it matters (1 % of either side's timed time or more)."""
    out = []
    for name, s, c, g in zip(names, samples, counts, gc_ns, strict=True):
        hit = sum(x > 0 for x in c)
        share = _gc_share(s, g)
        if hit and share >= 0.01:
            who = ("the collector, not other programs" if _gc_explains(s, g) else
                   f"too small a share to explain the spread of {spread(s):.0%} (IQR / median) by itself: other "
                   "programs may account for the rest")
            out.append(f"{name}: the garbage collector ran during {hit} of {len(c)} timed samples ({sum(c)} "
                       f"collections, {full} of them full over the whole comparison), {share:.0%} of its timed "
                       f"time — {who}. gc='frozen' keeps it off the objects alive "
                       f"before the comparison (it hides {MODES['frozen'].split(' (')[0]}); gc='disabled' turns "
                       "it off (it hides the cost of the garbage the calls make)")
    if out and mode != "as-is":
        out.append(f"measured with gc={mode!r}, which hides {MODES[mode]}")
    return tuple(out)


def plan_looks(rounds: int, max_rounds: int, alpha: float, affordable: float | None = None
               ) -> tuple[tuple[int, float], ...]:
    """The sequential plan: ``(rounds so far, α of that look)`` for each planned look.

    Looks come after ``rounds``, ``2 × rounds`` … rounds, the last at ``max_rounds`` — or at ``affordable``
    rounds when that is fewer (never below ``rounds``: the first look always happens). Look ``k`` spends
    ``α · (n_k − n_{k−1}) / n_last``; the spent α's add up to ``alpha`` (see the module docstring). A look too
    early for the sign test ever to reach its α (``n`` rounds all one way give p = 2 / 2ⁿ) is not planned:
    its share goes to the next look; a single look is moved to the first round count that can.
    """
    last = max_rounds if affordable is None else max(rounds, min(max_rounds, int(affordable)))
    marks = [*range(rounds, last, rounds), last]
    while len(marks) > 1 and 2 * 0.5 ** marks[0] >= alpha * marks[0] / last:
        marks.pop(0)  # cannot decide there: merged into the next look
    plan = [(n, alpha * (n - prev) / last) for prev, n in zip([0, *marks[:-1]], marks, strict=True)]
    if len(plan) == 1:
        plan = [(max(plan[0][0], _fewest_rounds(alpha)), alpha)]
    return tuple(plan)


def _fewest_rounds(alpha: float) -> int:
    """The fewest paired rounds in which the two-sided sign test can reach p < alpha (all rounds one way)."""
    return math.floor(math.log2(2 / alpha)) + 1


def _estimate(a: Any, b: Any, paired: bool, alpha_look: float, seed: int) -> RatioEstimate:
    # enough resamples that each tail of the interval rests on ~25 of them or more, however small α gets
    resamples = max(2000, math.ceil(50 / alpha_look))
    return ratio_of_medians(a, b, paired=paired, confidence=1 - alpha_look, resamples=resamples, seed=seed)


def _build(na: str, nb: str, a: np.ndarray, b: np.ndarray, paired: bool, min_effect: float, alpha: float,
           warnings: tuple[str, ...], seed: int, *, est: RatioEstimate | None = None,
           alpha_look: float | None = None, look: int = 1, looks: int = 1,
           gc_counts: tuple[tuple[int, ...], tuple[int, ...]] = ((), ()),
           gc_ns: tuple[tuple[int, ...], tuple[int, ...]] = ((), ()), gc_mode: str = "as-is") -> Comparison:
    alpha_look = alpha if alpha_look is None else alpha_look
    est = est or _estimate(a, b, paired, alpha_look, seed)
    verdict = verdict_for(est.ci, est.p_value, min_effect, alpha_look)
    return _signed(Comparison(na, nb, tuple(map(float, a)), tuple(map(float, b)), est.ratio, est.ci, est.p_value,
                              verdict, paired, min_effect, alpha, warnings, fingerprint(), confidence=1 - alpha_look,
                              look=look, looks=looks, baseline_gc=gc_counts[0], candidate_gc=gc_counts[1],
                              baseline_gc_ns=tuple(map(int, gc_ns[0])), candidate_gc_ns=tuple(map(int, gc_ns[1])),
                              gc=gc_mode))
