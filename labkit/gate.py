"""Time gated only against the base revision, in the same job: ``labkit budget gate --base REV``.

A time limit written in a test flakes: CI machines differ by tens of percent, and a docs-only change fails a
fixed 20 % gate on a slow day. What does not flake is a comparison made in one job, on one machine, between the
base revision and the working tree, timed interleaved (base, tree, tree, base …) so that whatever the machine
does meanwhile lands on both alike. Declare the timed cases in a file of the repository::

    # perf_cases.py
    from labkit.gate import timed

    @timed(threshold=0.10)                  # fail on a confident slowdown of more than 10 %
    def export_1000_orders():
        from shop.export import export, orders
        data = orders(1000)                 # set-up: not timed
        return lambda: export(data)         # the call that is timed

``labkit budget gate --base origin/main --cases perf_cases.py`` checks the base out in a git worktree, and for
each case starts one worker process per tree (importing the project from that tree: its root, or ``src/``),
both loading the *working tree's* cases file, then times them with :func:`labkit.compare_sides` — planned
looks, α spent across them.

The gate asks one question per case: is the tree slower than the base by more than the threshold? It is
answered by comparing the tree with the base's samples scaled by ``1 + threshold``: ``slower`` there means the
whole interval of the ratio lies above ``1 + threshold`` and the sign test agrees — a confident slowdown beyond
the threshold, which fails. Anything else passes: an unchanged tree is confidently *not* that slow, and a noisy
machine gives ``inconclusive``, which is reported, never a failure. The chance of a false failure is at most
``alpha`` per case, however many looks were taken.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from labkit.errors import BadInputError, ProbeUnavailable

__all__ = ["GateResult", "gate", "timed"]


def timed(threshold: float = 0.10) -> Callable[[Callable[[], Callable[[], Any]]], Callable[[], Callable[[], Any]]]:
    """Declare a timed case: a function that sets up and returns the zero-argument call to time; the gate fails
    when the tree is confidently slower than the base by more than ``threshold`` (0.10: 10 %)."""
    if not (isinstance(threshold, int | float) and 0 <= threshold < 10):
        raise BadInputError(f"threshold= is the slowdown that fails (0.10 = 10 %), got {threshold!r}")

    def mark(setup: Callable[[], Callable[[], Any]]) -> Callable[[], Callable[[], Any]]:
        setup._labkit_threshold = float(threshold)  # type: ignore[attr-defined]
        return setup

    return mark


@dataclass(frozen=True)
class GateResult:
    """One case's outcome: the tree's time over the base's (``ratio``, its interval ``ci``), the threshold,
    and ``verdict`` — ``slower`` (beyond the threshold: fails), ``not slower``, or ``inconclusive``."""

    case: str
    ratio: float
    ci: tuple[float, float]
    threshold: float
    verdict: str
    rounds: int
    warnings: tuple[str, ...] = ()

    @property
    def failed(self) -> bool:
        return self.verdict == "slower"

    def __str__(self) -> str:
        lo, hi = self.ci
        word = {"slower": "FAIL", "not slower": "ok", "inconclusive": "inconclusive (passes)"}[self.verdict]
        return (f"{word:<22} {self.case}: tree / base = {self.ratio:.3f} (interval {lo:.3f}–{hi:.3f}, "
                f"{self.rounds} rounds), threshold +{self.threshold:.0%}")


def _load(cases: Path) -> Any:
    spec = importlib.util.spec_from_file_location("_labkit_cases", cases)
    if spec is None or spec.loader is None:
        raise BadInputError(f"cannot load {cases} as a Python file")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _worker(cases: str, case: str) -> int:
    """The worker: load the cases, set up one, answer warm/sample/close on stdin with JSON lines on stdout."""
    from labkit.measure.collector import collector
    from labkit.measure.workers import LocalSide

    proto = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # what the measured code prints goes to stderr, not into the protocol
    module = _load(Path(cases))
    if case == "":
        found = {name: f._labkit_threshold for name, f in vars(module).items()
                 if callable(f) and hasattr(f, "_labkit_threshold")}
        proto.write(json.dumps(found) + "\n")
        proto.flush()
        return 0
    fn = getattr(module, case)()
    if not callable(fn):
        raise BadInputError(f"the case {case} must return the call to time (a function of no arguments)")
    with collector("as-is", time.perf_counter_ns) as watch:
        side = LocalSide(fn, 0, (), None, 2, 0.001, time.perf_counter_ns, watch)
        for line in sys.stdin:
            op, r = json.loads(line)
            if op == "warm":
                reply: Any = side.warm()
            elif op == "sample":
                reply = side.sample(r)
            else:
                break
            proto.write(json.dumps(reply) + "\n")
            proto.flush()
    return 0


def _worker_env(found: Path) -> dict[str, str]:
    """The environment of a worker importing the project from *found* ahead of whatever PYTHONPATH names."""
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(found), *filter(None, [os.environ.get("PYTHONPATH")])]))


def _installable(tree: Path) -> bool:
    return (tree / "pyproject.toml").is_file() or (tree / "setup.py").is_file()


def _import_root(tree: Path, into: Path | None) -> Path:
    """Where a worker imports *tree*'s project from: the folder *tree* was installed into, else its ``src/`` when
    it has one, else its root."""
    if into is not None:
        return into
    return tree / "src" if (tree / "src").is_dir() else tree


def _copy_of(repo: Path, dest: Path) -> Path:
    """The working tree's files as git sees them (tracked, and untracked but not ignored) copied to *dest*, so a
    build leaves its ``build/`` and ``*.egg-info`` there, not in the user's working tree."""
    for name in _git(repo, "ls-files", "-z", "--cached", "--others", "--exclude-standard").split("\0"):
        if name and (repo / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(repo / name, dest / name)
    return dest


def _install(tree: Path, into: Path) -> Path:
    """Build and install *tree*'s project (its compiled parts too) into the folder *into*, without its
    dependencies (those are this environment's) and without build isolation (the build backend must be
    installed here, as it is in the job that built the project)."""
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                           "--no-input", "--target", str(into), str(tree)], capture_output=True, text=True,
                          timeout=1800)
    if done.returncode != 0:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-8:])
        raise BadInputError(
            f"could not install {tree} to time it (pip install --no-deps --no-build-isolation --target):\n{tail}\n"
            "install the project's build requirements in this environment (e.g. pip install setuptools), or "
            "pass --no-install to import the project from the tree's source instead")
    return into


class _TreeSide:
    """One side of the comparison: a worker importing the project from *tree*; its samples times *scale*."""

    def __init__(self, tree: Path, found: Path, cases: Path, case: str, scale: float = 1.0) -> None:
        self.tree, self.scale, self.full = tree, scale, 0
        self.proc = subprocess.Popen([sys.executable, "-P", "-m", "labkit.gate", str(cases), case], cwd=tree,
                                     env=_worker_env(found), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)

    def _ask(self, op: str, r: int = 0) -> Any:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write(json.dumps([op, r]) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except OSError:
            line = ""
        if not line:
            self.proc.kill()
            err = (self.proc.stderr.read() if self.proc.stderr else "").strip().splitlines()[-8:]
            raise ProbeUnavailable(f"the worker timing {self.tree} stopped:\n" + "\n".join(err))
        return json.loads(line)

    def warm(self) -> tuple[int, list[float], float]:
        n, seen, share = self._ask("warm")
        return n, seen, share

    def sample(self, r: int) -> tuple[float, int, int]:
        ns, collections, in_gc = self._ask("sample", r)
        return ns * self.scale, collections, in_gc

    def close(self) -> None:
        with contextlib.suppress(OSError):
            if self.proc.stdin:
                self.proc.stdin.write(json.dumps(["stop", 0]) + "\n")
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _git(repo: Path, *args: str) -> str:
    out = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise BadInputError(f"git {' '.join(args)} failed in {repo}: {out.stderr.strip() or out.stdout.strip()}")
    return out.stdout.strip()


def _cases_in(tree: Path, found: Path, cases: Path) -> dict[str, float]:
    side = subprocess.run([sys.executable, "-P", "-m", "labkit.gate", str(cases), ""], cwd=tree,
                          env=_worker_env(found), capture_output=True, text=True,
                          timeout=120)
    if side.returncode != 0:
        raise BadInputError(f"{cases} could not be loaded:\n" + "\n".join(side.stderr.strip().splitlines()[-8:]))
    found = json.loads(side.stdout.splitlines()[-1])
    if not found:
        raise BadInputError(f"{cases} declares no timed case: decorate a set-up function with "
                            "@labkit.gate.timed(threshold=0.10), returning the call to time")
    return found


def gate(repo: str | Path, base: str, cases: str | Path, *, max_time: float = 20.0, rounds: int = 20,
         alpha: float = 0.05, seed: int = 0, progress: bool | None = False,
         install: bool | None = None) -> list[GateResult]:
    """Time every case of *cases* (a file of the working tree) on the base revision and on the working tree,
    interleaved, and say for each whether the tree is confidently slower beyond its threshold.

    ``install``: build and install each tree's project into a folder of its own (``pip install --no-deps
    --no-build-isolation --target``), so compiled parts are timed as built from that tree; by default, when the
    working tree has a ``pyproject.toml`` or ``setup.py``. ``False`` imports each tree's source as it stands."""
    from labkit.measure.comparison import compare_sides

    repo = Path(repo).resolve()
    cases = Path(cases)
    cases = (cases if cases.is_absolute() else repo / cases).resolve()
    if not cases.is_file():
        raise BadInputError(f"no cases file at {cases}: declare the timed cases there (see labkit.gate)")
    sha = _git(repo, "rev-parse", "--verify", f"{base}^{{commit}}")
    install = _installable(repo) if install is None else bool(install)
    work = Path(tempfile.mkdtemp(prefix="labkit-gate-"))
    base_tree = work / f"base-{sha[:10]}"
    results = []
    try:
        _git(repo, "worktree", "add", "--detach", "--quiet", str(base_tree), sha)
        built = {base_tree: base_tree, repo: _copy_of(repo, work / "tree")} if install else {}
        roots = {t: _import_root(t, _install(built[t], work / f"site-{i}") if install else None)
                 for i, t in enumerate((base_tree, repo))}
        found = _cases_in(repo, roots[repo], cases)
        for case, threshold in found.items():
            sides = [_TreeSide(base_tree, roots[base_tree], cases, case, 1 + threshold),
                     _TreeSide(repo, roots[repo], cases, case)]
            c = compare_sides(sides, (f"base {sha[:10]}", "tree"), rounds=rounds, max_time=max_time,
                              min_effect=0.01, alpha=alpha, seed=seed, progress=progress)
            scale = 1 + threshold
            verdict = {"slower": "slower", "faster": "not slower", "same": "not slower"}.get(c.verdict,
                                                                                             "inconclusive")
            results.append(GateResult(case, c.ratio * scale, (c.ci[0] * scale, c.ci[1] * scale), threshold,
                                      verdict, len(c.candidate_ns), c.warnings))
    finally:
        subprocess.run(["git", "-C", str(repo), "worktree", "remove", "--force", str(base_tree)],
                       capture_output=True, timeout=120)
        shutil.rmtree(work, ignore_errors=True)
    return results


if __name__ == "__main__":
    sys.exit(_worker(sys.argv[1], sys.argv[2]))
