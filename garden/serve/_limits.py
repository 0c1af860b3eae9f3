"""Bounds on what a connection may hold: its request's head and body must arrive in time.

uvicorn bounds how long an idle kept-alive connection stays open, but not how long a
client may take to send a request: a client that opens a connection and sends half a
request line, or a head without its end, would hold the connection (and a place under the
connection cap) for as long as it likes. `HeadTimeoutH11` closes a connection whose
request head (request line and headers) has not arrived whole within `head_timeout`
seconds of the connection opening or of the previous response: a 408 and the connection
closed. The body is bounded where it is read (`garden.serve.http.read_json`).
"""
from __future__ import annotations

import asyncio

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

TIMED_OUT = (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\nconnection: close\r\n"
             b"content-length: %d\r\n\r\n%s")


def head_timeout_protocol(seconds: float) -> type[H11Protocol]:
    """uvicorn's h11 protocol, with a request's head bounded to `seconds`."""

    class HeadTimeoutH11(H11Protocol):
        head_timeout = seconds

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._head_timer: asyncio.TimerHandle | None = None
            self._arm()

        def _arm(self) -> None:
            if self._head_timer is None:
                self._head_timer = self.loop.call_later(self.head_timeout, self._head_timed_out)

        def _disarm(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            # the client is still sending a request's head until h11 has seen it whole
            if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                self._arm()
            else:
                self._disarm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm()   # a kept-alive connection: the next head is bounded too

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _head_timed_out(self) -> None:
            self._head_timer = None
            if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
                return
            if self.conn.our_state is h11.IDLE:   # nothing sent on this cycle yet: say why it closes
                body = (b'{"error":"the request head did not arrive within %g s","field":null}'
                        % self.head_timeout)
                self.transport.write(TIMED_OUT % (len(body), body))
            self.transport.close()

    return HeadTimeoutH11
