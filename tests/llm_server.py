"""An HTTP server speaking the OpenAI chat-completions protocol on loopback, scripted per test.

Each request takes the next scripted reply: a string (the completion text), a dict with any of
``content`` (None: null, as beside function calls), ``tool_calls`` (the functions the model calls), ``usage``
({"prompt_tokens": .., "completion_tokens": ..} or None for no usage), ``status`` (an HTTP error, its body OpenAI's
error object unless ``body_text`` gives it), ``body`` (raw bytes to send), ``delay`` (seconds to wait first), or a
callable taking the request JSON and returning one of those. When the script runs out, ``default`` answers.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

Reply = str | dict | Callable[[dict], "str | dict"]


class FakeOpenAI:
    def __init__(self) -> None:
        self.script: list[Reply] = []
        self.default: Reply | None = None
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        handler = self._handler()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def start(self) -> FakeOpenAI:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def reply_to(self, request: dict) -> dict:
        with self.lock:
            self.requests.append(request)
            reply = self.script.pop(0) if self.script else self.default
        if reply is None:
            return {"status": 500, "content": "the test server has no reply scripted for this request"}
        if callable(reply):
            reply = reply(request)
        return {"content": reply} if isinstance(reply, str) else reply

    def _handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as API servers speak: a client may reuse its connection
            disable_nagle_algorithm = True  # headers and body are two writes: no delayed-ACK stall between them

            def log_message(self, *args) -> None:
                pass

            def _send(self, status: int, body: bytes, headers: dict | None = None) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self) -> None:  # noqa: N802 - the http.server API
                length = int(self.headers.get("Content-Length", 0))
                request = json.loads(self.rfile.read(length) or b"{}")
                request["_auth"] = self.headers.get("Authorization", "")
                request["_connection"] = self.client_address  # the client's end of the TCP connection
                if not self.path.endswith("/chat/completions"):
                    self._send(404, b'{"error": {"message": "not found"}}')
                    return
                reply = fake.reply_to(request)
                time.sleep(reply.get("delay", 0))
                if "body" in reply:
                    self._send(200, reply["body"])
                    return
                if "status" in reply:
                    error = {"error": {"message": reply.get("content", "error"), "type": "server_error"}}
                    body = reply["body_text"].encode() if "body_text" in reply else json.dumps(error).encode()
                    self._send(reply["status"], body, reply.get("headers"))
                    return
                content = reply.get("content", "")
                usage = reply.get("usage", {"prompt_tokens": 11, "completion_tokens": 7})
                payload = {
                    "id": "chatcmpl-test",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": request.get("model", ""),
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": content}}],
                }
                choice = payload["choices"][0]
                choice["finish_reason"] = "tool_calls" if reply.get("tool_calls") else "stop"
                if "tool_calls" in reply:
                    choice["message"]["tool_calls"] = reply["tool_calls"]
                if usage is not None:
                    payload["usage"] = usage | {"total_tokens": sum(usage.values())}
                self._send(200, json.dumps(payload).encode())

        return Handler
