"""Compression of encoded responses: a switch, with the napkin math of when it pays.

    CODINGS = ("none", "gzip", "zstd")      # the switch's values; the HTTP Content-Encoding is the same word
    compress(data, "zstd") -> bytes; decompress(data, "zstd") -> bytes
    pays_off(raw_bytes, packed_bytes, cpu_ns, bytes_per_s) -> ns saved per response (negative: it costs)

``gzip`` is zlib's DEFLATE in a gzip wrapper (level 6, the zlib default); ``zstd`` is Zstandard (level 3,
its default), faster at a similar ratio. Compression trades CPU on both ends for bytes on the wire: it pays
when ``bytes saved / link speed`` exceeds the time spent compressing and decompressing — on a slow link, not
on loopback (the lab measures both sides and draws the crossover).
"""

from __future__ import annotations

import threading
import zlib

import zstandard

from labkit.errors import BadInputError

__all__ = ["CODINGS", "compress", "decompress", "pays_off"]

#: the compression switch's values, baseline first; each is also its HTTP Content-Encoding token.
CODINGS: tuple[str, ...] = ("none", "gzip", "zstd")
_local = threading.local()  # zstandard's (de)compressor objects are not safe to share between threads


def _zstd() -> tuple[zstandard.ZstdCompressor, zstandard.ZstdDecompressor]:
    pair = getattr(_local, "zstd", None)
    if pair is None:
        pair = _local.zstd = (zstandard.ZstdCompressor(level=3), zstandard.ZstdDecompressor())
    return pair


def _check(coding: str) -> str:
    if coding not in CODINGS:
        raise BadInputError(f"unknown compression {coding!r}: use one of {', '.join(CODINGS)}")
    return coding


def compress(data: bytes, coding: str = "none") -> bytes:
    """``data`` compressed with ``coding`` (``none`` returns it unchanged)."""
    if _check(coding) == "none":
        return data
    if coding == "gzip":
        return zlib.compress(data, 6, wbits=31)
    return _zstd()[0].compress(data)


def decompress(data: bytes, coding: str = "none") -> bytes:
    """The bytes :func:`compress` was given; raises BadInputError for data that is not ``coding``."""
    if _check(coding) == "none":
        return data
    try:
        if coding == "gzip":
            return zlib.decompress(data, wbits=31)
        return _zstd()[1].decompress(data)
    except (zlib.error, zstandard.ZstdError) as exc:
        raise BadInputError(f"cannot decompress {len(data)} bytes as {coding}: {exc}; was it compressed so?") from exc


def pays_off(raw_bytes: int, packed_bytes: int, cpu_ns: float, bytes_per_s: float) -> float:
    """Nanoseconds a response saves by compression on a link of ``bytes_per_s``: the transfer time of the
    bytes saved minus the CPU spent (compress + decompress). Positive: it pays."""
    if bytes_per_s <= 0:
        raise BadInputError(f"bytes_per_s must be > 0 (a link's speed), got {bytes_per_s!r}")
    return (raw_bytes - packed_bytes) / bytes_per_s * 1e9 - cpu_ns
