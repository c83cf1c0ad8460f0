"""The first start's demo (``bench_init`` on a site with no runs): each built-in task validated, and a real agent run
on the quick ones, so that a new site's leaderboard has verified rows within minutes.

Its runs go to the demo's queue (``Run.Queue.DEMO``), served by a worker of its own (the Procfile's ``demo``
process), so a run a person asks for never waits behind them. They are queued in the order they should run: the
tasks by their time limit (shortest first: a task's author sets it by how long its work takes), each quick task's
validation round followed by one run of the tuner (an agent that needs no model) on it, then the slow tasks'
rounds."""

from __future__ import annotations

from task_bank.models import Task

from .agents.builtin import agents_builtin_ensure
from .execution.validation import task_version_validate_queue
from .models import Run, RunSpec
from .services import RunRequestError, batch_create

#: A task whose runs may take at most this long is quick: the demo runs the tuner on it right after its round.
QUICK_TASK_S = 3600


def demo_queue() -> list[Run]:
    """Queue the demo's runs on its queue, in the order they should run; [] when a task of it has runs already."""
    tasks = Task.objects.filter(source=Task.Source.BUILTIN, current_version__isnull=False)
    tasks = sorted(tasks.select_related("current_version"), key=lambda t: (t.current_version.max_time_s, t.slug))
    tuner = next(agent for agent in agents_builtin_ensure() if agent.name == "tuner")
    runs: list[Run] = []
    for task in tasks:
        version = task.current_version
        runs += task_version_validate_queue(version=version, demo=True)
        if version.max_time_s <= QUICK_TASK_S and not version.serve_script:
            try:
                runs += batch_create(
                    spec=RunSpec(tuner), tasks=[task], note="demo: the tuner on a quick task", demo=True
                )[1]
            except RunRequestError:  # a task the tuner cannot take (retired by an admin before the first start)
                continue
    return runs
