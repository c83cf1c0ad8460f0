"""The first start's demo (``bench_init`` on a site with no runs): the quick built-in tasks validated, and a real agent
run on them, so that a new site's leaderboard has verified rows within minutes.

Its runs go to the demo's queue (``Run.Queue.DEMO``), served by a worker of its own (the Procfile's ``demo``
process, two runs at a time: ``BENCH_DEMO_CONCURRENCY``), so a run a person asks for never waits behind them.
They are queued in the order they should run: every quick task's validation round first, the tasks by their time
limit (shortest first: a task's author sets it by how long its work takes), so that no task waits behind an agent's
run to become ready; then one run of the tuner (an agent that needs no model) on each of them that it can take, in
the same order, each within ``DEMO_TUNER_TIME_S`` (the tuner stops its search and submits its best in time), so that
a slow task's search cannot hold the demo for long.

A slow task (a time limit over ``QUICK_TASK_S``) is left out: its validation alone can take longer than the whole
demo (SmolLM's three baseline runs take 12 minutes of a 2-core machine). It is validated before the first run a
person asks of it, as any version nobody has validated is, or when staff ask; its page says so."""

from __future__ import annotations

from task_bank.models import Task

from .agents.builtin import agents_builtin_ensure
from .execution.validation import task_version_validate_queue
from .models import Run, RunLimits, RunSpec
from .services import RunRequestError, batch_create

#: A task whose runs may take at most this long is quick: the demo validates it and runs the tuner on it.
QUICK_TASK_S = 3600
#: The time each of the demo's tuner runs has (its task's limit when that is shorter).
DEMO_TUNER_TIME_S = 150


def demo_queue() -> list[Run]:
    """Queue the demo's runs on its queue, in the order they should run; [] when a task of it has runs already."""
    tasks = Task.objects.filter(source=Task.Source.BUILTIN, current_version__isnull=False)
    tasks = tasks.filter(current_version__max_time_s__lte=QUICK_TASK_S).select_related("current_version")
    tasks = sorted(tasks, key=lambda t: (t.current_version.max_time_s, t.slug))
    tuner = next(agent for agent in agents_builtin_ensure() if agent.name == "tuner")
    runs: list[Run] = []
    for task in tasks:
        runs += task_version_validate_queue(version=task.current_version, demo=True)
    for task in tasks:
        version = task.current_version
        if version.serve_script:  # the tuner searches a model's settings; a served task asks for faster code
            continue
        limits = RunLimits(max_time_s=min(version.max_time_s, DEMO_TUNER_TIME_S))
        try:
            runs += batch_create(
                spec=RunSpec(tuner, limits=limits), tasks=[task], note="demo: the tuner on a quick task", demo=True
            )[1]
        except RunRequestError:  # a task the tuner cannot take (retired by an admin before the first start)
            continue
    return runs
