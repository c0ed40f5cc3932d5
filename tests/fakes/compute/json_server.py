"""A small JSON-over-HTTP server on 127.0.0.1 for the fakes that answer in a few routes (the
OAuth token endpoint, OS Login, Vault's transit engine): `answer(verb, path, query, body bytes,
headers)` gives the status and the JSON payload."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

Answer = Callable[[str, str, dict[str, str], bytes, Message], tuple[int, Any]]


class JsonServer:
    def __init__(self, answer: Answer) -> None:
        class Handler(BaseHTTPRequestHandler):
            def _serve(self, verb: str) -> None:
                url = urlsplit(self.path)
                query = {k: v[0] for k, v in parse_qs(url.query).items()}
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                status, payload = answer(verb, url.path, query, raw, self.headers)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802 (http.server's names)
                self._serve("GET")

            def do_POST(self) -> None:  # noqa: N802
                self._serve("POST")

            def do_PUT(self) -> None:  # noqa: N802
                self._serve("PUT")

            def do_PATCH(self) -> None:  # noqa: N802
                self._serve("PATCH")

            def do_DELETE(self) -> None:  # noqa: N802
                self._serve("DELETE")

            def log_message(self, *args: object) -> None:
                pass

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._http.daemon_threads = True
        self._thread = threading.Thread(target=self._http.serve_forever, args=(0.05,),
                                        daemon=True)

    @property
    def endpoint(self) -> str:
        host, port = self._http.server_address[:2]
        return f"{host}:{port}"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._http.shutdown()
        self._http.server_close()
        self._thread.join(timeout=5)
