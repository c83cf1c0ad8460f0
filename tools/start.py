"""`make run`'s processes, started from the Procfile, each writing to a log file of its own.

    python tools/start.py PROCFILE LOG-DIR NAME... [--terminal NAME]

The terminal gets only what the `--terminal` process says (bench_ready: where the site is). Every other process
writes to LOG-DIR/<name>.log. When one of them stops on its own, its last log lines are shown and the others are
stopped. Ctrl-C (or SIGTERM) stops them all. Each runs in a process group of its own (as honcho ran them): it gets
SIGTERM, which a Celery worker takes as a warm shutdown (its run handed back to the queue, its pool stopped by
itself); once it has ended, what is left of its group (a shell's children) gets SIGTERM too; and whatever is still
there after STOP_WAIT_S seconds gets SIGKILL. The Procfile's lines `exec` their program, so the first SIGTERM
reaches the program alone: a shell in between would die of it and leave the group's SIGTERM to hit a Celery
worker's pool processes mid-shutdown, where one killed holding the pool's queue lock hangs the worker.
Only the standard library.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections import deque
from pathlib import Path

STOP_WAIT_S = 30
TAIL_LINES = 20


def procfile_read(path: Path) -> dict[str, str]:
    """The Procfile's processes: name -> shell command."""
    processes = {}
    for line in path.read_text().splitlines():
        name, sep, command = line.partition(":")
        if sep and name.strip() and not name.lstrip().startswith("#"):
            processes[name.strip()] = command.strip()
    return processes


def group_signal(process: subprocess.Popen, signum: int) -> None:
    """Signal the process's group: the process and whatever it started (a shell's command, a server's workers)."""
    with contextlib.suppress(ProcessLookupError):  # the whole group has ended
        os.killpg(process.pid, signum)


def group_alive(process: subprocess.Popen) -> bool:
    """Whether the process, or anything it started, still runs (its group has a member)."""
    if process.poll() is None:
        return True
    try:
        os.killpg(process.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # a member that changed its user (a sandbox): still there
        return True
    return True


def log_tail(path: Path) -> str:
    with open(path, errors="replace") as fh:
        return "".join(deque(fh, maxlen=TAIL_LINES))


class Stack:
    def __init__(self, commands: dict[str, str], log_dir: Path, terminal: str) -> None:
        self.commands, self.log_dir, self.terminal = commands, log_dir, terminal
        self.processes: dict[str, subprocess.Popen] = {}
        self.stopping = False

    def log_path(self, name: str) -> Path:
        return self.log_dir / f"{name}.log"

    def start(self) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        for name, command in self.commands.items():
            if name == self.terminal:
                out = None  # the terminal's
            else:
                out = open(self.log_path(name), "a")  # noqa: SIM115 (the child keeps it)
                out.write(f"\n--- {time.strftime('%Y-%m-%d %H:%M:%S')} started: {command}\n")
                out.flush()
            self.processes[name] = subprocess.Popen(
                ["/bin/sh", "-c", command],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            if out is not None:
                out.close()

    def stop(self, *_signal) -> None:
        self.stopping = True
        for process in self.processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)  # the process stops its own children (a worker's pool)

    def wait(self) -> int:
        """Until every process has ended; the exit code is 0 after Ctrl-C, else the first stopped one's."""
        code = 0
        while any(group_alive(p) for p in self.processes.values()):
            if self.stopping:
                self.reap(time.monotonic() + STOP_WAIT_S)
                break
            for name, process in self.processes.items():
                if process.poll() is not None and not self.stopping:
                    code = process.returncode or 1
                    self.say_stopped(name, process.returncode)
                    self.stop()
            time.sleep(0.2)
        return code

    def reap(self, deadline: float) -> None:
        told: set[int] = set()
        while time.monotonic() < deadline and any(group_alive(p) for p in self.processes.values()):
            for process in self.processes.values():
                if process.poll() is not None and process.pid not in told and group_alive(process):
                    told.add(process.pid)
                    group_signal(process, signal.SIGTERM)  # it ended and left children behind
            time.sleep(0.2)
        for name, process in self.processes.items():
            if group_alive(process):
                sys.stderr.write(f"{name} did not stop within {STOP_WAIT_S} s: killed\n")
                group_signal(process, signal.SIGKILL)
            process.wait()

    def say_stopped(self, name: str, code: int) -> None:
        sys.stderr.write(f"\n{name} stopped (exit code {code}), so everything stops.\n")
        if name != self.terminal:
            path = self.log_path(name)
            sys.stderr.write(f"The last lines of {path}:\n{log_tail(path)}\n")
        sys.stderr.flush()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("procfile", type=Path)
    parser.add_argument("log_dir", type=Path)
    parser.add_argument("names", nargs="+")
    parser.add_argument("--terminal", default="", help="the process that speaks to the terminal")
    args = parser.parse_args(argv)
    known = procfile_read(args.procfile)
    missing = [name for name in args.names if name not in known]
    if missing:
        parser.error(f"not in {args.procfile}: {', '.join(missing)} (it has {', '.join(known)})")
    stack = Stack({name: known[name] for name in args.names}, args.log_dir, args.terminal)
    signal.signal(signal.SIGINT, stack.stop)
    signal.signal(signal.SIGTERM, stack.stop)
    stack.start()
    return stack.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
