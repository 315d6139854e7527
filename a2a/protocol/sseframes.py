"""Reading a Server-Sent Events body into its events' data (I/O-free).

Why here: our client reads peers' streams (``a2a.client``), and the relay and roost-capsule read
the relay's; all need the same framing rules (the WHATWG ``text/event-stream`` format): lines end
with LF, CRLF or CR; ``data:`` lines accumulate (joined by LF) until a blank line dispatches the
event; a line starting with ``:`` is a comment (a heartbeat); other fields (``event``, ``id``,
``retry``) are read and ignored. An event's data is bounded (:data:`MAX_EVENT_BYTES`).
"""

from __future__ import annotations

__all__ = ["MAX_EVENT_BYTES", "SseParser"]

MAX_EVENT_BYTES = 16 * 1024 * 1024


class SseParser:
    """Feed body bytes as they come; get back the data of each event completed by them."""

    __slots__ = ("_buffer", "_data", "_size")

    def __init__(self) -> None:
        self._buffer = b""
        self._data: list[bytes] = []
        self._size = 0

    def feed(self, chunk: bytes) -> list[bytes]:
        """The data of every event this chunk completed, oldest first. ValueError past the bound."""
        buffer = self._buffer + chunk if self._buffer else chunk
        events: list[bytes] = []
        start = 0
        n = len(buffer)
        while start < n:
            lf = buffer.find(b"\n", start)
            cr = buffer.find(b"\r", start)
            if lf < 0 and cr < 0:
                break
            if cr >= 0 and (lf < 0 or cr < lf):
                if cr + 1 == n:  # a CR at the end: it may be a CRLF cut in two
                    break
                end, nxt = cr, cr + (2 if buffer[cr + 1 : cr + 2] == b"\n" else 1)
            else:
                end, nxt = lf, lf + 1
            self._line(buffer[start:end], events)
            start = nxt
        self._buffer = buffer[start:]
        if len(self._buffer) + self._size > MAX_EVENT_BYTES:
            raise ValueError(f"a stream event is larger than {MAX_EVENT_BYTES // (1024 * 1024)} MiB")
        return events

    def _line(self, line: bytes, events: list[bytes]) -> None:
        if not line:
            if self._data:
                events.append(b"\n".join(self._data))
                self._data = []
                self._size = 0
            return
        if line.startswith(b":"):
            return
        name, _, value = line.partition(b":")
        if name == b"data":
            value = value[1:] if value.startswith(b" ") else value
            self._size += len(value) + 1
            if self._size > MAX_EVENT_BYTES:
                raise ValueError(f"a stream event is larger than {MAX_EVENT_BYTES // (1024 * 1024)} MiB")
            self._data.append(value)
