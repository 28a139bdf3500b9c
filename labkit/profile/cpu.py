"""CPU profiles with py-spy: a running process (a toyshop service under load), or a function in this process.

    prof = profile.attach(svc.pid, duration_s=5)                  # a process, as it runs
    prof, load = profile.under_load(svc, "/customers/1/export", rate=30, duration_s=5)   # with a bounded load
    prof = profile.call(build_report, rows, duration_s=2)         # a function, called again and again
    prof.stacks.top(10); profile.icicle_chart(prof); profile.flamegraph(prof)   # (the last with svg=True)

py-spy is a *sampling* profiler in another process: ``rate`` times a second it reads the target's Python
stacks from its memory, so the target runs unmodified (at its default settings py-spy briefly pauses the
target for each sample: ``tests/benchmarks/bench_gc_profile.py`` prints what that costs a service's P50).
What it can and cannot see:

* it **sees** where every thread is in Python code; ``idle=True`` keeps threads that wait (sleeping, blocked
  on a socket or a lock — left out by default), ``gil=True`` keeps only the thread holding the GIL;
* it **cannot see** inside C code unless ``native=True`` (then C frames such as the interpreter's
  ``gc_collect_main`` show, when the interpreter has symbols). Without it, time in the cyclic garbage
  collector is charged to whichever Python line allocated the object that triggered the collection: GC cost
  is spread thinly over innocent lines. Read GC from a pause log (:class:`labkit.alloc.PauseRecorder`).

Every profile is bounded: it samples for ``duration_s`` (≤ 600 s) at ``rate`` (≤ 1,000 /s), its capture is
written to a temporary folder that is removed, and a target that exits mid-run yields the samples taken
until then (``notes`` says so). py-spy needs permission to read another process's memory (ptrace):
:class:`labkit.errors.ProbeUnavailable` says what to do when it has none.
"""

from __future__ import annotations

import ctypes
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from labkit.errors import BadInputError, ProbeUnavailable
from labkit.inputs import integer, number
from labkit.profile.stacks import Stacks
from labkit.progress import timed_bar
from labkit.results import Saveable, TextRepr

__all__ = ["CpuProfile", "attach", "call", "under_load", "py_spy_path"]

_PTRACE_HELP = ("py-spy has no permission to read that process (ptrace). Run the notebook as root or as the "
                "process's owner with `sudo sysctl kernel.yama.ptrace_scope=0`; in Docker, start the "
                "container with `--cap-add SYS_PTRACE`; or profile in process instead: "
                "labkit.profile.call(fn, *args) profiles a function in this kernel, which needs no such "
                "permission for its own child. `labkit doctor` checks this.")


def py_spy_path() -> str:
    """The py-spy executable: ``PERFLAB_PY_SPY`` when set (a py-spy of your own, e.g. a wrapper that runs it with
    the rights it needs on macOS), else the one beside this Python, else the one on PATH; ProbeUnavailable if
    there is none."""
    if os.environ.get("PERFLAB_PY_SPY"):
        return os.environ["PERFLAB_PY_SPY"]
    beside = Path(sys.executable).with_name("py-spy")
    exe = str(beside) if beside.exists() else shutil.which("py-spy")
    if not exe:
        raise ProbeUnavailable("py-spy is not installed: pip install py-spy (it runs on Linux, macOS and "
                               "Windows)")
    return exe


@dataclass(frozen=True)
class CpuProfile(TextRepr, Saveable):
    """A py-spy profile: the sampled stacks, how they were taken, and what went wrong.

    Attributes:
        stacks: the samples as :class:`labkit.profile.Stacks` (unit ``samples``).
        target: what was profiled (``"pid 1234"``, ``"build_report(...) in this process"``).
        pid: the process sampled.
        rate: samples per second asked for.
        duration_s: seconds asked for; ``elapsed_s``: seconds actually sampled.
        samples, errors: what py-spy reported (errors are samples it could not read).
        options: ``idle``, ``gil``, ``native``, ``function`` (frames per function instead of per line).
        calls: calls of the profiled function (``call()`` only).
        svg: py-spy's own flame graph (SVG with its own script), when asked for — from a second recording of
            the same length right after the first: the same workload, other samples.
        notes: what affects the reading (a process that exited mid-run, samples lost…).
    """

    KIND = "cpu-profile"
    NESTED = {"stacks": Stacks}

    stacks: Stacks
    target: str
    pid: int
    rate: int
    duration_s: float
    elapsed_s: float
    samples: int
    errors: int = 0
    options: dict[str, bool] = field(default_factory=dict)
    calls: int | None = None
    svg: str | None = field(default=None, repr=False)
    notes: tuple[str, ...] = ()

    def to_frame(self) -> Any:
        """One row per distinct stack (see :meth:`labkit.profile.Stacks.to_frame`)."""
        return self.stacks.to_frame()

    def __str__(self) -> str:
        opts = ", ".join(k for k, v in self.options.items() if v) or "defaults"
        per = f", {self.calls:,} calls" if self.calls is not None else ""
        text = (f"CPU profile of {self.target}: {self.samples:,} samples in {self.elapsed_s:.2f} s at "
                f"{self.rate}/s ({opts}{per}), {len(self.stacks):,} distinct stacks"
                + (f", {self.errors} unreadable samples" if self.errors else ""))
        return "\n".join([text, *(f"  note: {n}" for n in self.notes)])


def _check(duration_s: float, rate: int) -> tuple[float, int]:
    return (number(duration_s, "duration_s", low=0.2, high=600, low_ok=True, unit="seconds"),
            integer(rate, "rate", high=1000, hint="samples per second (py-spy's default is 100)"))


class _Recording:
    """One running ``py-spy record``: started, waited for until it samples, stopped with SIGINT, read."""

    def __init__(self, pid: int, rate: int, duration_s: float, opts: dict[str, bool], fmt: str,
                 executable: str | None) -> None:
        self.pid, self.duration_s, self.fmt = pid, duration_s, fmt
        self.tmp = tempfile.mkdtemp(prefix="labkit-pyspy-")
        self.out = Path(self.tmp) / ("profile.svg" if fmt == "flamegraph" else "profile.txt")
        cmd = [executable or py_spy_path(), "record", "--pid", str(pid), "--rate", str(rate), "--format", fmt,
               "--output", str(self.out), "--duration", str(math.ceil(duration_s) + 30)]  # we stop it earlier
        cmd += [f"--{k}" for k, v in opts.items() if v]
        self.stdout: list[str] = []
        self.stderr: list[str] = []
        self.sampling = threading.Event()
        try:
            self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                         stdin=subprocess.DEVNULL)
        except OSError as e:
            self.cleanup()
            raise ProbeUnavailable(f"could not run py-spy ({cmd[0]}): {e}. Reinstall it: pip install py-spy") from e
        for stream, sink in ((self.proc.stdout, self.stdout), (self.proc.stderr, self.stderr)):
            threading.Thread(target=self._pump, args=(stream, sink), daemon=True).start()
        self.started = 0.0

    def _pump(self, stream: Any, sink: list[str]) -> None:
        for line in stream:
            sink.append(line.rstrip())
            if "Sampling process" in line:
                self.started = time.perf_counter()
                self.sampling.set()

    def wait_sampling(self, timeout: float = 20.0) -> None:
        """Return once py-spy samples; raise (saying why) if it exits or hangs first."""
        deadline = time.monotonic() + timeout
        while not self.sampling.wait(0.05):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop(force=True)
                raise _attach_error(self.pid, "\n".join(self.stderr + self.stdout))

    def stop(self, force: bool = False) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL if force else signal.SIGINT)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def read(self) -> tuple[str, float, list[str]]:
        """The capture's text, the seconds sampled, and notes."""
        elapsed = time.perf_counter() - self.started if self.started else 0.0
        notes = []
        said = "\n".join(self.stdout + self.stderr)
        if "process exited" in said:
            notes.append(f"the process exited while it was sampled: this profile holds what was sampled until "
                         f"then (about {elapsed:.1f} s of the {self.duration_s:g} s asked for)")
        if not self.out.exists():
            if self.proc.returncode not in (0, None) and "process exited" not in said:
                raise _attach_error(self.pid, said)
            return "", elapsed, [*notes, "py-spy wrote no samples"]
        return self.out.read_text(errors="replace"), elapsed, notes

    def counts(self) -> tuple[int, int]:
        import re

        m = re.search(r"Samples: (\d+) Errors: (\d+)", "\n".join(self.stdout))
        return (int(m.group(1)), int(m.group(2))) if m else (0, 0)

    def cleanup(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)


def _allow_children(allow: bool = True) -> None:
    # Under Yama's ptrace_scope=1 (Ubuntu's default) a process may be read only by its ancestors; py-spy, our
    # child, reads *us* when profiling in process. PR_SET_PTRACER_ANY lets it for the length of the recording;
    # PR_SET_PTRACER 0 takes it back (Linux only; a no-op elsewhere).
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(0x59616D61, ctypes.c_ulong(-1 if allow else 0), 0, 0, 0)  # PR_SET_PTRACER
        except (OSError, AttributeError):
            pass


_MACOS_HELP = ("py-spy has no permission to read that process: on macOS it needs root for every process. Point "
               "PERFLAB_PY_SPY at a script that runs `sudo py-spy \"$@\"` (with sudo allowed for it), or profile "
               "in process instead: labkit.profile.call(fn, *args).")


def _attach_error(pid: int, said: str) -> ProbeUnavailable:
    low = said.lower()
    if "not supported on your platform" in low:  # py-spy attached, but cannot unwind C frames here (macOS)
        return ProbeUnavailable(f"py-spy cannot read native (C) frames of pid {pid} on this platform ({sys.platform}: "
                                "py-spy's --native is not offered everywhere, macOS among the places): profile without "
                                "native=True — every Python frame is still there, only C frames such as the garbage "
                                "collector's are not")
    if "permission" in low or "operation not permitted" in low or "ptrace" in low:
        return ProbeUnavailable(f"cannot profile pid {pid}: {_MACOS_HELP if sys.platform == 'darwin' else _PTRACE_HELP}")
    if "check that the process is running" in low or "no such process" in low or "no such file" in low:
        return ProbeUnavailable(f"cannot profile pid {pid}: no such process (it exited, or the pid is wrong). "
                                "Start the service first and pass svc.pid")
    tail = said.strip().splitlines()[-3:] if said.strip() else ["(py-spy said nothing)"]
    return ProbeUnavailable(f"py-spy could not profile pid {pid}: {' / '.join(tail)[:400]}. Check that it is a "
                            "Python process, and run `labkit doctor`")


def _record(pid: int, duration_s: float, rate: int, opts: dict[str, bool], fmt: str, executable: str | None,
            during: Callable[[float], int | None] | None,
            progress: bool | None = False) -> tuple[str, float, list[str], int | None, tuple[int, int]]:
    rec = _Recording(pid, rate, duration_s, opts, fmt, executable)
    try:
        rec.wait_sampling()
        what = "py-spy flame graph" if fmt == "flamegraph" else "py-spy"
        with timed_bar(progress, duration_s, f"{what} pid {pid}"):
            calls = during(duration_s) if during is not None else _sleep_until_done(rec, duration_s)
        rec.stop()
        text, elapsed, notes = rec.read()
        return text, elapsed, notes, calls, rec.counts()
    finally:
        if rec.proc.poll() is None:
            rec.stop(force=True)
        rec.cleanup()


def _sleep_until_done(rec: _Recording, duration_s: float) -> None:
    deadline = time.perf_counter() + duration_s
    while time.perf_counter() < deadline and rec.proc.poll() is None:
        time.sleep(min(0.05, max(0.0, deadline - time.perf_counter())))
    return None


def _profile(pid: int, target: str, *, duration_s: float, rate: int, idle: bool, gil: bool, native: bool,
             function: bool, svg: bool, executable: str | None,
             during: Callable[[float], int | None] | None = None, focus: str | None = None,
             progress: bool | None = None) -> CpuProfile:
    duration_s, rate = _check(duration_s, rate)
    opts = {"idle": idle, "gil": gil, "native": native, "function": function}
    text, elapsed, notes, calls, (samples, errors) = _record(pid, duration_s, rate, opts, "raw", executable, during,
                                                             progress)
    stacks = Stacks.from_collapsed(text, "samples")
    if focus is not None:
        stacks = stacks.focus(focus)
        stacks = Stacks(tuple((s[1:], w) for s, w in stacks.stacks if len(s) > 1), "samples")
    picture = None
    if svg and not any("exited" in n for n in notes):
        try:
            picture, _, more, _, _ = _record(pid, duration_s, rate, opts, "flamegraph", executable, during,
                                             progress)
            notes += more
        except ProbeUnavailable as e:  # the process went away between the two recordings
            notes.append(f"no py-spy SVG: {e}")
    if samples and errors > 0.05 * samples:
        notes.append(f"{errors} of {samples} samples could not be read (the target changed under py-spy): "
                     "rerun, or lower the rate")
    return CpuProfile(stacks, target, pid, rate, duration_s, round(elapsed, 3), samples or stacks.total, errors,
                      opts, calls, picture or None, tuple(notes))


def attach(pid: int, *, duration_s: float = 5.0, rate: int = 100, idle: bool = False, gil: bool = False,
           native: bool = False, function: bool = True, svg: bool = False,
           executable: str | None = None, progress: bool | None = None) -> CpuProfile:
    """Profile a running Python process for ``duration_s`` seconds with py-spy.

    Args:
        pid: the process (a :class:`labkit.service.Service`'s ``.pid``).
        duration_s: seconds to sample (0.2–600); the profile stops then, or when the process exits.
        rate: samples per second (py-spy's default: 100).
        idle: keep threads that are waiting (blocked on I/O, sleeping, waiting for a lock).
        gil: keep only samples of the thread that holds the GIL (what competes for the interpreter).
        native: also read C frames (slower sampling; shows time in C code such as the GC).
        function: one frame per function (py-spy ``--function``) instead of one per line.
        svg: also record py-spy's own flame graph (a second recording of the same length, right after).
        executable: the py-spy to run (default: the one installed with labkit).
        progress: a bar over the seconds sampled, moved every second (:mod:`labkit.progress`: by default in a
            notebook, for a profile of 2 s or more).

    Raises:
        ProbeUnavailable: py-spy is missing, may not read the process (what to do about ptrace), or the
            process does not exist.
    """
    if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0:
        raise BadInputError(f"pid must be a process id (a positive integer, e.g. svc.pid), got {pid!r}")
    return _profile(pid, f"pid {pid}", duration_s=duration_s, rate=rate, idle=idle, gil=gil, native=native,
                    function=function, svg=svg, executable=executable, progress=progress)


def call(fn: Callable[..., Any], /, *args: Any, duration_s: float = 2.0, rate: int = 100, native: bool = False,
         function: bool = True, svg: bool = False, executable: str | None = None, progress: bool | None = None,
         **kwargs: Any) -> CpuProfile:
    """Profile ``fn(*args, **kwargs)`` in this process: it is called again and again for ``duration_s`` while
    py-spy samples, and the stacks are cut so that ``fn`` is the root.

    The other threads of this process (a notebook kernel's, the progress bar's) are left out. Arguments as in
    :func:`attach` (so ``fn`` cannot take keyword arguments named like them).
    """
    if not callable(fn):
        raise BadInputError(f"fn must be a function to call, got {type(fn).__name__}: pass the function itself, "
                            "not its result (profile.call(f, x), not profile.call(f(x)))")
    _allow_children()

    def during(seconds: float) -> int:
        return _labkit_profile_repeat(fn, args, kwargs, seconds)

    name = getattr(fn, "__qualname__", getattr(fn, "__name__", "fn"))
    try:
        return _profile(os.getpid(), f"{name}(...) in this process", duration_s=duration_s, rate=rate,
                        idle=False, gil=False, native=native, function=function, svg=svg, executable=executable,
                        during=during, focus="_labkit_profile_repeat", progress=progress)
    finally:
        _allow_children(False)


def _labkit_profile_repeat(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
                           seconds: float) -> int:
    # the frame profile.call() cuts the stacks at: everything above it is the caller's (the kernel's)
    deadline = time.perf_counter() + seconds
    n = 0
    while time.perf_counter() < deadline:
        fn(*args, **kwargs)
        n += 1
    return n


def under_load(service: Any, path: str = "/health", *, duration_s: float = 5.0, rate: int = 100,
               load_rate: float | None = None, concurrency: int | None = None, idle: bool = False,
               gil: bool = False, native: bool = False, function: bool = True, svg: bool = False,
               executable: str | None = None, progress: bool | None = None,
               **load_kwargs: Any) -> tuple[CpuProfile, Any]:
    """Profile a toyshop service while :mod:`labkit.load` sends it a bounded load.

    The load starts first (its warm-up runs while py-spy attaches) and lasts until the profile (or both
    profiles, with ``svg=True``) are done.

    Args:
        service: a running :class:`labkit.service.Service`.
        path: the request path to load.
        duration_s, rate, idle, gil, native, function, svg, executable, progress: as in :func:`attach`.
        load_rate / concurrency: the load, open loop (requests per second) or closed loop (one is required).
        load_kwargs: other knobs of :func:`labkit.load.run`.

    Returns:
        ``(profile, load_result)``.
    """
    from labkit.load import background

    pid = getattr(service, "pid", None)
    url = getattr(service, "url", None)
    if not isinstance(pid, int) or not isinstance(url, str):
        raise BadInputError(f"service must be a running labkit.service.Service, got {service!r}")
    if (load_rate is None) == (concurrency is None):
        raise BadInputError("give exactly one of load_rate= (open loop, requests per second) or concurrency= "
                            "(closed loop) for the load that runs while the service is profiled")
    duration_s, rate = _check(duration_s, rate)
    # long enough for the attach(es) and the recording(s); stopped as soon as the profile is done
    with background(url + path, rate=load_rate, concurrency=concurrency, duration_s=duration_s * 2 + 30,
                    warmup_s=0.5, **load_kwargs) as load:
        load.warm()  # the service is busy before py-spy attaches
        prof = _profile(pid, f"toyshop pid {pid} under load ({path})", duration_s=duration_s, rate=rate,
                        idle=idle, gil=gil, native=native, function=function, svg=svg, executable=executable,
                        progress=progress)
    return prof, load.result
