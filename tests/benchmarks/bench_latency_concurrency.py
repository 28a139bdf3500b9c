"""The latency table's hand-off, start and connect rows against outside tools, side by side in one run.

Each row of ``labkit.latency.concurrency`` (and the pipe hand-offs and ``tcp_connect``) is held against the bare
mechanism it sits on, timed the same way by a small C program compiled here with the machine's ``cc`` (the
script says so and skips those lines when there is none), and, where one exists, by a tool that is not
ours: ``perf bench sched pipe`` (Debian's ``linux-perf``; skipped when ``perf`` is missing or refuses) for the
same-core hand-off, and Python's own ``python -m timeit`` in a fresh interpreter for the rows a Python
statement can express (thread start, the asyncio switch). A fresh ``python -c pass`` is the floor under spawn.

| row | outside twin | what the ratio holds |
|---|---|---|
| ``context_switch_pinned`` / ``_cross`` | C: two pthreads ping-pong through pipes, pinned the same way; perf (threads) | the GIL and the Python lines |
| ``lock_contended`` | C: ``sem_post`` → the ``sem_wait``-ing thread runs (CPython 3.11's lock is a POSIX semaphore) | the GIL |
| ``gil_handoff`` | C: ``pthread_cond_signal`` → the waiting thread holds the mutex (the GIL is a mutex and a condvar) | CPython's take_gil |
| ``thread_start`` | C: ``pthread_create`` + ``pthread_join``; ``python -m timeit`` of the same statement (both on the probe's CPU) | Python's thread state |
| ``process_fork`` (``_join``) | C: ``fork``, child writes the clock, ``waitpid`` — of a small process, and of one that touched as many MiB as this one holds | multiprocessing's child bootstrap, and the copy-on-write faults of the pages Python writes after the fork (reference counts) |
| ``process_spawn`` | ``python -c pass`` started and waited for | multiprocessing's bootstrap |
| ``asyncio_switch`` | ``python -m timeit`` of the same two tasks | the harness (should be ~1) |
| ``tcp_connect`` | C: ``socket`` + ``connect`` to the same listener | the Python call and socket object |

The goals are the ones a probe that measures its label must meet: never cheaper than its bare twin (ratio ≥ 0.8,
allowing noise), and within 0.67–1.5× of ``timeit`` where both time the same statement. A missed goal exits 1.
Rows and twins alternate for ``--rounds`` rounds; each figure is the median of the rounds' medians, and each
ratio the median of the rounds' ratios (a probe and its twin ran back to back in a round).

    flock /tmp/perflab-heavy.lock .venv/bin/python tests/benchmarks/bench_latency_concurrency.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from labkit.latency import concurrency, network, osprobes
from labkit.measure.machine import usable_cpus
from labkit.measure.stats import format_duration

C_TWINS = r"""
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int64_t now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1000000000LL + t.tv_nsec; }
static int cmp(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return (x > y) - (x < y); }
static double median(double *v, int n) { qsort(v, n, sizeof *v, cmp); return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2; }
static void pin(int cpu) { cpu_set_t s; CPU_ZERO(&s); CPU_SET(cpu, &s); pthread_setaffinity_np(pthread_self(), sizeof s, &s); }

static int N, CPU_A, CPU_B, p1[2], p2[2];
static double *seen; static volatile int nseen; static volatile int64_t stamp;
static sem_t ab, ba;
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER; static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static volatile int turn;

static void *pipe_peer(void *x) { char b; pin(CPU_B); for (int i = 0; i < N; i++) { if (read(p1[0], &b, 1) != 1) break; if (write(p2[1], &b, 1) != 1) break; } return x; }
static void *sem_peer(void *x) {
    pin(CPU_B);
    for (int i = 0; i < N; i++) { sem_wait(&ab); seen[nseen++] = now() - stamp; stamp = now(); sem_post(&ba); }
    return x;
}
static void *cond_peer(void *x) {
    pin(CPU_B);
    pthread_mutex_lock(&m);
    for (int i = 0; i < N; i++) {
        while (turn != 1) pthread_cond_wait(&c, &m);
        seen[nseen++] = now() - stamp;
        stamp = now(); turn = 0; pthread_cond_signal(&c);
    }
    pthread_mutex_unlock(&m);
    return x;
}
static void *empty(void *x) { return x; }

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: twins pipe|sem|cond|thread|fork|connect N [cpu_a cpu_b | port]\n"); return 2; }
    const char *mode = argv[1]; N = atoi(argv[2]);
    CPU_A = argc > 3 ? atoi(argv[3]) : 0; CPU_B = argc > 4 ? atoi(argv[4]) : CPU_A;
    seen = calloc(2 * N + 2, sizeof *seen); pthread_t t;
    if (!strcmp(mode, "pipe")) {
        char b = 'x'; if (pipe(p1) || pipe(p2)) return 1;
        pthread_create(&t, 0, pipe_peer, 0); pin(CPU_A);
        for (int i = 0; i < N; i++) { int64_t t0 = now(); if (write(p1[1], &b, 1) != 1 || read(p2[0], &b, 1) != 1) return 1; seen[i] = (now() - t0) / 2.0; }
        pthread_join(t, 0); printf("%.1f\n", median(seen, N));
    } else if (!strcmp(mode, "sem")) {
        sem_init(&ab, 0, 0); sem_init(&ba, 0, 0);
        pthread_create(&t, 0, sem_peer, 0); pin(CPU_A);
        for (int i = 0; i < N; i++) { stamp = now(); sem_post(&ab); sem_wait(&ba); seen[nseen++] = now() - stamp; }
        pthread_join(t, 0); printf("%.1f\n", median(seen, nseen));
    } else if (!strcmp(mode, "cond")) {
        pthread_create(&t, 0, cond_peer, 0); pin(CPU_A);
        pthread_mutex_lock(&m);
        for (int i = 0; i < N; i++) {
            stamp = now(); turn = 1; pthread_cond_signal(&c);
            while (turn != 0) pthread_cond_wait(&c, &m);
            seen[nseen++] = now() - stamp;
        }
        pthread_mutex_unlock(&m);
        pthread_join(t, 0); printf("%.1f\n", median(seen, nseen));
    } else if (!strcmp(mode, "thread")) {
        for (int i = 0; i < N; i++) { int64_t t0 = now(); pthread_create(&t, 0, empty, 0); pthread_join(t, 0); seen[i] = now() - t0; }
        printf("%.1f\n", median(seen, N));
    } else if (!strcmp(mode, "fork")) {
        double *joined = calloc(N, sizeof *joined);
        size_t big = argc > 3 ? (size_t)atol(argv[3]) << 20 : 0;  /* MiB to touch first: a parent as large */
        char *ballast = big ? malloc(big) : 0; if (big) memset(ballast, 1, big);
        for (int i = 0; i < N; i++) {
            int p[2]; if (pipe(p)) return 1;
            int64_t t0 = now(), first; pid_t pid = fork();
            if (pid == 0) { int64_t x = now(); if (write(p[1], &x, sizeof x) != sizeof x) _exit(1); _exit(0); }
            if (read(p[0], &first, sizeof first) != sizeof first) return 1;
            waitpid(pid, 0, 0); joined[i] = now() - t0; seen[i] = first - t0; close(p[0]); close(p[1]);
        }
        printf("%.1f %.1f\n", median(seen, N), median(joined, N)); free(ballast);
    } else if (!strcmp(mode, "connect")) {
        struct sockaddr_in a = {0}; a.sin_family = AF_INET; a.sin_port = htons(atoi(argv[3])); a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        struct linger reset = {1, 0};
        for (int i = 0; i < N; i++) {
            int64_t t0 = now(); int s = socket(AF_INET, SOCK_STREAM, 0);
            if (connect(s, (struct sockaddr *)&a, sizeof a)) { perror("connect"); return 1; }
            seen[i] = now() - t0; setsockopt(s, SOL_SOCKET, SO_LINGER, &reset, sizeof reset); close(s);
        }
        printf("%.1f\n", median(seen, N));
    } else { fprintf(stderr, "unknown mode %s\n", mode); return 2; }
    return 0;
}
"""


def compile_twins(folder: Path) -> Path | None:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return None
    src, exe = folder / "twins.c", folder / "twins"
    src.write_text(C_TWINS)
    subprocess.run([cc, "-O2", "-pthread", "-o", str(exe), str(src)], check=True)
    return exe


def c_twin(exe: Path, *args: object, cpu: int | None = None) -> list[float]:
    out = subprocess.run([*on_cpu(cpu), str(exe), *map(str, args)], check=True, capture_output=True, text=True,
                         timeout=120)
    return [float(x) for x in out.stdout.split()]


def perf_pipe(cpu: int, loops: int) -> float | None:
    """``perf bench sched pipe -T`` (two threads, as the probe's) on one CPU: ns per hand-off (perf's op is a round
    trip, two hand-offs). Without ``-T`` perf uses two processes, whose switch also changes address space."""
    perf, taskset = shutil.which("perf"), shutil.which("taskset")
    if perf is None or taskset is None:
        return None
    r = subprocess.run([taskset, "-c", str(cpu), perf, "bench", "sched", "pipe", "-T", "-l", str(loops)],
                       capture_output=True, text=True, timeout=120)
    m = re.search(r"([\d.]+)\s+usecs/op", r.stdout)
    return float(m.group(1)) * 1e3 / 2 if r.returncode == 0 and m else None


def on_cpu(cpu: int | None) -> list[str]:
    """``taskset -c CPU`` to start a command on one CPU (what the probe pins itself to), or nothing."""
    taskset = shutil.which("taskset")
    return [taskset, "-c", str(cpu)] if cpu is not None and taskset else []


def timeit_ns(setup: list[str], stmt: str, per: int = 1, cpu: int | None = None) -> float:
    """``python -m timeit`` in a fresh interpreter (on ``cpu``): its best-of-5 figure per ``per`` operations, ns."""
    args = [*on_cpu(cpu), sys.executable, "-m", "timeit", "-u", "nsec"]
    for line in setup:
        args += ["-s", line]
    out = subprocess.run([*args, stmt], check=True, capture_output=True, text=True, timeout=300).stdout
    m = re.search(r"best of \d+: ([\d.]+(?:e[+-]?\d+)?) nsec per loop", out)
    if m is None:
        raise RuntimeError(f"could not read timeit's output: {out!r}")
    return float(m.group(1)) / per


def resident_mib() -> int:
    """This process's resident set in MiB (what a fork must map again in the child, copy-on-write)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") >> 20


def interpreter_start_ns(n: int) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        times.append(time.perf_counter_ns() - t0)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5, help="alternating rounds of each row and its twins")
    args = ap.parse_args(argv)
    cpus = usable_cpus()
    a, b = cpus[0], cpus[1 if len(cpus) > 1 else 0]
    with tempfile.TemporaryDirectory() as tmp:
        exe = compile_twins(Path(tmp))
        if exe is None:
            print("no C compiler (cc or gcc): the C twins are skipped; apt-get install gcc")
        port_proc = subprocess.Popen([sys.executable, "-c", network._LISTENER], stdout=subprocess.PIPE, text=True)
        port = int(port_proc.stdout.readline())  # type: ignore[union-attr]
        # name → (the probe's median, {twin name: its figure}), each a thunk so rounds can alternate them
        py: dict[str, Callable[[], float]] = {
            "context_switch_pinned": lambda: osprobes.context_switch(rounds=2000)[0].median_ns,
            "context_switch_cross": lambda: osprobes.context_switch(rounds=2000)[1].median_ns,
            "lock_contended": lambda: concurrency.lock_contended(rounds=2000).median_ns,
            "gil_handoff": lambda: concurrency.gil_handoff(rounds=1000).median_ns,
            "thread_start": lambda: concurrency.thread_start(repeats=400).median_ns,
            "asyncio_switch": lambda: concurrency.asyncio_switch().median_ns,
            "tcp_connect": lambda: network.tcp_connect(rounds=1000).median_ns,
        }
        twins: dict[str, dict[str, Callable[[], float | None]]] = {
            "context_switch_pinned": {"perf bench sched pipe -T (one CPU)": lambda: perf_pipe(a, 20000)},
            "thread_start": {"python -m timeit": lambda: timeit_ns(
                ["import threading", "f = lambda: None"],
                "t = threading.Thread(target=f); t.start(); t.join()", cpu=a)},
            "asyncio_switch": {"python -m timeit": lambda: timeit_ns(
                ["import asyncio", "loop = asyncio.new_event_loop()", "async def spin(n):",
                 "    for _ in range(n): await asyncio.sleep(0)", "async def pair(n):",
                 "    await asyncio.gather(spin(n), spin(n))"],
                "loop.run_until_complete(pair(2000))", per=4000)},
        }
        if exe is not None:
            twins["context_switch_pinned"]["C pipe ping-pong"] = lambda: c_twin(exe, "pipe", 20000, a, a)[0]
            twins["context_switch_cross"] = {"C pipe ping-pong": lambda: c_twin(exe, "pipe", 20000, a, b)[0]}
            twins["lock_contended"] = {"C sem_post → sem_wait": lambda: c_twin(exe, "sem", 20000, a, b)[0]}
            twins["gil_handoff"] = {"C cond_signal → cond_wait": lambda: c_twin(exe, "cond", 20000, a, b)[0]}
            twins["thread_start"]["C pthread_create + join"] = lambda: c_twin(exe, "thread", 2000, cpu=a)[0]
            twins["tcp_connect"] = {"C socket + connect": lambda: c_twin(exe, "connect", 2000, port)[0]}
        got: dict[str, list[float]] = {}
        rss = resident_mib()
        try:
            for r in range(args.rounds):
                for name, probe in py.items():
                    pairs = [(name, probe), *((f"{name}|{t}", fn) for t, fn in twins.get(name, {}).items())]
                    for key, fn in pairs if r % 2 == 0 else pairs[::-1]:
                        v = fn()
                        if v is not None:
                            got.setdefault(key, []).append(v)
                # processes: one call gives both rows; the twins alternate with it
                rows = {s.key: s.median_ns for s in concurrency.process_start(repeats={"fork": 20, "spawn": 6})}
                for key, v in rows.items():
                    got.setdefault(key, []).append(v)
                if exe is not None:
                    for mib, what in ((0, "C fork of a small process"), (rss, f"C fork, {rss} MiB touched first")):
                        first, joined = c_twin(exe, "fork", 100, mib)
                        got.setdefault(f"process_fork|{what}", []).append(first)
                        got.setdefault(f"process_fork_join|{what}", []).append(joined)
                got.setdefault("process_spawn|python -c pass (start + exit)", []).append(interpreter_start_ns(6))
        finally:
            port_proc.kill()
            port_proc.wait()
    ok = True
    print(f"{'row':<22} {'probe':>10}  {'outside twin':<36} {'twin':>10} {'probe/twin':>10}  goal")
    for name in [*py, "process_fork", "process_fork_join", "process_spawn", "process_spawn_join"]:
        mine = statistics.median(got[name])
        print(f"{name:<22} {format_duration(mine):>10}")
        for key in (k for k in got if k.startswith(name + "|")):
            twin = statistics.median(got[key])
            # paired: each round's probe and twin ran back to back, so a drift of the VM's wake-up latency (it
            # flips between two levels for seconds at a time) hits both; the ratio is the median of the rounds'
            ratio = (statistics.median(p / t for p, t in zip(got[name], got[key], strict=True))
                     if len(got[name]) == len(got[key]) else mine / twin)  # a tool that failed in some round
            tool = key.split("|", 1)[1]
            if "timeit" in tool:
                met, goal = 0.67 <= ratio <= 1.5, "0.67–1.5× (same statement)"
            else:
                met, goal = ratio >= 0.8, "≥ 0.8× (not cheaper than the bare mechanism)"
            ok &= met
            print(f"{'':<22} {'':>10}  {tool:<36} {format_duration(twin):>10} {ratio:9.2f}×  {goal}: "
                  f"{'met' if met else 'MISSED'}")
    print(f"\npinned to CPUs {a} and {b}; {args.rounds} rounds; Python {sys.version.split()[0]}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
