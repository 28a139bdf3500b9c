"""Storage: a 4 KiB random read that really goes to the device, the same read from the page cache, a 1 MiB
sequential read, and a small write + fsync.

Reads from a file you just wrote come from the page cache (RAM), not the disk, which is how most published
"SSD read" numbers measured on a laptop end up 50× too good. The uncached rows use O_DIRECT (the kernel
bypasses its cache and DMAs straight into an aligned buffer); where O_DIRECT is refused they fall back to
dropping the file's pages with ``posix_fadvise(DONTNEED)`` and *check* with ``mincore`` that the pages are
really gone, and say so in the row's note.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import mmap
import os
import tempfile
from collections.abc import Iterator

import numpy as np

from labkit.latency._harness import Samples, method_of, time_each, unavailable

__all__ = ["disk_reads", "write_fsync", "resident_pages", "filesystem"]

PAGE = mmap.PAGESIZE
MiB = 1024 * 1024
FALLBACK_NOTE = ("O_DIRECT is not available here ({why}); fell back to posix_fadvise(DONTNEED) before the "
                 "reads; mincore found {left} of the file's {total} pages in the page cache just before reading")
STILL_CACHED = ("; {left} pages stayed cached after DONTNEED (dirty or pinned?), so some reads may have come "
                "from RAM: treat this row as a lower bound")


def resident_pages(path: str | os.PathLike[str]) -> int | None:
    """How many of the file's pages are in the page cache now (``mincore``), or None if it cannot be told."""
    try:
        size = os.path.getsize(path)
        if size == 0:
            return 0
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                              ctypes.c_long]
        libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
        libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        fd = os.open(path, os.O_RDONLY)
        try:
            addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        finally:
            os.close(fd)
        if addr is None or addr == ctypes.c_void_p(-1).value:
            return None
        try:
            vec = (ctypes.c_ubyte * ((size + PAGE - 1) // PAGE))()
            if libc.mincore(addr, size, vec) != 0:
                return None
            return int((np.frombuffer(vec, dtype=np.uint8) & 1).sum())
        finally:
            libc.munmap(addr, size)
    except (OSError, AttributeError, ValueError):
        return None


def _write_file(path: str, nbytes: int) -> None:
    block = bytearray(os.urandom(MiB))
    with open(path, "wb") as f:
        for i in range(nbytes // MiB):
            block[:8] = i.to_bytes(8, "little")  # no two blocks alike, so nothing below can dedupe them
            f.write(block)
        f.flush()
        os.fsync(f.fileno())


def _drop(fd: int) -> bool:
    """Ask the kernel to drop the file's clean pages from the page cache; False if it cannot be asked."""
    if not hasattr(os, "posix_fadvise"):
        return False
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    return True


def _open_direct(path: str) -> tuple[int | None, str]:
    """Open ``path`` with O_DIRECT and prove an aligned 4 KiB read works; (None, why) when it does not."""
    flag = getattr(os, "O_DIRECT", None)
    if flag is None:
        return None, "os.O_DIRECT does not exist on this platform"
    try:
        fd = os.open(path, os.O_RDONLY | flag)
    except OSError as e:
        return None, f"open(O_DIRECT) failed: {e.strerror}"
    try:
        buf = mmap.mmap(-1, PAGE)
        os.preadv(fd, [buf], 0)
        buf.close()
    except OSError as e:
        os.close(fd)
        return None, f"an aligned O_DIRECT read failed: {e.strerror} (the filesystem may not support it)"
    return fd, ""


def filesystem(path: str | os.PathLike[str]) -> str | None:
    """The type of the filesystem ``path`` lives on (``ext4``, ``tmpfs``, ``overlay`` …), from ``/proc/mounts``:
    the longest mount point that contains it; None where that cannot be read (not Linux)."""
    try:
        with open("/proc/mounts", encoding="utf-8") as f:
            mounts = [line.split() for line in f]
    except OSError:
        return None
    target = os.path.realpath(path)
    best, kind = "", None
    for fields in mounts:
        if len(fields) < 3:
            continue
        point = fields[1].replace("\\040", " ")
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, kind = point, fields[2]
    return kind


#: an fsync faster than this did not wait for a device: tmpfs, or a virtual disk acknowledging from its cache
NO_FLUSH_NS = 20_000
NO_FLUSH = ("fsync returned in {median} on {fs}: no device flush happened here ({why}), so this row is not the "
            "cost of a durable write; run labkit.latency.write_fsync(dir=...) on a folder of a real disk")


@contextlib.contextmanager
def _scratch(dir: str | os.PathLike[str] | None) -> Iterator[str]:
    """A private temporary folder, removed on the way out even on KeyboardInterrupt."""
    with tempfile.TemporaryDirectory(prefix="labkit-latency-", dir=dir) as d:
        yield d


def disk_reads(*, quick: bool = False, dir: str | os.PathLike[str] | None = None, file_bytes: int | None = None,
               rounds: int | None = None, seed: int = 3) -> tuple[Samples, ...]:
    """Random 4 KiB reads not from the page cache, the same reads from the page cache, and 1 MiB reads.

    Method: writes a file of random data (32 MiB quick, 128 MiB full) in a temporary folder and fsyncs
    it, then drops its pages (``posix_fadvise(DONTNEED)``). Uncached rows open it with ``O_DIRECT`` and read
    into a page-aligned ``mmap`` buffer with ``os.preadv``, one timed read per sample, at distinct random
    4 KiB-aligned offsets (4 KiB row) or consecutive 1 MiB offsets (1 MiB row). ``mincore`` counts the
    file's resident pages before and after, to show the reads did not come from (or fill) the page cache.
    The page-cache row reads 4 KiB at random offsets of an 8 MiB region read once beforehand.
    Without O_DIRECT: plain reads, with DONTNEED (and ``POSIX_FADV_RANDOM``, no read-ahead) before them,
    the residency check, and a note saying so. Overhead: one Python call and syscall per read (~1 µs),
    visible only in the page-cache row. A virtual disk may still be served from the *host's* cache; the
    guest cannot see that, so compare against the page-cache row.
    """
    method = method_of(disk_reads)
    labels = {"disk_random_read_4k": "random 4 KiB read, not cached (device)",
              "page_cache_read_4k": "random 4 KiB read from the page cache",
              "disk_seq_read_1mb": "read 1 MiB sequentially, not cached (device)"}
    file_bytes = file_bytes or ((32 if quick else 128) * MiB)
    rounds = rounds or (200 if quick else 1000)
    big_rounds = max(4, min(file_bytes // MiB, 12 if quick else 48))
    rng = np.random.default_rng(seed)
    with _scratch(dir) as d:
        path = os.path.join(d, "probe.bin")
        _write_file(path, file_bytes)
        fd = os.open(path, os.O_RDONLY)
        direct_fd, why = _open_direct(path)
        buf4 = mmap.mmap(-1, PAGE)
        buf1m = mmap.mmap(-1, MiB)
        try:
            dropped = _drop(fd)
            if direct_fd is None and not dropped:
                note = f"{why}, and posix_fadvise is missing too: no way to read past the page cache here"
                return tuple(unavailable(k, v, "io", note, method) for k, v in labels.items()
                             if k != "page_cache_read_4k") + (_cached(fd, rounds, rng, method, labels),)
            before = resident_pages(path)
            pages = file_bytes // PAGE
            offsets = iter(rng.choice(pages, size=min(rounds + 10, pages), replace=False) * PAGE)
            if direct_fd is not None:
                rfd, note = direct_fd, None
            else:
                rfd = fd
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
                note = FALLBACK_NOTE.format(why=why, left=before, total=pages) + (
                    STILL_CACHED.format(left=before) if before > pages // 100 else "") if before is not None else (
                    f"O_DIRECT is not available here ({why}); fell back to posix_fadvise(DONTNEED) but could "
                    "not verify with mincore that the pages left the cache: treat this row with suspicion")
            n = min(rounds, pages - 10)
            random4 = time_each(lambda: os.preadv(rfd, [buf4], int(next(offsets))), n, warmup=10)
            after = resident_pages(path)
            seq_off = iter(range(0, 10**6 * MiB, MiB))

            def read_1m() -> None:
                off = next(seq_off) % file_bytes
                if direct_fd is None:
                    _drop(fd)
                os.preadv(rfd, [buf1m], off)

            seq = time_each(read_1m, big_rounds, warmup=2)
            cached = _cached(fd, rounds, rng, method, labels)
            extra = {"mode": "O_DIRECT" if direct_fd is not None else "fadvise", "file_bytes": file_bytes,
                     "resident_pages_before": before, "resident_pages_after_4k_reads": after}
            if np.median(random4) < 2 * cached.median_ns:
                note = (note + "; " if note else "") + (
                    "uncached reads were barely slower than page-cache reads: something below the OS "
                    "(a hypervisor or a RAM disk) is caching; this is not a device figure")
            return (Samples("disk_random_read_4k", labels["disk_random_read_4k"], "io", random4, method, note,
                            extra),
                    cached,
                    Samples("disk_seq_read_1mb", labels["disk_seq_read_1mb"], "io", seq, method, note,
                            {**extra, "gb_per_s": MiB / float(np.median(seq))}))
        finally:
            buf4.close()
            buf1m.close()
            os.close(fd)
            if direct_fd is not None:
                os.close(direct_fd)


def _cached(fd: int, rounds: int, rng: np.random.Generator, method: str, labels: dict[str, str]) -> Samples:
    region = min(8 * MiB, os.fstat(fd).st_size)
    buf = bytearray(PAGE)
    pos = 0
    while pos < region:  # read the region once so every page of it is cached
        pos += os.preadv(fd, [bytearray(MiB)], pos) or region
    offs = iter(rng.integers(0, region // PAGE, rounds + 10) * PAGE)
    samples = time_each(lambda: os.preadv(fd, [buf], int(next(offs))), rounds, warmup=10)
    return Samples("page_cache_read_4k", labels["page_cache_read_4k"], "io", samples, method, None,
                   {"region_bytes": region})


def write_fsync(*, quick: bool = False, dir: str | os.PathLike[str] | None = None,
                rounds: int | None = None) -> Samples:
    """Append 128 bytes to a file and ``fsync`` it: the cost of one durable small write (a log/WAL commit).

    Method: in a temporary folder (in ``dir``, default the system's: where that is tmpfs, as on many
    distributions, fsync waits for nothing — the row records the filesystem and says so), each sample is ``os.write`` of 128 bytes (appending) followed by
    ``os.fsync``, timed together; the file is created and warmed with a few writes first. What dominates is
    the device (or virtual disk) acknowledging a flush; the write into the page cache is ~1 µs of it.
    """
    rounds = rounds or (30 if quick else 100)
    with _scratch(dir) as d:
        fd = os.open(os.path.join(d, "fsync.bin"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            payload = b"x" * 127 + b"\n"

            def once() -> None:
                os.write(fd, payload)
                os.fsync(fd)

            samples = time_each(once, rounds, warmup=3)
        finally:
            os.close(fd)
        fs = filesystem(d)
    note = None
    median = float(np.median(samples)) if samples else 0.0
    if fs in ("tmpfs", "ramfs") or (samples and median < NO_FLUSH_NS):
        why = "the folder is in memory" if fs in ("tmpfs", "ramfs") else "too fast for a device to acknowledge"
        note = NO_FLUSH.format(median=f"{median / 1e3:.1f} µs", fs=fs or "an unknown filesystem", why=why)
    return Samples("write_fsync", "write 128 B + fsync", "io", samples, method_of(write_fsync), note,
                   {"bytes": 128, "filesystem": fs})
