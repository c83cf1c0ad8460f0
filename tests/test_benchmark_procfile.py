"""benchmarks/procfile.py: the benchmarks start the platform's processes from the Procfile's own lines."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("bench_procfile", ROOT / "benchmarks" / "procfile.py")
procfile = importlib.util.module_from_spec(spec)
spec.loader.exec_module(procfile)


def test_variables_are_expanded_as_the_shell_would():
    command = "celery worker --queues ${CELERY_QUEUE:-bench} --schedule ${VAR:-var}/beat --x $NAME --y ${NAME}"
    words = procfile.expand(command, {"CELERY_QUEUE": "runs,short", "NAME": "n"})
    assert words == ["celery", "worker", "--queues", "runs,short", "--schedule", "var/beat", "--x", "n", "--y", "n"]
    assert procfile.expand("--queues ${CELERY_QUEUE:-bench}", {"CELERY_QUEUE": ""}) == ["--queues", "bench"]
    # An option given only when its variable is set, the variable's value inside it.
    optional = "worker ${QUEUES:+--queues $QUEUES} --x ${OTHER:-$QUEUES}"
    words = ["worker", "--queues", "runs,short", "--x", "runs,short"]
    assert procfile.expand(optional, {"QUEUES": "runs,short"}) == words
    assert procfile.expand(optional, {"OTHER": "o"}) == ["worker", "--x", "o"]


def test_the_procfiles_worker_line_is_what_a_benchmark_worker_runs():
    words = procfile.expand(procfile.procfile_line("worker"), {"CELERY_QUEUE": "bench-q", "BENCH_VAR_DIR": "/v"})
    assert words[:5] == ["celery", "-A", "bench", "-q", "worker"]  # -q: no start-up banner
    assert not any("$" in word for word in words), words  # every variable filled in
    assert not {"--beat", "-B"} & set(words)  # no scheduler: every worker offers the periodic passes


def test_a_line_the_procfile_lacks_is_named_with_the_lines_it_has():
    with pytest.raises(KeyError, match=r"no 'nosuch' line \(it has: web, worker"):
        procfile.procfile_line("nosuch")
