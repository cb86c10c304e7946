"""A real HTTP server on loopback standing in for a Slack webhook: accepts, refuses or hangs."""

from __future__ import annotations

import contextlib
import http.server
import json
import threading
from collections.abc import Iterator


class _Recorder(http.server.BaseHTTPRequestHandler):
    """Answers every POST with the server's `status` (or never, if `hang`), recording the body."""

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.received.append((self.headers["Content-Type"], json.loads(body)))
        self.server.authorizations.append(self.headers["Authorization"])
        if self.server.hang:
            self.server.release.wait()
            return
        self.send_response(self.server.status)
        if self.server.location:
            self.send_header("Location", self.server.location)
        self.end_headers()

    def do_GET(self) -> None:  # what urllib sends where a redirected POST leads
        self.server.received.append(("GET", None))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args) -> None:  # keep the test output clean
        pass


@contextlib.contextmanager
def webhook_server(
    status: int = 200, hang: bool = False, location: str | None = None
) -> Iterator[tuple[str, object]]:
    """Yields (url, server); `server.received` lists (content type, JSON body) per POST
    (("GET", None) per GET), `server.authorizations` each POST's Authorization header.

    A hanging server answers only when the block ends (`server.release` is set then);
    `location` is sent as the answer's Location header (a redirect, with a 3xx status).
    """
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    server.received, server.status, server.hang = [], status, hang
    server.authorizations, server.location = [], location
    server.release = threading.Event()
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/services/SECRET", server
    finally:
        server.release.set()
        server.shutdown()
        server.server_close()
