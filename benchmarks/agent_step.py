"""What a research-agent step costs the platform, the model answering at once: the built-in research agent taking
List Files steps (its prompt, the model call through the gateway, the action, the snapshot, the step's record)
against an agent that asks no model and sends the same List Files steps, and against MLAgentBench's research agent
and environment doing the same steps, modelled from their code. Interleaved: a round is one run of each.

A step's time is the time from one step's start to the next's, the median over a run's steps after its first
(which pays the sandbox's start). The model is a loopback server speaking the OpenAI protocol that answers every
request at once with a well-formed List Files answer, so what is measured is the platform's own cost of a step. It
runs in a process of its own, as a model server does: in the measuring process its handling of each request (the
HTTP exchange, the prompt's JSON) took the worker's time and its interpreter lock.

MLAgentBench is not on PyPI; its step is modelled as its code takes it (``agents/agent_research.py``,
``LLM.py``, ``environment.py``, ``low_level_actions.py``): the prompt built from the initial prompt (here the one
our agent sent, the same size) and the last three steps, one completion through an OpenAI client kept for the
process (its openai 0.x module keeps one session), the prompt and completion appended to the step's log file, the
answer split into its entries, the main log appended to, ``ls -F`` of the folder, the step appended to the trace,
the whole ``trace.json`` rewritten and the files it does not list as read-only copied into the step's folder. The
model leaves out its token counting in ``log_to_file`` (tiktoken, whose encoding is downloaded) and its import
time; its research log is off by default and so is left out too.

    .venv/bin/python benchmarks/agent_step.py [--steps 20] [--rounds 3] [--database-url postgres://.../db] [--parts]

``--parts`` also times the parts of the research agent's steps (the gateway's call, its slot's and its record's
transactions, the HTTP client's call, the action with its step's record, the agent's turn from a model's answer to its
action) and prints their medians.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale_out import SCRIPTED_AGENT, act, task_ready  # noqa: E402
from scratch import django_scratch  # noqa: E402

ENTRIES = ("Reflection", "Research Plan and Status", "Fact Check", "Thought", "Action", "Action Input")
ANSWER_TEXT = (
    "Reflection: nothing to reflect on yet.\nResearch Plan and Status: 1. look at the files\n"
    'Fact Check: none\nThought: list the files\nAction: List Files\nAction Input: {"dir_path": "."}'
)


class Model(BaseHTTPRequestHandler):
    """Answers every chat completion at once with a List Files step; keeps the first prompt it was sent, and gives
    it back to ``GET /first-prompt``."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    first_prompt = ""
    choice = {"index": 0, "message": {"role": "assistant", "content": ANSWER_TEXT}, "finish_reason": "stop"}
    body = json.dumps(
        {
            "id": "bench", "object": "chat.completion", "created": 0, "model": "bench", "choices": [choice],
            "usage": {"prompt_tokens": 900, "completion_tokens": 40, "total_tokens": 940},
        }
    ).encode()  # fmt: skip

    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802 - the http.server API
        request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        if not Model.first_prompt:
            Model.first_prompt = request["messages"][0]["content"]
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def do_GET(self) -> None:  # noqa: N802 - the http.server API
        body = Model.first_prompt.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def model_serve() -> None:
    """Serve the model in this process (``--serve``): its port on the first line of stdout, then until the process
    that started it ends (its end closes this one's stdin)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), Model)
    print(server.server_address[1], flush=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sys.stdin.read()


def model_start() -> tuple[subprocess.Popen, str]:
    """The model's server in a process of its own, and its base URL."""
    process = subprocess.Popen(
        [sys.executable, __file__, "--serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    return process, f"http://127.0.0.1:{process.stdout.readline().strip()}/v1"


def first_prompt(base_url: str) -> str:
    """The first prompt the model was sent ("" before any)."""
    with urllib.request.urlopen(base_url.removesuffix("/v1") + "/first-prompt", timeout=10) as response:
        return response.read().decode()


def step_times(run) -> list[float]:
    """Seconds from each step's start to the next's, after the first step."""
    starts = list(run.steps.order_by("index").values_list("started_at", flat=True))
    return [(b - a).total_seconds() for a, b in zip(starts[1:], starts[2:], strict=False)]


@dataclasses.dataclass
class MLAgentBenchModel:
    """MLAgentBench's research agent and environment taking List Files steps, as its code does (the docstring)."""

    work_dir: Path
    log_dir: Path
    base_url: str
    initial_prompt: str
    read_only: list[str]

    def __post_init__(self) -> None:
        import openai

        self.client = openai.OpenAI(base_url=self.base_url, api_key="not-needed", max_retries=0)
        self.history: list[dict] = []
        self.trace = {"steps": [], "low_level_steps": [], "action_infos": {}, "task_description": "model"}
        (self.log_dir / "traces").mkdir(parents=True, exist_ok=True)
        (self.log_dir / "tool_logs").mkdir(exist_ok=True)
        with open(self.log_dir / "main_log", "a", 1) as fh:
            fh.write(self.initial_prompt + "\n")

    def step(self) -> None:
        curr = len(self.history)
        prompt = self.initial_prompt + ("\nNow let's start!\n\n" if curr <= 3 else "")
        for past in self.history[-3:]:
            prompt += "\n" + past["answer"] + "\nObservation:" + "\n```\n" + past["observation"] + "\n```\n\n"
        response = self.client.chat.completions.create(
            model="bench", messages=[{"role": "user", "content": prompt}], temperature=0.2, max_tokens=500,
            stop=["Observation:"],
        )  # fmt: skip
        completion = response.choices[0].message.content
        with open(self.log_dir / f"step_{curr}_log.log", "a") as fh:
            fh.write(f"\n===================prompt=====================\n{prompt}\n")
            fh.write(f"\n===================bench response (500)=====================\n{completion}\n\n")
        entries = self.entries(completion)
        action_input = json.loads(entries["Action Input"])
        with open(self.log_dir / "main_log", "a", 1) as fh:
            fh.write(f"Step {curr}:\n{completion}\nObservation:\n")
        observation = self.execute(entries["Action"], action_input)
        self.history.append({"answer": completion, "observation": observation})
        with open(self.log_dir / "main_log", "a", 1) as fh:
            fh.write("\n```\n" + observation + "\n```\n\n")

    @staticmethod
    def entries(text: str) -> dict[str, str]:
        pattern = "|".join(re.escape(name) for name in ENTRIES)
        parts = re.split(rf"^({pattern}):", text, flags=re.M)
        return {parts[i]: parts[i + 1].strip() for i in range(1, len(parts) - 1, 2)}

    def execute(self, action: str, action_input: dict) -> str:
        curr = len(self.trace["steps"])
        observation = subprocess.check_output(["ls", "-F", str(self.work_dir / action_input["dir_path"])]).decode()
        self.trace["low_level_steps"].append(
            {"action": {"name": action, "args": action_input}, "observation": observation, "timestamp": time.time()}
        )
        self.trace["steps"].append(
            {"action": {"name": action, "args": action_input}, "observation": observation, "timestamp": time.time()}
        )
        with open(self.log_dir / "trace.json", "w") as fh:
            json.dump(self.trace, fh, indent=4)
        save = self.log_dir / "traces" / f"step_{curr}_files"
        if save.exists():
            shutil.rmtree(save)
        save.mkdir()
        for path, _dirs, files in os.walk(self.work_dir):
            rel = os.path.relpath(path, self.work_dir)
            for name in files:
                file_path = os.path.join(rel, name)
                if file_path not in self.read_only:
                    (save / rel).mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(self.work_dir / file_path, save / file_path)
        return observation


def mlagentbench_steps(var: Path, round_no: int, version, base_url: str, steps: int, prompt: str) -> list[float]:
    """Per-step seconds of the MLAgentBench model over a copy of the task's workspace, after its first step."""
    from runner.execution.preparation import task_version_prepare
    from runner.workspace.snapshots import BlobStore, manifest_restore

    prepared = task_version_prepare(version)
    work = var / f"mlab-{round_no}" / "workspace"
    work.mkdir(parents=True)
    manifest_restore(prepared.env_manifest, work, BlobStore())
    read_only = [os.path.join(".", rel) for rel in prepared.read_only_files]  # recorded as ./name, as it does
    model = MLAgentBenchModel(work, var / f"mlab-{round_no}" / "env_log", base_url, prompt, read_only)
    times = []
    for i in range(steps):
        started = time.perf_counter()
        model.step()
        if i:
            times.append(time.perf_counter() - started)
    return times


def ms(seconds: list[float]) -> float:
    return statistics.median(seconds) * 1000


def parts_timed() -> dict[str, list[float]]:
    """Timers around the parts of a step (seconds per call, by part), from now on in this process."""
    from runner.execution import conversation, protocol, session
    from runner.llm import gateway

    times: dict[str, list[float]] = {}

    def timed(owner, name: str, label: str) -> None:
        inner = getattr(owner, name)

        def wrapper(*args, **kwargs):
            started = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                times.setdefault(label, []).append(time.perf_counter() - started)

        setattr(owner, name, wrapper)

    timed(gateway, "completion_for_run", "the model call through the gateway")
    conversation.completion_for_run = gateway.completion_for_run
    timed(gateway._Call, "begin", "  its slot's transaction (the endpoint read there)")
    timed(gateway, "_call", "  the HTTP client's call")
    timed(gateway._Call, "record", "  its record's transaction")
    timed(session.RunSession, "act", "the action, its snapshot and its step's record")
    send, receive = protocol.AgentChannel.send, protocol.AgentChannel.receive
    sent: list[tuple[str, float]] = []
    turns = {"completion": "the agent's turn, from a model's answer to its act", "observation": "the agent's turn, "
             "from an observation to its model request"}  # fmt: skip

    def sending(self, message, *args, **kwargs):
        send(self, message, *args, **kwargs)
        sent.append((message.get("type"), time.perf_counter()))

    def received(self, *args, **kwargs):
        message = receive(self, *args, **kwargs)
        if sent:
            kind, at = sent.pop()
            if kind in turns:
                times.setdefault(turns[kind], []).append(time.perf_counter() - at)
        return message

    protocol.AgentChannel.send, protocol.AgentChannel.receive = sending, received
    return times


def main() -> None:
    if sys.argv[1:] == ["--serve"]:
        return model_serve()
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--database-url", default="", help="a scratch database to measure (default: throwaway SQLite)")
    parser.add_argument("--parts", action="store_true", help="also time the parts of the research agent's steps")
    args = parser.parse_args()
    var = django_scratch("agentstep-", args.database_url)
    from django.conf import settings
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from runner.agents.builtin import agents_builtin_ensure
    from runner.execution import run_execute
    from runner.models import Agent, ModelEndpoint, RunLimits
    from runner.services import run_create

    server, base_url = model_start()
    ModelEndpoint.objects.update_or_create(name="bench-model", defaults={"base_url": base_url, "model_id": "bench"})
    version = task_ready(var)
    research = next(a for a in agents_builtin_ensure() if a.name == "research")
    listing = [act("List Files", dir_path=".") for _ in range(args.steps)] + [act("Final Answer", final_answer="x")]
    free = Agent.objects.create(
        name="bench-list-files", kind="package", entrypoint="scripted_agent", package_path=str(SCRIPTED_AGENT),
        config={"script": listing},
    )  # fmt: skip
    limits = RunLimits(max_steps=args.steps)
    parts = parts_timed() if args.parts else {}
    times: dict[str, list[float]] = {"research": [], "free": [], "mlagentbench": []}
    for r in range(args.rounds):
        order = ["research", "free", "mlagentbench"] if r % 2 == 0 else ["mlagentbench", "free", "research"]
        for name in order:
            if name == "mlagentbench":
                prompt = first_prompt(base_url)
                if not prompt:  # the model's initial prompt is the one our agent sent: run ours first
                    continue
                times[name] += mlagentbench_steps(var, r, version, base_url, args.steps, prompt)
                continue
            agent = research if name == "research" else free
            run = run_create(task=version.task, agent=agent, model="bench-model", enqueue=False, limits=limits)
            counted = {label: len(seconds) for label, seconds in parts.items()}
            run = run_execute(run.pk)
            if name == "free":  # the parts are the research agent's: what the free run added is dropped
                for label, seconds in parts.items():
                    del seconds[counted.get(label, 0) :]
            if run.steps.count() < args.steps:
                raise SystemExit(f"the {name} run took {run.steps.count()} steps: {run.status} {run.error}")
            times[name] += step_times(run)
    server.kill()
    server.wait()
    engine = settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]
    load = os.getloadavg()[0]
    print(f"List Files steps, {args.rounds} interleaved rounds of {args.steps} steps, {engine}, load {load:.1f}:")
    labels = {
        "research": "the research agent (its model answering at once)",
        "free": "an agent asking no model, the same actions",
        "mlagentbench": "MLAgentBench's research agent (modelled)",
    }
    for name, label in labels.items():
        if times[name]:
            print(f"  {label:<52} median {ms(times[name]):6.1f} ms a step over {len(times[name])} steps")
    print(f"  {'research agent / no model (goal: at most 1.5x)':<52} {ms(times['research']) / ms(times['free']):6.2f}x")
    if times["mlagentbench"]:
        ratio = ms(times["research"]) / ms(times["mlagentbench"])
        print(f"  {'research agent / MLAgentBench (modelled)':<52} {ratio:6.2f}x")
    if parts:
        print("The research agent's steps, by part (median per call):")
        for label, seconds in parts.items():
            print(f"  {label:<52} median {ms(seconds):6.2f} ms over {len(seconds)}")


if __name__ == "__main__":
    main()
