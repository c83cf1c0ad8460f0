"""The platform's processes started as the Procfile starts them, for the benchmarks that need real ones.

The command lines (queues, concurrency) come from the Procfile's lines alone: a change there is what the benchmarks
run. What a benchmark adds is its own environment (a scratch database, broker, queue and var folder) and what two
processes on one host must not share: each worker's node name.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROCFILE = ROOT / "Procfile"
#: The environment of a platform process that a benchmark sets or clears (the queues follow CELERY_QUEUE);
#: everything else is the benchmark's own.
SERVICE_VARIABLES = (
    "DATABASE_URL", "CELERY_BROKER_URL", "CELERY_QUEUE", "BENCH_SHORT_QUEUE", "BENCH_GPU_QUEUE",
    "BENCH_WORKER_QUEUES", "BENCH_VAR_DIR",
)  # fmt: skip


def procfile_line(name: str) -> str:
    """The command of the Procfile's ``name:`` line, as written (variables not expanded), less the shell's ``exec``
    (a benchmark starts the program itself)."""
    for line in PROCFILE.read_text().splitlines():
        key, sep, command = line.partition(":")
        if sep and key.strip() == name:
            return command.strip().removeprefix("exec ")
    raise KeyError(f"the Procfile has no {name!r} line (it has: {', '.join(procfile_names())})")


def procfile_names() -> list[str]:
    return [line.partition(":")[0].strip() for line in PROCFILE.read_text().splitlines() if ":" in line]


def expand(command: str, env: dict[str, str]) -> list[str]:
    """The command's words with ``${NAME:-default}``, ``${NAME:+alternative}``, ``${NAME}`` and ``$NAME`` taken
    from ``env``, as the shell that runs the Procfile would (unquoted: a value splits into words)."""
    return shlex.split(_substitute(command, env))


def _substitute(text: str, env: dict[str, str]) -> str:
    def value(match: re.Match) -> str:
        name, form, word = match.group(1) or match.group(4), match.group(2), match.group(3) or ""
        current = env.get(name, "")
        if form == ":-":
            return current or _substitute(word, env)
        if form == ":+":
            return _substitute(word, env) if current else ""
        return current

    return re.sub(r"\$\{(\w+)(?:(:[-+])([^}]*))?\}|\$(\w+)", value, text)


def process_env(**services: str) -> dict[str, str]:
    """This process's environment less the service settings, plus ``services``, with this interpreter's folder
    first on PATH (where the Procfile's ``celery`` and ``gunicorn`` are)."""
    env = {k: v for k, v in os.environ.items() if k not in SERVICE_VARIABLES and k != "DJANGO_SETTINGS_MODULE"}
    env.update(services)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def worker_start(
    env: dict[str, str], *, node: str = "", log_path: Path, timeout: float = 120, line: str = "worker"
) -> subprocess.Popen:
    """The Procfile's worker (or the worker of its ``line``: ``demo``), under the node name ``node@<host>`` when
    given."""
    words = expand(procfile_line(line), env) + (["--hostname", f"{node}@%h"] if node else [])
    proc = _start(words, env, log_path)
    _wait(lambda: b" ready." in log_path.read_bytes(), proc, log_path, timeout, "the worker")
    return proc


def web_start(env: dict[str, str], *, log_path: Path, timeout: float = 120) -> subprocess.Popen:
    """The Procfile's web server, on ``BENCH_HOST``:``BENCH_PORT`` of ``env``; returns once it answers."""
    url = f"http://{env.get('BENCH_HOST', '127.0.0.1')}:{env.get('BENCH_PORT', '8000')}/"
    proc = _start(expand(procfile_line("web"), env), env, log_path)

    def answers() -> bool:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                return response.status < 500
        except OSError:
            return False

    _wait(answers, proc, log_path, timeout, "the web server")
    return proc


def process_stop(proc: subprocess.Popen, *, grace: float = 20) -> None:
    """SIGTERM to the process (a worker hands its runs back), then SIGKILL to its whole process group."""
    if proc.poll() is None:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(grace)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _start(words: list[str], env: dict[str, str], log_path: Path) -> subprocess.Popen:
    log = open(log_path, "wb")  # noqa: SIM115 - handed to the process
    return subprocess.Popen(words, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def _wait(ready, proc: subprocess.Popen, log_path: Path, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready():
            return
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    process_stop(proc)
    raise RuntimeError(f"{what} did not start:\n{log_path.read_text(errors='replace')[-3000:]}")
