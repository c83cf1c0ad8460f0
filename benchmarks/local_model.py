"""The local model endpoint on this machine: SmolLM2-135M-Instruct under `transformers serve`
(runner/llm/local_model.py).

Prints the weights' preparation (the GGUF de-quantised and saved as a float32 folder: time, peak memory, folder
size), the server's start (until /v1/models answers), and for each prompt length the prompt processing speed
(a 1-token answer: prompt tokens / latency) and the generation speed (the extra tokens of a --gen-tokens answer
over the extra time it took), as the server's own usage counts tokens. No database is touched.

    .venv/bin/python benchmarks/local_model.py [--contexts 100,3400] [--gen-tokens 16] [--repeats 2] [--fresh]

--fresh prepares the weights into a temporary folder (measuring the preparation; removed at the end); without it
the weights in the var folder are used (prepared first if they are not there).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from runner.llm.local_model import (  # noqa: E402
    local_model_command,
    local_model_env,
    local_model_wait,
    model_folder,
)

FILLER = (
    "The research agent reads the task, lists the files, inspects the training script, runs it to measure the "
    "baseline, edits a hyperparameter and runs it again, writing down what each observation showed. "
)


def prepare(var_dir: Path) -> tuple[float, float]:
    """Prepare the weights in a child process: seconds and the child's peak memory in MB."""
    code = (
        "import sys; from pathlib import Path; from runner.llm.local_model import local_model_prepare; "
        "local_model_prepare(var_dir=Path(sys.argv[1]))"
    )
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", code, str(var_dir)], cwd=ROOT, env=local_model_env(), check=True, capture_output=True
    )
    seconds = time.perf_counter() - start
    return seconds, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def ask(base_url: str, model: str, prompt: str, max_tokens: int) -> tuple[float, dict]:
    body = {"model": model, "messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens}
    request = urllib.request.Request(
        base_url + "/chat/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    start = time.perf_counter()
    with urllib.request.urlopen(request, timeout=3600) as response:
        answer = json.load(response)
    return time.perf_counter() - start, answer["usage"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--contexts", default="100,3400", help="prompt lengths in tokens, roughly")
    parser.add_argument("--gen-tokens", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--fresh", action="store_true", help="measure the preparation in a temporary var folder")
    args = parser.parse_args()

    var_dir = Path(os.environ.get("BENCH_VAR_DIR", ROOT / "var"))
    scratch = None
    if args.fresh:
        scratch = var_dir = Path(tempfile.mkdtemp(prefix="local-model-bench-"))
    try:
        cached = (model_folder(var_dir) / "config.json").is_file()
        seconds, peak_mb = prepare(var_dir)
        folder = model_folder(var_dir)
        size_mb = sum(f.stat().st_size for f in folder.iterdir()) / 1e6
        what = "already prepared (a check)" if cached else "de-quantised and saved"
        print(f"weights: {what} in {seconds:.1f} s, peak memory {peak_mb:.0f} MB, folder {size_mb:.0f} MB")
        run_server(folder, args)
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def run_server(folder: Path, args: argparse.Namespace) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    base_url = f"http://127.0.0.1:{port}/v1"
    start = time.perf_counter()
    server = subprocess.Popen(
        local_model_command(folder=folder, port=port),
        env=local_model_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        local_model_wait(base_url=base_url, timeout_s=900, alive=lambda: server.poll() is None)
        print(f"server: answering {time.perf_counter() - start:.1f} s after its start")
        for target in (int(n) for n in args.contexts.split(",")):
            prompt = FILLER * max(1, target // 40)
            prompt_rates, gen_rates, tokens = [], [], 0
            for _ in range(args.repeats):
                t1, usage1 = ask(base_url, str(folder), prompt, 1)
                tg, usage_g = ask(base_url, str(folder), prompt, args.gen_tokens)
                tokens = usage1["prompt_tokens"]
                prompt_rates.append(tokens / t1)
                extra = usage_g["completion_tokens"] - usage1["completion_tokens"]
                gen_rates.append(extra / max(tg - t1, 1e-6))
            print(
                f"prompt of {tokens} tokens: prompt processing {statistics.median(prompt_rates):6.1f} tokens/s "
                f"(min {min(prompt_rates):.1f}), generation {statistics.median(gen_rates):5.2f} tokens/s "
                f"(min {min(gen_rates):.2f}) over {args.gen_tokens}-token answers, {args.repeats} repeats"
            )
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


if __name__ == "__main__":
    main()
