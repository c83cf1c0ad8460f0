"""One model call through the gateway as a run makes it (slot, call, record, budget), the endpoint a loopback server
speaking the OpenAI protocol that answers at once: with the client the process keeps for the endpoint (as the
gateway does) and with a client built for each call (as it did), interleaved. What is left is the platform's own
cost of a call. A throwaway SQLite database under a temporary folder; ``--database-url`` measures another (it is
migrated and gets a task, a run and an endpoint: give it a scratch database, never a live one).

``--clients`` also times the HTTP request alone, an 8 kB prompt (a research agent's) to a server answering at once in
a process of its own (``agent_step.py``'s), by client, interleaved: the gateway's (urllib3's connection pool), httpx's
and the ``openai`` package's (what the gateway used before; it is installed with the dev extra).

    .venv/bin/python benchmarks/llm_call.py [--repeats 50] [--database-url postgres://.../scratch] [--clients]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

ANSWER = json.dumps(
    {
        "id": "bench",
        "object": "chat.completion",
        "created": 0,
        "model": "bench",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11},
    }
).encode()


class Answer(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are two writes: no delayed-ACK stall on a kept connection

    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802 - the http.server API
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(ANSWER)))
        self.end_headers()
        self.wfile.write(ANSWER)


def summary(name: str, seconds: list[float]) -> str:
    ms = sorted(s * 1000 for s in seconds)
    return f"{name:<44} median {statistics.median(ms):6.2f} ms   p90 {ms[int(len(ms) * 0.9) - 1]:6.2f} ms"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--database-url", default="", help="a scratch database to measure (default: throwaway SQLite)")
    parser.add_argument("--clients", action="store_true", help="also time the HTTP request alone, by client")
    args = parser.parse_args()
    var = Path(tempfile.mkdtemp(prefix="llmbench-"))
    os.environ["BENCH_VAR_DIR"] = str(var)
    os.environ.pop("DATABASE_URL", None)
    if args.database_url:
        os.environ["DATABASE_URL"] = args.database_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")
    import django

    django.setup()
    from django.core.management import call_command

    from runner.llm import gateway
    from runner.models import Agent, ModelEndpoint, Run
    from task_bank.services import BUILTIN_DIR, task_import

    server = ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    call_command("migrate", verbosity=0)
    version, _ = task_import(root=BUILTIN_DIR / "digits", slug="bench-digits")
    ModelEndpoint.objects.update_or_create(
        name="bench-model",
        defaults={"base_url": f"http://127.0.0.1:{server.server_address[1]}/v1", "model_id": "bench"},
    )
    agent = Agent.objects.create(name="bench-llm-agent", version="1", kind=Agent.Kind.BUILTIN, uses_llm=True)
    run = Run.objects.create(
        task=version.task, task_version=version, agent=agent, model="bench-model", status=Run.Status.RUNNING
    )
    messages = [{"role": "user", "content": "Say ok."}]
    kept, fresh = [], []
    gateway.complete(run=run, messages=messages)  # builds the kept client, opens its connection
    for step in range(1, args.repeats + 1):  # a step each, as an agent's calls come: within a step's call limit
        for times, new_client in ((kept, False), (fresh, True)):
            if new_client:
                gateway._clients.clear()  # as before: a client (its TLS context, its connections) for each call
            started = time.perf_counter()
            gateway.complete(run=run, messages=messages, options={"max_tokens": 8}, step_index=step)
            times.append(time.perf_counter() - started)
    server.shutdown()
    print(f"a model call through the gateway, recorded on a run, {args.repeats} times each, interleaved:")
    print(summary("the endpoint's kept client", kept))
    print(summary("a client built for the call", fresh))
    print(f"{'ratio (medians, built / kept)':<44} {statistics.median(fresh) / statistics.median(kept):6.2f}x")
    if args.clients:
        clients_compare(args.repeats * 10)


def clients_compare(repeats: int) -> None:
    """The HTTP request alone, by client, against ``agent_step.py``'s model in a process of its own."""
    import httpx
    import openai
    from agent_step import model_start

    from runner.llm import gateway
    from runner.models import ModelEndpoint

    server, base_url = model_start()
    endpoint = ModelEndpoint(name="bench-clients", base_url=base_url, model_id="bench")
    messages = [{"role": "user", "content": "x" * 8000}]
    options = {"max_tokens": 500, "temperature": 0.2, "stop": ["Observation:"]}
    kept = gateway.client_for(endpoint)
    plain = httpx.Client(base_url=base_url)
    typed = openai.OpenAI(base_url=base_url, api_key="not-needed", max_retries=0)
    requests = {
        "the gateway's (urllib3's pool)": lambda: gateway._call(kept, endpoint, messages, options, 30),
        "httpx": lambda: plain.post("chat/completions", json={"model": "bench", "messages": messages, **options}),
        "openai": lambda: typed.chat.completions.create(model="bench", messages=messages, timeout=30, **options),
    }
    times: dict[str, list[float]] = {name: [] for name in requests}
    for _ in range(repeats):
        for name, request in requests.items():
            started = time.perf_counter()
            request()
            times[name].append(time.perf_counter() - started)
    server.kill()
    server.wait()
    print(f"the HTTP request alone (an 8 kB prompt), {repeats} times each, interleaved, load {os.getloadavg()[0]:.1f}:")
    for name, seconds in times.items():
        print(summary(name, seconds[repeats // 10 :]))  # after the first tenth: connections open, code warm


if __name__ == "__main__":
    main()
