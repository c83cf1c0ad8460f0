"""`make run`'s two helpers: pip's progress in one line with its log kept, and the processes started from a
Procfile, each with its own log, stopped together."""

import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def tool(*args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False, **kwargs
    )


def test_a_failed_install_shows_pips_last_lines_keeps_its_log_and_exits_with_its_code(tmp_path):
    log = tmp_path / "install.log"
    args = ["--no-index", "--find-links", str(tmp_path), "no-such-pkg-x"]
    done = tool("tools/install_progress.py", str(log), "no-such-pkg-x", *args)

    assert done.returncode == 1
    assert "installing no-such-pkg-x: failed in" in done.stdout
    assert "No matching distribution found for no-such-pkg-x" in done.stdout  # pip's own words, from the tail
    assert f"its whole output is in {log}" in done.stdout
    assert "No matching distribution" in log.read_text()


def test_an_install_says_one_line_per_stage_off_a_terminal(tmp_path):
    project, wheels = tmp_path / "project", tmp_path / "wheels"
    (project / "tiny_thing").mkdir(parents=True)
    (project / "tiny_thing" / "__init__.py").write_text("")
    (project / "pyproject.toml").write_text('[project]\nname = "tiny-thing"\nversion = "1.0"\n')
    build = ["wheel", "--no-deps", "--no-index", "--no-build-isolation", "-w", str(wheels), str(project)]
    subprocess.run([sys.executable, "-m", "pip", *build], check=True, capture_output=True, timeout=120)
    target = tmp_path / "target"
    args = ["--no-index", "--find-links", str(wheels), "--target", str(target), "--no-deps"]
    args += [str(wheel) for wheel in wheels.iterdir()]
    done = tool("tools/install_progress.py", str(tmp_path / "install.log"), "the example", *args)

    assert done.returncode == 0, done.stdout
    lines = done.stdout.splitlines()
    assert [line.split(": ")[1].split(" in ")[0] for line in lines] == ["installing", "done"], lines
    assert "Successfully installed" in (tmp_path / "install.log").read_text()
    again = tool("tools/install_progress.py", str(tmp_path / "install.log"), "the example", *args)
    kept = (tmp_path / "install.log").read_text()
    assert again.returncode == 0 and kept.count(f"{sys.executable} -m pip install") == 2  # both calls kept


def test_a_process_that_stops_stops_the_rest_and_its_last_log_lines_are_shown(tmp_path):
    procfile = tmp_path / "Procfile"
    marker = tmp_path / "still-running"
    procfile.write_text(
        f"ready: echo the site is up; exec sleep 60\n"
        f"broken: echo port 8000 is taken; sleep 1; exit 3\n"
        f"long: trap 'touch {marker}.stopped; exit 0' TERM; touch {marker}; while true; do sleep 0.1; done\n"
    )
    names = ["ready", "broken", "long", "--terminal", "ready"]
    done = tool("tools/start.py", str(procfile), str(tmp_path / "log"), *names)

    assert done.returncode == 3
    assert done.stdout.strip() == "the site is up"  # the terminal process speaks; the others write to their logs
    assert "broken stopped (exit code 3)" in done.stderr and "port 8000 is taken" in done.stderr
    assert Path(f"{marker}.stopped").exists()  # the others were asked to stop, not left behind
    assert (tmp_path / "log" / "broken.log").read_text().rstrip().endswith("port 8000 is taken")


def test_sigterm_to_it_alone_stops_every_process_and_what_each_started(tmp_path):
    # Not Ctrl-C in a terminal, which signals every process at once: one signal to the starter, as a service
    # manager sends it. A shell that runs a command without exec leaves its child behind unless the group goes.
    procfile = tmp_path / "Procfile"
    pids = tmp_path / "pids"
    procfile.write_text(f"web: sleep 300 & echo $! >> {pids}; wait\nworker: sleep 300 & echo $! >> {pids}; wait\n")
    starter = subprocess.Popen(
        [sys.executable, "tools/start.py", str(procfile), str(tmp_path / "log"), "web", "worker"], cwd=ROOT
    )
    deadline = time.monotonic() + 30
    while (not pids.exists() or len(pids.read_text().split()) < 2) and time.monotonic() < deadline:
        time.sleep(0.1)
    started = [int(pid) for pid in pids.read_text().split()]
    starter.send_signal(signal.SIGTERM)
    assert starter.wait(timeout=60) == 0
    time.sleep(0.5)
    assert [pid for pid in started if Path(f"/proc/{pid}").exists()] == []  # no sleep left behind


def test_a_name_the_procfile_lacks_is_refused_naming_what_it_has(tmp_path):
    procfile = tmp_path / "Procfile"
    procfile.write_text("web: sleep 1\n")
    done = tool("tools/start.py", str(procfile), str(tmp_path / "log"), "web", "wrker")

    assert done.returncode == 2 and "not in" in done.stderr and "wrker" in done.stderr and "it has web" in done.stderr


def test_every_line_of_the_projects_procfile_execs_its_program():
    # Stopping sends SIGTERM to the line's process. Were it a shell, the shell would die of it, and the group's
    # SIGTERM that follows would kill a Celery worker's pool processes during its warm shutdown: one killed holding
    # the pool's queue lock hangs the worker until SIGKILL.
    lines = [line.partition(":")[2].strip() for line in (ROOT / "Procfile").read_text().splitlines() if ":" in line]
    assert lines and all(line.startswith("exec ") for line in lines), lines
