"""Bounds on what connections may hold: how many are open, and how long a request takes
to arrive.

uvicorn bounds how long an idle kept-alive connection stays open, but not how long a
client may take to send a request: a client that opens a connection and sends half a
request line, or a head without its end, would hold the connection for as long as it
likes, and fifty such clients would hold fifty. The protocol that `bounded_protocol` makes
closes a connection whose request head (request line and headers) has not arrived whole
within `head_timeout` seconds of the connection opening or of the previous response (a
408, then closed), and answers a connection past `max_connections` open ones with a 503
and closes it at once. The body is bounded where it is read (`garden.serve.http.read_json`).
Both answers are the server's one JSON error line.
"""
from __future__ import annotations

import asyncio

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol



def _answer(status: bytes, message: bytes) -> bytes:
    body = b'{"error":"%s","field":null}' % message
    return (b"HTTP/1.1 %s\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: %d\r\n\r\n%s"
            % (status, len(body), body))


def bounded_protocol(head_timeout: float, max_connections: int) -> type[H11Protocol]:
    """uvicorn's h11 protocol, with a request's head bounded to `head_timeout` seconds and
    the connections open at once to `max_connections`."""

    class BoundedH11(H11Protocol):
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._head_timer: asyncio.TimerHandle | None = None
            if len(self.connections) > max_connections:
                transport.write(_answer(b"503 Service Unavailable", b"the server holds as many connections as it "
                                        b"takes (%d); try again" % max_connections))
                transport.close()
                return
            self._arm()

        def _arm(self) -> None:
            if self._head_timer is None:
                self._head_timer = self.loop.call_later(head_timeout, self._head_timed_out)

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
                self.transport.write(_answer(b"408 Request Timeout",
                                             b"the request head did not arrive within %g s" % head_timeout))
            self.transport.close()

    return BoundedH11
