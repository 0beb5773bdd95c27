"""A request sent on a connection the server drops before answering (an
idle keep-alive connection it closed) is sent again, once the server
answers on a new one; with retries off the caller gets
``PlacementUnavailable``, not a transport exception."""

import http.server
import json
import threading

import pytest

from scheduler_ext import errors
from scheduler_ext.placement.http import HttpPlacement


class _DropsFirstPost(http.server.BaseHTTPRequestHandler):
    """Drops the connection of the first ``drops`` POSTs without a word;
    answers the next with 204."""

    drops = 1
    seen: list = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen.append(body)
        if len(type(self).seen) <= type(self).drops:
            self.close_connection = True
            self.connection.shutdown(2)     # no status line at all
            return
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    _DropsFirstPost.seen = []
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _DropsFirstPost)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def test_a_dropped_connection_is_retried(server):
    client = HttpPlacement.from_url(f"http://127.0.0.1:{server.server_port}")
    body = {"c1": {"allocations": {}, "consumer_generation": 1,
                   "project_id": "p", "user_id": "u"}}
    client._call("POST", "/allocations", body, ok=(204,), version=None)
    assert _DropsFirstPost.seen == [body, body]


def test_without_retries_the_drop_is_placement_unavailable(server):
    client = HttpPlacement.from_url(f"http://127.0.0.1:{server.server_port}",
                                    connect_retries=0)
    with pytest.raises(errors.PlacementUnavailable, match="POST /allocations"):
        client._call("POST", "/allocations", {}, ok=(204,), version=None)
    assert len(_DropsFirstPost.seen) == 1
