"""A small real HTTP server on 127.0.0.1 that speaks the OpenAI chat-completions protocol.

A hosted model cannot run here, so tests script its answers: each request is
recorded and answered by ``reply(body) -> (status, content)``, wrapped in a
protocol-correct chat-completion response.
"""

import json
import select
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = Callable[[dict[str, Any]], tuple[int, str]]


class ChatServer:
    """Records requests; answers with what ``reply`` returns for each."""

    def __init__(self, reply: Reply, *, delay_s: float = 0.0) -> None:
        self.reply = reply
        self.delay_s = delay_s
        self.requests: list[tuple[str, dict[str, str], dict[str, Any]]] = []
        self.hung_up = 0  # requests whose caller closed the connection before the answer
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append((self.path, dict(self.headers), body))
                if server.delay_s:
                    time.sleep(server.delay_s)
                status, content = server.reply(body)
                if _peer_closed(self.connection):
                    server.hung_up += 1
                payload = {
                    "id": f"chatcmpl-{len(server.requests)}",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": body.get("model", ""),
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": content},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                }
                data = json.dumps(payload if status == 200 else {"error": content}).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self._http.server_address[1]}/v1"

    @contextmanager
    def running(self) -> Iterator["ChatServer"]:
        thread = threading.Thread(target=self._http.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._http.shutdown()
            self._http.server_close()
            thread.join()


def _peer_closed(connection: socket.socket) -> bool:
    """Whether the caller has closed its end: readable, with nothing to read."""
    readable, _, _ = select.select([connection], [], [], 0)
    if not readable:
        return False
    try:
        return connection.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


def transcript_of(body: dict[str, Any]) -> str:
    """The user message of an extraction prompt (the rendered transcript)."""
    return str(body["messages"][-1]["content"])
