"""`make install`'s pip, quiet: one line of progress instead of pip's hundreds, its whole log kept in a file.

    python tools/install_progress.py LOG WHAT PIP-INSTALL-ARGUMENTS...

Runs ``python -m pip install`` with the arguments (WHAT names what they install) and adds everything pip says
to LOG. It shows how far pip has got: on a terminal one line rewritten in place, elsewhere a line at each stage.
When pip fails, its last lines and the log's path are printed and the exit code is pip's. Only the standard
library: it runs before anything is installed.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections import deque
from pathlib import Path

TAIL_LINES = 30


def stage_of(line: str) -> tuple[str, str] | None:
    """The stage a line of pip's output starts, and the package it names ("" when none), or None."""
    words = line.split()
    if line.startswith("Collecting ") and len(words) > 1:
        return "resolving", words[1]
    if line.startswith(("Building wheel", "Building editable")):
        return "building", words[-1] if len(words) > 3 else ""
    if line.startswith("Installing collected packages"):
        return "installing", ""
    return None


class Progress:
    def __init__(self, out, what: str) -> None:
        self.out, self.what = out, what
        self.tty = out.isatty()
        self.collected = 0
        self.stage = ""
        self.started = time.monotonic()

    def see(self, line: str) -> None:
        found = stage_of(line)
        if found is None:
            return
        stage, package = found
        if stage == "resolving":
            self.collected += 1
        if self.tty:
            detail = f"{self.collected} packages" + (f", {package}" if package else "")
            self.show(f"{self.what}: {stage} ({detail})")
        elif stage != self.stage:
            self.out.write(f"{self.what}: {stage}\n")
            self.out.flush()
        self.stage = stage

    def show(self, text: str) -> None:
        text = f"{text}  {time.monotonic() - self.started:.0f} s"
        self.out.write("\r" + text[:100].ljust(100))
        self.out.flush()

    def end(self, ok: bool) -> None:
        took = f"{time.monotonic() - self.started:.0f} s"
        if self.tty:
            self.out.write("\r" + " " * 100 + "\r")
        self.out.write(f"{self.what}: {'done' if ok else 'failed'} in {took}\n")
        self.out.flush()


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        sys.stderr.write(__doc__)
        return 2
    log, what, args = Path(argv[0]), argv[1], argv[2:]
    log.parent.mkdir(parents=True, exist_ok=True)
    progress = Progress(sys.stdout, f"installing {what}")
    tail: deque[str] = deque(maxlen=TAIL_LINES)
    command = [sys.executable, "-m", "pip", "install", "--progress-bar", "off", *args]
    with open(log, "a") as kept:  # each install of `make install` adds its own output
        kept.write(" ".join(command) + "\n")
        with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as pip:
            for line in pip.stdout:
                kept.write(line)
                tail.append(line)
                progress.see(line)
    progress.end(pip.returncode == 0)
    if pip.returncode:
        sys.stdout.write("".join(tail))
        sys.stdout.write(f"pip failed (exit code {pip.returncode}); its whole output is in {log}\n")
    return pip.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
