"""An HTTP proxy on 127.0.0.1 in front of the real placement that injects
faults: a status instead of (or after) forwarding, or no answer at all."""

from __future__ import annotations

import http.client
import http.server
import socketserver
import threading
import urllib.parse


class _Rule:
    def __init__(self, method, path, status, body, count, forward, after):
        self.method, self.path, self.status = method, path, status
        self.body, self.count, self.forward = body, count, forward
        self.after = after


class FaultProxy:
    """``with FaultProxy(placement_url) as url:``; rules apply in order."""

    def __init__(self, target: str):
        self.target = urllib.parse.urlsplit(target)
        self.rules: list[_Rule] = []
        self.down = False
        self.hits = 0
        self._lock = threading.Lock()

    def fail(self, method: str, path: str, status: int, code: str = "",
             detail: str = "injected", count: int = 1, forward: bool = False,
             after: int = 0):
        """After ``after`` matching requests pass, the next ``count`` get
        ``status`` (after being forwarded when ``forward``)."""
        body = ('{"errors": [{"status": %d, "title": "injected", "detail": "%s"%s}]}'
                % (status, detail, f', "code": "{code}"' if code else ""))
        self.rules.append(_Rule(method, path, status, body.encode(), count,
                                forward, after))

    def _rule(self, method: str, path: str) -> _Rule | None:
        with self._lock:
            for rule in self.rules:
                if rule.count and rule.method == method and path.startswith(rule.path):
                    if rule.after:
                        rule.after -= 1
                        continue
                    rule.count -= 1
                    self.hits += 1
                    return rule
        return None

    def __enter__(self) -> str:
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _handle(self):
                if proxy.down:
                    self.close_connection = True
                    self.connection.close()
                    return
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                rule = proxy._rule(self.command, self.path)
                if rule is None or rule.forward:
                    conn = http.client.HTTPConnection(
                        proxy.target.hostname, proxy.target.port, timeout=60)
                    headers = {k: v for k, v in self.headers.items()
                               if k.lower() not in ("host", "connection")}
                    conn.request(self.command, self.path, body, headers)
                    resp = conn.getresponse()
                    data = resp.read()
                    status, rheaders = resp.status, resp.getheaders()
                    conn.close()
                if rule is not None:
                    status, data = rule.status, rule.body
                    rheaders = [("Content-Type", "application/json")]
                self.send_response(status)
                for k, v in rheaders:
                    if k.lower() not in ("content-length", "connection",
                                         "transfer-encoding"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_DELETE = _handle

        class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True

        self._server = Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        daemon=True)
        self._thread.start()
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
