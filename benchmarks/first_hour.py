"""The first hour as a newcomer meets it: a fresh clone of this checkout, `make run`, and the clock.

    python benchmarks/first_hour.py [--port 8123] [--give-up-min 45]

Clones the checkout's committed HEAD into a scratch folder, runs `make run` there (its own virtualenv, SQLite and
filesystem broker, as the README says) in a session of its own, and prints, in minutes from the start: when the
site first answers, when the first tuner run of the demo has finished (the leaderboard's first counted row), and
when every demo run has ended. Then it stops the stack with Ctrl-C (SIGINT to its group) and says how long that took.
The runs are read from the clone's var/bench.sqlite3, read-only. Needs only the standard library.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sqlite3
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIVE = ("queued", "running", "evaluating")


def runs(db: Path) -> list[tuple[str, str]]:
    """(purpose, status) of every run, or [] while the database is not there yet."""
    if not db.exists():
        return []
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
            return conn.execute("SELECT purpose, status FROM runner_run").fetchall()
    except sqlite3.Error:  # not migrated yet, or busy
        return []


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5):
            return True
    except OSError:
        return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=8123)
    parser.add_argument("--give-up-min", type=float, default=45)
    args = parser.parse_args()
    clone = Path(tempfile.mkdtemp(prefix="first-hour-")) / "mlab-bench"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    env = {"PATH": os.environ["PATH"], "HOME": os.environ["HOME"], "LANG": "C.UTF-8", "BENCH_PORT": str(args.port)}
    log = open(clone.parent / "make-run.log", "wb")  # noqa: SIM115 (the stack writes to it until the end)
    started = time.monotonic()
    stack = subprocess.Popen(["make", "run"], cwd=clone, env=env, stdout=log, stderr=subprocess.STDOUT,
                             start_new_session=True)  # fmt: skip

    def say(what: str) -> None:
        print(f"{(time.monotonic() - started) / 60:6.2f} min  {what}", flush=True)

    seen: set[str] = set()
    finished = False
    try:
        while time.monotonic() - started < args.give_up_min * 60:
            time.sleep(5)
            if stack.poll() is not None:
                say(f"make run ended by itself (exit {stack.returncode}); see {clone.parent / 'make-run.log'}")
                return
            if "site" not in seen and answers(f"http://127.0.0.1:{args.port}/"):
                seen.add("site")
                say("the site answers")
            found = runs(clone / "var" / "bench.sqlite3")
            if "row" not in seen and ("benchmark", "finished") in found:
                seen.add("row")
                say("the first counted row (a demo tuner run finished)")
            if found and not any(status in LIVE for _, status in found):
                say(f"the demo done: {len(found)} runs, {sorted({status for _, status in found})}")
                finished = True
                break
        else:
            say(f"gave up after {args.give_up_min} min")
    finally:
        stopping = time.monotonic()
        os.killpg(stack.pid, signal.SIGINT)  # Ctrl-C in its terminal
        stack.wait(timeout=120)
        print(f"Ctrl-C stopped the stack in {time.monotonic() - stopping:.1f} s", flush=True)
        log.close()
        if finished:
            shutil.rmtree(clone.parent, ignore_errors=True)
        else:
            print(f"the clone and its log are kept in {clone.parent}")


if __name__ == "__main__":
    main()
