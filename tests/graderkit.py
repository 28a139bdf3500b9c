"""The test kit for exercise graders (docs/labs.md): a grader must pass the reference and fail everything else.

    from graderkit import assert_grader, standard_cheats

    GRADER_CASES = {                      # module level in tests/test_labNN.py; bench_graders.py runs it 10×
        "grade": lambda fn, experiment: lab03.check(fn, experiment, rounds=4),
        "experiment": lambda: Experiment.plan("…", "…", predicted_ratio=0.3),   # a fresh record per grading
        "reference": reference, "baseline": lab03.baseline, "wrong": wrong,
        "cheats": {**standard_cheats(lab03.baseline, lab03, wrong=wrong, size=lambda d, *_: d.size,
                                     at_least=20_000),
                   "walks around the meter": ...},
    }

    def test_grader():
        assert_grader(**GRADER_CASES)

Each cheat is a *category* of what a hurried learner might try instead of the work, built generically over the
lab's baseline (which answers right, slowly) so that every lab can use those that apply:

* :func:`memoised`, :func:`hard_coded` (answers for the inputs a learner could see: the dataset, the cells);
* :func:`size_gated`, :func:`count_gated`, :func:`stack_gated` — honest only when it thinks it is checked,
  answering fast and wrong (the lab's wrong answer, or the last answer it computed) when it thinks it is
  timed or metered;
* :func:`lazy` (the work happens when the grader reads the answer), :func:`subclassed` (a subclass of the
  answer's type), :func:`always_equal` (``__eq__`` says True to everything);
* :func:`tampering_lab` (replaces the lab module's names: the baseline slowed, the kit's functions faked),
  :func:`tampering_code` (swaps the baseline's ``__code__``), :func:`tampering_labkit` (``labkit.compare``,
  ``labkit.grading.kit``'s functions, ``time.perf_counter_ns``);
* :func:`mutating` (changes a shared object, or unhooks a meter, before doing the honest work);
* :func:`malformed` (answers that break naive graders: None, raising ``__eq__``/``__repr__``, a
  self-containing list, ``SystemExit``);
* work finished after the call returns — :func:`filled_later` (an empty container filled by a thread once it
  has returned), :func:`left_running` (a thread left alive after the answer);
* the other side slowed while the learner's code is idle — :func:`idle_hog` (a thread started before the
  grading that burns the CPU, holding the GIL, whenever the learner's function is not running),
  :func:`slows_between` (a profile hook, or gc thresholds and a gc callback, set on the way out and cleared on
  the way in);
* honest mistakes with the inputs — :func:`input_cheats` (the reference writing into the caller's data, or
  handing it back as the answer): a lab adds them where its function takes a list, dict or array;
* experiment records that are not this experiment — :func:`record_cheats`, which :func:`run_cases` grades with
  the reference on its own: a record planned in another lab's notebook, one concluded already (with a
  hand-built comparison), one dated in the future, one whose hypothesis is a ``str`` subclass that prints
  something else, one whose ``save``/``conclude`` were replaced on the instance.

``assert_grader`` also grades the reference with ``experiment=None`` (it must fail, at the prediction) when
the cases name an ``experiment`` factory.
"""

from __future__ import annotations

import builtins
import functools
import inspect
import pickle
import sys
import time
import types
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from labkit.grading.kit import CheckResult

__all__ = ["memoised", "hard_coded", "size_gated", "count_gated", "stack_gated", "lazy", "subclassed",
           "always_equal", "tampering_lab", "tampering_code", "tampering_labkit", "mutating", "malformed",
           "filled_later", "left_running", "idle_hog", "slows_between", "input_cheats", "record_cheats",
           "process_cheats",
           "standard_cheats", "assert_grader", "run_cases", "Verdict"]


def _key(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    try:
        return pickle.dumps((args, sorted(kwargs.items())))
    except Exception:  # unpicklable arguments (a connection): key on what can be keyed
        return repr((tuple(a for a in args if isinstance(a, int | str | float | tuple)), sorted(kwargs.items())))


def _named(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    fn.__name__ = fn.__qualname__ = name
    return fn


def memoised(fn: Callable[..., Any], key: Callable[..., Any] | None = None) -> Callable[..., Any]:
    """The baseline behind a cache keyed on its input (``key(*args)``, default: the pickled arguments)."""
    cache: dict[Any, Any] = {}

    @functools.wraps(fn)
    def cheat(*args: Any, **kwargs: Any) -> Any:
        k = key(*args) if key is not None else _key(args, kwargs)
        if k not in cache:
            cache[k] = fn(*args, **kwargs)
        return cache[k]

    return _named(cheat, f"memoised_{getattr(fn, '__name__', 'fn')}")


def hard_coded(fn: Callable[..., Any], inputs: Iterable[tuple[Any, ...]],
               key: Callable[..., Any] | None = None, fallback: Callable[..., Any] | None = None) -> Callable[..., Any]:
    """Answers recorded up front for ``inputs`` (the ones a learner could have seen — every input the dataset
    holds, say), returned without any work; any other input gets ``fallback(*args)`` (default: the first
    recorded answer)."""
    table = {(key(*a) if key else _key(a, {})): fn(*a) for a in inputs}
    first = next(iter(table.values()), None)

    def cheat(*args: Any) -> Any:
        k = key(*args) if key else _key(args, {})
        if k in table:
            return table[k]
        return fallback(*args) if fallback is not None else first

    return _named(cheat, f"hard_coded_{getattr(fn, '__name__', 'fn')}")


def _gated(honest: Callable[..., Any], timed: Callable[..., bool], fast: Callable[..., Any] | None,
           name: str) -> Callable[..., Any]:
    """Honest when ``timed(*args)`` says no; otherwise ``fast(*args)`` (a fast wrong answer), or by default the
    last honest answer, at no cost."""
    last: list[Any] = []

    def cheat(*args: Any) -> Any:
        if timed(*args) and (last or fast is not None):
            return fast(*args) if fast is not None else last[-1]
        last[:] = [honest(*args)]
        return last[-1]

    return _named(cheat, name)


def size_gated(honest: Callable[..., Any], size: Callable[..., float], at_least: float,
               fast: Callable[..., Any] | None = None) -> Callable[..., Any]:
    """Honest on inputs smaller than ``at_least`` (``size(*args)``), ``fast`` (or a stale answer) on the big,
    timed ones."""
    return _gated(honest, lambda *a: size(*a) >= at_least, fast, "size_gated")


def count_gated(honest: Callable[..., Any], honest_calls: int = 12, fast: Callable[..., Any] | None = None
                ) -> Callable[..., Any]:
    """Honest for the first ``honest_calls`` calls (where a correctness pass sits), ``fast`` (or stale answers)
    after."""
    n = [0]

    def timed(*args: Any) -> bool:
        n[0] += 1
        return n[0] > honest_calls

    return _gated(honest, timed, fast, "count_gated")


_TELLS = ("compare", "time_loop", "calibrate", "budget", "speed", "timed", "metered", "meter", "census",
          "within_budget", "fast", "_watch", "settrace")


def stack_gated(honest: Callable[..., Any], fast: Callable[..., Any] | None = None) -> Callable[..., Any]:
    """Reads its call stack: ``fast`` (or a stale answer) when a frame above it looks like timing or metering
    (by name), or when the stack differs from the one its first call saw."""
    first: list[tuple[str, ...]] = []

    def timed(*args: Any) -> bool:
        frames = tuple(f"{fi.filename}:{fi.function}:{fi.lineno}" for fi in inspect.stack(0)[3:])
        first[:] = first or [frames]
        return frames != first[0] or any(t in f.lower() for f in frames for t in _TELLS)

    return _gated(honest, timed, fast, "stack_gated")


class _Lazy:
    """A stand-in that does the work only when read, and claims (``__class__``) to be the answer's type."""

    def __init__(self, thunk: Callable[[], Any]) -> None:
        object.__setattr__(self, "_thunk", thunk)
        object.__setattr__(self, "_value", None)

    def _get(self) -> Any:
        if object.__getattribute__(self, "_value") is None:
            object.__setattr__(self, "_value", (object.__getattribute__(self, "_thunk")(),))
        return object.__getattribute__(self, "_value")[0]

    @property  # type: ignore[misc]
    def __class__(self) -> type:  # isinstance() believes it; type() does not
        return type(self._get())

    def __getattr__(self, name: str) -> Any:
        return getattr(self._get(), name)

    def __eq__(self, other: Any) -> bool:
        return bool(self._get() == other)

    def __ne__(self, other: Any) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash(self._get())

    def __len__(self) -> int:
        return len(self._get())

    def __iter__(self) -> Any:
        return iter(self._get())

    def __getitem__(self, k: Any) -> Any:
        return self._get()[k]

    def __contains__(self, k: Any) -> bool:
        return k in self._get()

    def __bool__(self) -> bool:
        return bool(self._get())

    def __repr__(self) -> str:
        return repr(self._get())

    def __array__(self, *a: Any, **k: Any) -> Any:
        import numpy as np

        return np.asarray(self._get(), *a, **k)


def lazy(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Returns at once a proxy that computes ``fn(*args)`` when the grader first reads it (the work moved out
    of the timed call)."""
    return _named(lambda *args: _Lazy(lambda: fn(*args)), "lazy")


def _subclass_of(value: Any) -> Any:
    t = type(value)
    if t is bool or t is type(None):
        return value
    sub = type(f"Sub{t.__name__}", (t,), {})
    if t.__module__ == "numpy" and hasattr(value, "view"):
        return value.view(sub)
    try:
        return sub(value)
    except Exception:  # a type that cannot be built from its value: leave it
        return value


def subclassed(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The right answer, as an instance of a subclass of its type (a ``list`` subclass, an ndarray view…)."""
    return _named(lambda *args: _subclass_of(fn(*args)), "subclassed")


class _AlwaysEqual:
    def __init__(self, like: type) -> None:
        self._like = like

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        return self._like

    def __eq__(self, other: Any) -> bool:
        return True

    def __ne__(self, other: Any) -> bool:
        return False

    __hash__ = object.__hash__

    def __len__(self) -> int:
        return 0

    def __iter__(self) -> Any:
        return iter(())


def always_equal(fn: Callable[..., Any]) -> Callable[..., Any]:
    """No work: an object whose ``__eq__`` says True to everything, claiming the type of ``fn``'s answer (which it
    learns once, on its first call)."""
    like: list[type] = []

    def cheat(*args: Any) -> Any:
        if not like:
            like.append(type(fn(*args)))
        return _AlwaysEqual(like[0])

    return _named(cheat, "always_equal")


class _Patches:
    """Attribute changes made on the cheat's first call and undone by :func:`run_cases` after its grading."""

    def __init__(self, make: Callable[[], list[tuple[Any, str, Any]]]) -> None:
        self.make, self.saved = make, []

    def apply(self) -> None:
        if not self.saved:
            for obj, attr, new in self.make():
                self.saved.append((obj, attr, getattr(obj, attr)))
                setattr(obj, attr, new)

    def undo(self) -> None:
        for obj, attr, old in reversed(self.saved):
            setattr(obj, attr, old)
        self.saved.clear()


def _patching(honest: Callable[..., Any], make: Callable[[], list[tuple[Any, str, Any]]], name: str
              ) -> Callable[..., Any]:
    patches = _Patches(make)

    def cheat(*args: Any) -> Any:
        patches.apply()
        return honest(*args)

    cheat.undo = patches.undo  # type: ignore[attr-defined]
    return _named(cheat, name)


def _slowed(fn: Callable[..., Any], factor: float = 10.0) -> Callable[..., Any]:
    @functools.wraps(fn)
    def slow(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        out = fn(*args, **kwargs)
        time.sleep((factor - 1) * (time.perf_counter() - t0))  # ten times as long: the honest baseline looks 10×
        return out                                              # faster, at no CPU cost
    return slow


def _fake_pass(*args: Any, **kwargs: Any) -> Any:
    from labkit.grading.kit import passed

    return passed("(faked by the learner)")


_KIT = ("answers", "metered", "timed", "planned", "prediction", "difference")


def tampering_lab(honest: Callable[..., Any], lab: types.ModuleType, baseline: str = "baseline") -> Callable[..., Any]:
    """On its first call, replaces the lab module's names: ``lab.baseline`` by a 10× slower copy, and every kit
    function the lab imported (``lab.timed``, ``lab.difference``…) by one that passes; then answers honestly."""
    def make() -> list[tuple[Any, str, Any]]:
        out = [(lab, baseline, _slowed(getattr(lab, baseline)))]
        return out + [(lab, n, _fake_pass if n != "difference" else (lambda *a, **k: None))
                      for n in _KIT if hasattr(lab, n)]
    return _patching(honest, make, "tampering_lab")


def _slow_code(*args: Any, **kwargs: Any) -> Any:
    import builtins as b  # the code runs with the lab's globals: it imports what it needs
    import time as clock

    t0 = clock.perf_counter()
    out = b.__dict__["_graderkit_original"](*args, **kwargs)
    clock.sleep(9 * (clock.perf_counter() - t0))
    return out


def tampering_code(honest: Callable[..., Any], lab: types.ModuleType, baseline: str = "baseline") -> Callable[..., Any]:
    """On its first call, swaps ``lab.baseline.__code__`` for code that takes ten times as long —
    the same function object, so a grader holding a reference to it is fooled too."""
    patches = _Patches(lambda: [])

    def cheat(*args: Any) -> Any:
        fn = getattr(lab, baseline)
        if not patches.saved:
            builtins.__dict__["_graderkit_original"] = types.FunctionType(
                fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
            patches.saved.append((fn, "__code__", fn.__code__))
            fn.__code__ = _slow_code.__code__
        return honest(*args)

    cheat.undo = patches.undo  # type: ignore[attr-defined]
    return _named(cheat, "tampering_code")


def tampering_labkit(honest: Callable[..., Any]) -> Callable[..., Any]:
    """On its first call, replaces ``labkit.compare`` (baseline made 10× slower), ``labkit.grading.kit``'s functions
    (they pass) and ``time.perf_counter_ns``/``perf_counter`` (a clock that runs at a tenth of the speed while
    this function runs); then answers honestly."""
    import labkit
    import labkit.grading.kit

    compare_module = sys.modules["labkit.measure.comparison"]  # `labkit.compare` is the function, re-exported
    real_ns, credit, inside = time.perf_counter_ns, [0], [0]

    def slow_clock_ns() -> int:
        now = real_ns()
        return now - credit[0] - (int(0.9 * (now - inside[0])) if inside[0] else 0)

    def make() -> list[tuple[Any, str, Any]]:
        real_compare = compare_module.compare

        def compare(a: Any, b: Any, *args: Any, **kwargs: Any) -> Any:
            return real_compare(_slowed(a) if callable(a) else a, b, *args, **kwargs)

        out: list[tuple[Any, str, Any]] = [(compare_module, "compare", compare), (labkit, "compare", compare),
                                           (time, "perf_counter_ns", slow_clock_ns),
                                           (time, "perf_counter", lambda: slow_clock_ns() / 1e9)]
        return out + [(labkit.grading.kit, n, _fake_pass if n != "difference" else (lambda *a, **k: None))
                      for n in _KIT if hasattr(labkit.grading.kit, n)]

    patches = _Patches(make)

    def cheat(*args: Any) -> Any:
        patches.apply()
        inside[0] = real_ns()
        try:
            return honest(*args)
        finally:
            credit[0] += int(0.9 * (real_ns() - inside[0]))
            inside[0] = 0

    cheat.undo = patches.undo  # type: ignore[attr-defined]
    return _named(cheat, "tampering_labkit")


def mutating(honest: Callable[..., Any], mutate: Callable[..., Any], name: str = "mutating") -> Callable[..., Any]:
    """Calls ``mutate(*args)`` first — change a shared object (a client's delay, a connection's settings),
    unhook a meter (``sys.settrace(None)``, ``conn.set_trace_callback(None)``) — then answers honestly."""
    def cheat(*args: Any) -> Any:
        mutate(*args)
        return honest(*args)
    return _named(cheat, name)


class _Nasty:
    """An answer whose every dunder raises: a grader that compares or prints it naively crashes."""

    def __eq__(self, other: Any) -> bool:
        raise RuntimeError("__eq__ of a malformed answer")

    def __repr__(self) -> str:
        raise RuntimeError("__repr__ of a malformed answer")

    __str__ = __repr__
    __hash__ = None  # type: ignore[assignment]

    def __len__(self) -> int:
        raise RuntimeError("__len__ of a malformed answer")

    def __iter__(self) -> Any:
        raise RuntimeError("__iter__ of a malformed answer")


class _Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("an exception that cannot be printed")


def malformed() -> dict[str, Callable[..., Any]]:
    """Answers that break a naive grader: each must become a failed item, never a crash."""
    def selfish(*args: Any) -> Any:
        loop: list[Any] = []
        loop.append(loop)
        return loop

    def unprintable(*args: Any) -> Any:
        raise _Unprintable()

    def exits(*args: Any) -> Any:
        raise SystemExit(3)

    return {"malformed: None": _named(lambda *a: None, "returns_none"),
            "malformed: raising dunders": _named(lambda *a: _Nasty(), "returns_nasty"),
            "malformed: contains itself": _named(selfish, "returns_loop"),
            "malformed: unprintable error": _named(unprintable, "raises_unprintable"),
            "malformed: SystemExit": _named(exits, "exits")}


def _empty_like(value: Any, args: tuple[Any, ...] = ()) -> Any:
    """An empty (or zeroed) container of ``value``'s type that a thread can fill in place later, or None (an
    array takes the shape of an input array of as many dimensions, as an answer computed from it would)."""
    import numpy as np

    if type(value) is np.ndarray:
        for a in args:
            if type(a) is np.ndarray and a.ndim == value.ndim:
                return np.zeros(a.shape, dtype=value.dtype)
    if type(value) is list:
        return []
    if type(value) is dict:
        return {}
    if type(value) is set:
        return set()
    if type(value) is np.ndarray:
        return np.zeros_like(value)
    return None


def _fill(box: Any, value: Any) -> None:
    if type(box) is list:
        box.extend(value)
    elif type(box) in (dict, set):
        box.update(value)
    else:
        box[...] = value


def filled_later(honest: Callable[..., Any], honest_calls: int = 12) -> Callable[..., Any]:
    """Honest for the first ``honest_calls`` calls (and until it has seen an answer of each type); then returns at
    once an empty container of the answer's type and fills it from a thread (the work off the clock, the answer
    right by the time a grader that waits reads it). An answer of a type that cannot be filled later (bytes, a
    number) is the previous call's, the work for this one done by the thread after the call returned."""
    import threading

    n, last = [0], []

    def cheat(*args: Any) -> Any:
        n[0] += 1
        if n[0] <= honest_calls or not last:
            last[:] = [honest(*args)]
            return last[0]
        box = _empty_like(last[0], args)

        def later() -> None:
            time.sleep(0.002)  # once the call has returned
            try:
                out = honest(*args)
            except Exception:  # the grader has moved on (its service stopped): nothing left to fill
                return
            if box is not None:
                _fill(box, out)

        threading.Thread(target=later, daemon=True).start()
        return box if box is not None else last[0]  # an answer that cannot be filled later: the last one

    return _named(cheat, "filled_later")


def left_running(honest: Callable[..., Any], seconds: float = 0.3) -> Callable[..., Any]:
    """The answer, computed honestly — and a thread left working after it (deferred clean-up, say: ``seconds``
    of CPU) that the grader's next calls would share the machine with."""
    import threading

    def clean_up() -> None:
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            pass

    def cheat(*args: Any) -> Any:
        out = honest(*args)
        threading.Thread(target=clean_up, daemon=True).start()
        return out

    return _named(cheat, "left_running")


def idle_hog(honest: Callable[..., Any], chunk: int = 200_000) -> Callable[..., Any]:
    """A thread started before the grading (as a notebook cell would start it) that burns the CPU in GIL-holding
    C calls whenever the learner's function is *not* running — so the baseline, timed in between, runs slowly.
    ``cheat.before()`` starts it, ``cheat.undo()`` stops it (:func:`run_cases` calls both)."""
    import threading

    inside, stop, started = threading.Event(), threading.Event(), []

    def hog() -> None:
        while not stop.is_set():
            if inside.is_set():
                time.sleep(0.0002)
            else:
                sum(range(chunk))  # a C loop that holds the GIL throughout

    def cheat(*args: Any) -> Any:
        inside.set()
        try:
            return honest(*args)
        finally:
            inside.clear()

    def before() -> None:
        stop.clear()
        t = threading.Thread(target=hog, daemon=True, name="a notebook's busy thread")
        started[:] = [t]
        t.start()

    def undo() -> None:
        stop.set()
        for t in started:
            t.join(5)

    cheat.before, cheat.undo = before, undo  # type: ignore[attr-defined]
    return _named(cheat, "idle_hog")


def slows_between(honest: Callable[..., Any], how: str = "profile") -> Callable[..., Any]:
    """Leaves the interpreter slower on the way out and puts it right on the way in, so that whatever runs
    between its calls (the baseline) pays: ``how="profile"`` — a profile hook on the thread (every call and
    return goes through it); ``how="gc"`` — gc thresholds of 1 and a gc callback that sleeps."""
    import gc

    def hook(*a: Any) -> None:
        return None

    def sleepy(phase: str, info: Any) -> None:
        time.sleep(0.0001)

    def cheat(*args: Any) -> Any:
        if how == "profile":
            sys.setprofile(None)
        else:
            gc.set_threshold(700, 10, 10)
            while sleepy in gc.callbacks:
                gc.callbacks.remove(sleepy)
        try:
            return honest(*args)
        finally:
            if how == "profile":
                sys.setprofile(hook)
            else:
                gc.set_threshold(1, 1, 1)
                gc.callbacks.append(sleepy)

    def undo() -> None:
        sys.setprofile(None)
        gc.set_threshold(700, 10, 10)
        while sleepy in gc.callbacks:
            gc.callbacks.remove(sleepy)

    cheat.undo = undo  # type: ignore[attr-defined]
    return _named(cheat, f"slows_between_{how}")


def _scribble(x: Any) -> bool:
    """Changes a list, dict or array in place (True), or says it cannot (False)."""
    import numpy as np

    if type(x) is list and x:
        x.reverse() if len(x) > 1 and x[0] != x[-1] else x.append(x[0])
        return True
    if type(x) is dict and x:
        x.pop(next(iter(x)))
        return True
    if type(x) is np.ndarray and x.size and x.flags.writeable:
        x.flat[0] = x.flat[0] + 1 if x.dtype.kind in "iuf" else x.flat[-1]
        return True
    return False


def input_cheats(reference: Callable[..., Any], returns: bool = True) -> dict[str, Callable[..., Any]]:
    """Two honest mistakes with the caller's data, over the (fast, right) reference: it **writes into its
    input** after answering (reverses it, drops a key, bumps a cell — the caller's data is gone), and, with
    ``returns`` (for a lab whose answer has an input's type), it **returns its input**, the answer written over
    the caller's list or array."""
    import numpy as np

    def writes(*args: Any) -> Any:
        out = reference(*args)
        for a in args:
            if _scribble(a):
                break
        return out

    def hands_back(*args: Any) -> Any:
        out = reference(*args)
        for a in args:
            if type(a) is type(out) is list:
                a[:] = out
                return a
            if type(a) is type(out) is np.ndarray and a.shape == out.shape and a.dtype == out.dtype:
                a[...] = out
                return a
            if type(a) is type(out) is dict:
                a.clear()
                a.update(out)
                return a
        return out

    out = {"writes into its input": _named(writes, "writes_its_input")}
    if returns:
        out["returns its input"] = _named(hands_back, "returns_its_input")
    return out


class _Lying(str):
    """A hypothesis that is the template underneath and prints as something else."""

    def __str__(self) -> str:
        return "Batching the reads removes one round trip per item, so the whole call should take a third."

    def split(self, *a: Any, **k: Any) -> list[str]:  # type: ignore[override]
        return str(self).split(*a, **k)


def record_cheats(experiment: Callable[[], Any]) -> dict[str, Callable[[], Any]]:
    """Experiment records that are not a plan for this check, each built from a fresh ``experiment()``: planned
    in another lab's notebook, concluded already (with a comparison built by hand), dated in the future, a
    hypothesis that prints one thing and is another, and ``save``/``conclude`` replaced on the instance."""
    import dataclasses
    import datetime as dt

    from labkit.measure.comparison import Comparison

    def other_lab() -> Any:
        e = experiment()
        return dataclasses.replace(e, lab="98" if e.lab != "98" else "97")

    def concluded() -> Any:
        fake = Comparison("baseline", "mine", (1.0,) * 10, (0.3,) * 10, 0.3, (0.29, 0.31), 1e-6, "faster", True)
        return experiment().conclude(fake)

    def future() -> Any:
        later = (dt.datetime.now(dt.UTC) + dt.timedelta(days=1)).isoformat(timespec="seconds")
        return dataclasses.replace(experiment(), planned_at=later)

    def lying() -> Any:
        return dataclasses.replace(experiment(), hypothesis=_Lying("TODO: what will you change?"))

    def shadowed() -> Any:
        e = experiment()
        object.__setattr__(e, "save", lambda *a, **k: "/nonexistent/saved.json")
        object.__setattr__(e, "conclude", lambda *a, **k: e)
        return e

    return {"record: another lab's": other_lab, "record: concluded already": concluded,
            "record: dated in the future": future, "record: its text lies": lying,
            "record: save and conclude replaced": shadowed}


def standard_cheats(baseline: Callable[..., Any], lab: types.ModuleType, *, wrong: Callable[..., Any],
                    size: Callable[..., float], at_least: float, honest_calls: int = 12,
                    honest: Callable[..., Any] | None = None) -> dict[str, Callable[..., Any]]:
    """The cheats every lab's grader must fail, built over its ``baseline`` (honest, slow), a fast ``wrong``
    answer and its module: memoised; gated by size (``size(*args) >= at_least`` is "timed"), by call count
    and by stack, answering ``wrong`` when they think they are timed; lazy, subclassed, always-equal; the
    three tamperings; the malformed answers. Add the lab's own: hard-coded inputs (the dataset's), meters
    walked around, shared objects mutated, fakes read behind their API. The tamperings replace the lab's
    public name of ``baseline`` (its ``__name__``: ``lab00.unique_in_order``, ``lab03.baseline``).

    ``honest``: what the cheats wrap instead of the baseline, for a lab whose baseline fails before the step a
    cheat aims at (lab 05's sends every field, lab 06's is over the allocation budget): a right but slow function;
    the tamperings still replace the lab's baseline."""
    name = baseline.__name__
    over = baseline if honest is None else honest
    if getattr(lab, name, None) is None:
        raise AssertionError(f"{lab.__name__} has no public {name!r}: pass the lab's own baseline")
    return {"memoised": memoised(over),
            "size-gated": size_gated(over, size, at_least, wrong),
            "call-count-gated": count_gated(over, honest_calls, wrong),
            "stack-inspecting": stack_gated(over, wrong),
            "lazy answer": lazy(over),
            "subclassed answer": subclassed(over),
            "always-equal": always_equal(over),
            "tampers with the lab's names": tampering_lab(over, lab, name),
            "swaps the baseline's code": tampering_code(over, lab, name),
            "tampers with labkit's names": tampering_labkit(over),
            **malformed()}


def process_cheats(reference: Callable[..., Any]) -> dict[str, Callable[..., Any]]:
    """The reference — fast and right — plus one offence against the grading each, so that only the grader's
    defence can fail it: its answers filled by a thread after it returned (:func:`filled_later`), a thread left
    running (:func:`left_running`), a busy thread that slows whatever runs between its calls
    (:func:`idle_hog`), and the interpreter slowed between its calls (:func:`slows_between`: a profile hook; gc
    thresholds and a callback). :func:`run_cases` grades them for every lab."""
    return {"process: filled by a thread later": filled_later(reference, honest_calls=0),
            "process: leaves a thread running": left_running(reference),
            "process: a busy thread while idle": idle_hog(reference),
            "process: a profile hook between calls": slows_between(reference, "profile"),
            "process: gc thresholds between calls": slows_between(reference, "gc")}


@dataclass(frozen=True)
class Verdict:
    """One case's grade: its name, whether it passed, and the grade itself."""

    case: str
    passed: bool
    grade: CheckResult


def run_cases(grade: Callable[..., CheckResult], reference: Callable[..., Any], baseline: Callable[..., Any],
              wrong: Callable[..., Any], cheats: Mapping[str, Callable[..., Any]],
              experiment: Callable[[], Any] | None = None,
              others: Mapping[str, Callable[..., Any]] | None = None) -> list[Verdict]:
    """Grade the reference, the other honest solutions (``others``: the case ``also: NAME``, which must pass too;
    :func:`should_pass`), the baseline, the wrong answer and every cheat once each — with a fresh
    ``experiment()`` record each when the cases have one, plus the reference once with ``experiment=None``
    (the case "no experiment") and once with each of :func:`record_cheats`; the :func:`process_cheats` are
    graded beside the lab's own. A cheat's ``cheat.before()`` runs
    before its grading and its patches (``cheat.undo``) are undone after it."""
    cases = {"reference": reference, **{f"also: {k}": fn for k, fn in (others or {}).items()},
             "baseline": baseline, "wrong": wrong, **cheats, **process_cheats(reference)}
    out = []
    for name, fn in cases.items():
        before = getattr(fn, "before", None)
        try:
            if before is not None:
                before()
            g = grade(fn) if experiment is None else grade(fn, experiment())
        finally:
            undo = getattr(fn, "undo", None)
            if undo is not None:
                undo()
        out.append(Verdict(name, g.passed, g))
    if experiment is not None:
        g = grade(reference, None)
        out.append(Verdict("no experiment", g.passed, g))
        for name, record in record_cheats(experiment).items():
            g = grade(reference, record())
            out.append(Verdict(name, g.passed, g))
    return out


def should_pass(case: str) -> bool:
    """Whether a case of :func:`run_cases` must pass: the reference and the other honest solutions."""
    return case == "reference" or case.startswith("also: ")


def _timed_only(grade: CheckResult) -> bool:
    """Whether every item a grade failed on is a timed one (a budget or a speed-up), none of correctness or the
    prediction: the only verdicts a busy machine can change."""
    bad = [i for i in grade.items if not i.ok]
    return bool(bad) and all(i.criterion not in ("correctness", "prediction", None, "") for i in bad)


def assert_grader(grade: Callable[..., CheckResult], reference: Callable[..., Any],
                  baseline: Callable[..., Any], wrong: Callable[..., Any],
                  cheats: Mapping[str, Callable[..., Any]], experiment: Callable[[], Any] | None = None,
                  others: Mapping[str, Callable[..., Any]] | None = None) -> None:
    """The reference and ``others`` pass (with their experiment, when the cases give a factory); the baseline, the wrong answer,
    every cheat and the reference without an experiment fail — the wrong answer at correctness, the missing
    experiment at the prediction."""
    if not cheats:
        raise AssertionError("a grader test needs its cheats: at least memoised and hard_coded")
    for v in run_cases(grade, reference, baseline, wrong, cheats, experiment, others):
        if should_pass(v.case) and not v.passed and _timed_only(v.grade):
            # an honest solution refused only on a timed criterion is checked once more, as a learner on a busy
            # machine would (the other worker's test runs beside it); it must pass then. A cheat gets no second try.
            fn = reference if v.case == "reference" else (others or {})[v.case.removeprefix("also: ")]
            again = grade(fn) if experiment is None else grade(fn, experiment())
            v = Verdict(v.case, again.passed, again)
        if should_pass(v.case):
            assert v.passed, f"the {v.case} solution must pass:\n{v.grade}"
            if experiment is not None:
                last = v.grade.items[-1]
                done = getattr(last, "detail", None)
                assert last.criterion == "prediction" and getattr(done, "concluded_at", None), \
                    f"the reference must pass with its experiment concluded, last:\n{v.grade}"
        else:
            assert not v.passed, f"the {v.case} case must fail, but passed:\n{v.grade}"
        faked = [i for i in v.grade.items if "faked by the learner" in i.message]
        assert not faked, f"the {v.case} case replaced the grader's own functions:\n{v.grade}"
        bad = [i for i in v.grade.items if not i.ok]
        if v.case == "wrong":
            if bad and bad[0].criterion:
                assert bad[0].criterion == "correctness", f"a wrong answer must fail at correctness:\n{v.grade}"
            else:
                assert len(v.grade.items) == 1 and not v.grade.items[0].ok, \
                    f"a wrong answer must fail at correctness, first:\n{v.grade}"
        if v.case == "no experiment" or v.case.startswith("record: "):
            assert bad and bad[0].criterion == "prediction", f"{v.case} must fail at the prediction:\n{v.grade}"
