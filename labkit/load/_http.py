"""A minimal HTTP/1.1 client connection on asyncio streams (GET only, keep-alive, reconnects).

Why not aiohttp or httpx: their per-request work in Python caps the rate one process can offer and adds to
every latency we measure; a bare streams client on uvloop does far less (``tests/benchmarks/bench_load_vs_wrk.py``
holds this client against wrk on the same target).
It speaks just enough HTTP for a load generator: GET, ``Content-Length`` and chunked bodies (bodies are read
and discarded), ``Connection: close``, and bodies delimited by the server closing the connection.
"""

from __future__ import annotations

import asyncio
import time

from labkit.clock import Clock

__all__ = ["HTTPConnection", "ProtocolError", "ConnectError"]

_MAX_HEAD = 64 * 1024


class ProtocolError(Exception):
    """The server sent something that is not an HTTP/1.x response."""


class ConnectError(Exception):
    """The TCP connection could not be opened (refused, unreachable, …)."""


class _StampingProtocol(asyncio.StreamReaderProtocol):
    """asyncio's stream protocol that also notes when bytes last arrived (before any task is woken)."""

    def __init__(self, reader: asyncio.StreamReader, clock: Clock) -> None:
        super().__init__(reader)
        self._clock = clock
        self.last_data_ns = 0

    def data_received(self, data: bytes) -> None:
        self.last_data_ns = self._clock()
        super().data_received(data)


class HTTPConnection:
    """One keep-alive connection to ``host:port``; opened lazily, reopened after the server closes it.

    ``request(path)`` returns the status code. Network failures raise ``ConnectError`` (could not connect),
    ``ConnectionError``/``asyncio.IncompleteReadError`` (the connection broke mid-response) or
    ``ProtocolError``; after any failure the connection is closed and the next request reconnects.

    ``done_ns`` is when the last byte of the latest response arrived, stamped in the protocol callback as wrk
    stamps it in its read callback, so the event loop's hop back into the waiting task is not counted as the
    server's latency (a few to tens of µs in Python).
    """

    __slots__ = ("host", "port", "_host_header", "_reader", "_writer", "_protocol", "_cache", "reused", "opens",
                 "_clock", "done_ns")

    def __init__(self, host: str, port: int, host_header: str,
                 clock: Clock = time.perf_counter_ns) -> None:
        self.host = host
        self.port = port
        self._host_header = host_header
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._cache: dict[str, bytes] = {}
        self.reused = False  # True when the open connection has already carried a response
        self.opens = 0  # TCP connections opened so far (more than one means the server closed some)
        self._protocol: _StampingProtocol | None = None
        self._clock = clock
        self.done_ns = 0

    def _request_bytes(self, path: str) -> bytes:
        data = self._cache.get(path)
        if data is None:
            data = f"GET {path} HTTP/1.1\r\nHost: {self._host_header}\r\nUser-Agent: labkit.load\r\n\r\n".encode(
                "latin-1"
            )
            if len(self._cache) < 4096:  # bounded: a picker may produce endless distinct paths
                self._cache[path] = data
        return data

    async def _open(self) -> None:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=_MAX_HEAD, loop=loop)
        protocol = _StampingProtocol(reader, self._clock)
        try:  # asyncio.open_connection(), with the stamping protocol
            transport, _ = await loop.create_connection(lambda: protocol, self.host, self.port)
        except OSError as exc:
            raise ConnectError(f"{type(exc).__name__}: {exc}") from exc
        self._reader, self._protocol = reader, protocol
        self._writer = asyncio.StreamWriter(transport, protocol, reader, loop)
        self.opens += 1
        self.reused = False

    def close(self) -> None:
        """Close the socket (if open); the next request reconnects."""
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = self._protocol = None

    async def request(self, path: str) -> int:
        """Send ``GET path`` and read the whole response; return its status code."""
        if self._writer is None:
            await self._open()
        retry = self.reused
        try:
            return await self._exchange(path)
        except (asyncio.IncompleteReadError, ConnectionError) as exc:
            self.close()
            # A keep-alive connection the server closed while idle fails on first read with nothing received.
            # A GET is idempotent, so retry once on a fresh connection, as browsers and wrk do.
            nothing = isinstance(exc, ConnectionError) or not exc.partial
            if not (retry and nothing):
                raise
        await self._open()
        try:
            return await self._exchange(path)
        except BaseException:
            self.close()
            raise

    async def _exchange(self, path: str) -> int:
        reader, writer, protocol = self._reader, self._writer, self._protocol
        assert reader is not None and writer is not None and protocol is not None
        writer.write(self._request_bytes(path))
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.LimitOverrunError as exc:
            self.close()
            raise ProtocolError("response head longer than 64 KiB") from exc
        if not head.startswith(b"HTTP/1."):
            self.close()
            raise ProtocolError(f"not an HTTP/1.x response: {head[:40]!r}")
        try:
            status = int(head[9:12])
        except ValueError as exc:
            self.close()
            raise ProtocolError(f"bad status line: {head[:40]!r}") from exc
        lower = head.lower()
        keep_alive = b"\r\nconnection: close" not in lower
        if head[7:8] == b"0":  # HTTP/1.0 closes unless told otherwise
            keep_alive = b"\r\nconnection: keep-alive" in lower
        i = lower.find(b"\r\ncontent-length:")
        if status < 200 or status in (204, 304):
            pass
        elif i >= 0:
            j = lower.index(b"\r\n", i + 2)
            n = int(lower[i + 17 : j])
            if n:
                await reader.readexactly(n)
        elif b"\r\ntransfer-encoding:" in lower and b"chunked" in lower:
            await self._read_chunked(reader)
        else:  # body runs until the server closes the connection
            await reader.read()
            keep_alive = False
        self.done_ns = protocol.last_data_ns
        if keep_alive:
            self.reused = True
        else:
            self.close()
        return status

    @staticmethod
    async def _read_chunked(reader: asyncio.StreamReader) -> None:
        while True:
            line = await reader.readuntil(b"\r\n")
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError as exc:
                raise ProtocolError(f"bad chunk size line: {line[:40]!r}") from exc
            if size == 0:
                break
            await reader.readexactly(size + 2)
        while (await reader.readuntil(b"\r\n")) != b"\r\n":  # trailers, then the blank line
            pass
