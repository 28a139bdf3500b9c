"""The latency table's cache rows against a plain C pointer chase over the same arrays, side by side.

Goal (issue 17): every cache row (L1, L2, past L2) within 1.2× of a C ``-O2`` chase; the DRAM row is shown
beside them without a goal (there TLB misses and the host's memory dominate, and move run to run). The C loop is compiled here
with the machine's C compiler (``cc``/``gcc``; the script says so and stops when there is none) into a small
shared library and called through ctypes on the *same* array the probe's numba loop walks, with the same step
count, samples alternating between the two (numba, C, C, numba …) under the same pinning. Shown beside them:
the loop as it was compiled before (a signed index, so numba checks for a negative one between two loads).

    flock /tmp/perflab-bench.lock .venv/bin/python tests/benchmarks/bench_latency_chase.py [--repeats 41]
"""

from __future__ import annotations

import argparse
import ctypes
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from labkit.latency import memory
from labkit.measure.machine import pinned, usable_cpus
from labkit.measure.stats import format_bytes

C_CHASE = r"""
#include <stdint.h>
uint64_t chase(const uint64_t *a, int64_t steps, uint64_t p) {
    for (int64_t i = 0; i < steps; i++)
        p = a[p];
    return p;
}
"""


def compile_c(folder: Path) -> ctypes.CDLL | None:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return None
    src, lib = folder / "chase.c", folder / "chase.so"
    src.write_text(C_CHASE)
    subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    dll = ctypes.CDLL(str(lib))
    dll.chase.argtypes = (ctypes.c_void_p, ctypes.c_int64, ctypes.c_uint64)
    dll.chase.restype = ctypes.c_uint64
    return dll


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=41, help="samples per loop and working set")
    ap.add_argument("--max-mib", type=int, default=256, help="the DRAM row's working set, MiB")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        dll = compile_c(Path(tmp))
        if dll is None:
            print("skipped: no C compiler (cc or gcc) on this machine, so there is no C chase to hold the rows "
                  "against; apt-get install gcc")
            return 0
        import numba

        k = memory._kernels()
        signed = numba.njit(memory._chase_py)  # the loop as it was: int64 indices, wraparound check in the chain

        def c_chase(a: np.ndarray, steps: int, p: int) -> int:
            return dll.chase(a.ctypes.data, steps, p)

        ok = True
        sizes = memory._row_sizes(args.max_mib * memory.MiB)
        print(f"{'row':<9} {'working set':>11}  {'numba':>9} {'C -O2':>9} {'numba/C':>8}  "
              f"{'signed (before)':>15} {'before/C':>8}")
        with pinned({usable_cpus()[0]}):
            for row, size in sizes.items():
                a = k["build"](max(2, size // memory.LINE), memory.LINE // 8, 1)
                a_signed = a.astype(np.int64)
                steps, p = memory.chase_steps(k["chase"], a, 3e5)
                c_chase(a, steps, 0)
                signed(a_signed, steps, 0)
                runs = {"numba": (k["chase"], a), "C": (c_chase, a), "signed": (signed, a_signed)}
                got: dict[str, list[float]] = {name: [] for name in runs}
                at = dict.fromkeys(runs, p)  # each loop walks on from where it stopped, as the probe does:
                order = list(runs)           # restarting at one place would re-walk lines still in the cache
                for r in range(args.repeats):
                    for name in order if r % 2 == 0 else order[::-1]:
                        fn, arr = runs[name]
                        t0 = time.perf_counter_ns()
                        at[name] = fn(arr, steps, at[name])
                        got[name].append((time.perf_counter_ns() - t0) / steps)
                med = {name: float(np.median(v)) for name, v in got.items()}
                ratio = med["numba"] / med["C"]
                if row == "mem_dram":  # not a cache row: TLB misses and the host's memory dominate, and vary
                    verdict = "(no goal: not a cache row)"
                else:
                    ok &= ratio <= 1.2
                    verdict = f"goal ≤ 1.2×: {'met' if ratio <= 1.2 else 'MISSED'}"
                print(f"{row:<9} {format_bytes(size):>11}  {med['numba']:7.2f}ns {med['C']:7.2f}ns "
                      f"{ratio:7.2f}×  {med['signed']:13.2f}ns {med['signed'] / med['C']:7.2f}×   {verdict}")
                del a, a_signed
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
