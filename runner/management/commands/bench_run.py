import argparse
import json
import time
from decimal import Decimal

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.urls import reverse

from runner.agents.builtin import agents_builtin_ensure
from runner.execution import run_execute
from runner.jobs import QueueUnreachable
from runner.models import Agent, Run, RunLimits, RunSpec
from runner.selectors import with_queue_position
from runner.services import RunRequestError, agent_resolve, batch_create
from task_bank.models import Task


def run_line(run: Run, *, final: bool = False) -> dict:
    line = {"run": run.pk, "task": run.task.slug, "agent": run.agent.name, "status": run.status, "page": run_page(run)}
    if final:
        line.update(
            final_score=run.final_score,
            improvement=run.improvement,
            succeeded=run.succeeded,
            steps=run.steps_count,
        )
        if run.error:
            line["error"] = run.error
        if run.eval_error and run.final_score is None:
            line["eval_error"] = run.eval_error[-500:]
    return line


def run_page(run: Run) -> str:
    """The run's page, on the site's address when the deployment names it (``BENCH_SITE_URL``)."""
    return settings.BENCH_SITE_URL.rstrip("/") + reverse("runner:run_detail", args=[run.pk])


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


class Command(BaseCommand):
    help = "Queue runs of an agent on tasks (one per task x repeat) and print one JSON line per run."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--agent", required=True, help="agent name (latest version) or name@version")
        parser.add_argument("--task", action="append", required=True, dest="tasks", help="task slug; repeatable")
        parser.add_argument("--repeats", type=int, default=1)
        parser.add_argument("--model", default="", help="model name for agents that use an LLM")
        parser.add_argument("--fast-model", default="", help="model of the quick LLM-backed actions (default: --model)")
        parser.add_argument("--edit-model", default="", help="model of Edit Script (AI) (default: the fast model)")
        parser.add_argument("--max-steps", type=int, default=None)
        parser.add_argument("--max-time", type=int, default=None, help="seconds")
        parser.add_argument("--max-tokens", type=int, default=None, help="token budget of each run")
        parser.add_argument("--max-cost", type=Decimal, default=None, help="cost budget of each run")
        parser.add_argument("--wait", action="store_true", help="wait for the runs to end and print results")
        parser.add_argument("--inline", action="store_true", help="execute the runs in this process (no worker needed)")
        parser.add_argument(
            "--timeout", type=positive_seconds, default=None, help="with --wait: give up after this many seconds"
        )

    def resolve_agent(self, spec: str) -> Agent:
        agents_builtin_ensure()
        try:
            return agent_resolve(spec)
        except RunRequestError as exc:
            raise CommandError(str(exc)) from exc

    def resolve_tasks(self, slugs: list[str]) -> list[Task]:
        tasks = {t.slug: t for t in Task.objects.select_related("current_version").filter(slug__in=slugs)}
        unknown = [s for s in slugs if s not in tasks]
        if unknown:
            valid = sorted(Task.objects.values_list("slug", flat=True))
            hint = "" if valid else " (no tasks loaded: run python manage.py load_builtin_tasks)"
            raise CommandError(
                f"unknown task {', '.join(map(repr, unknown))}; valid tasks: {', '.join(valid) or 'none'}{hint}"
            )
        return [tasks[s] for s in slugs]

    def handle(self, *args, **opts) -> None:
        agent = self.resolve_agent(opts["agent"])
        tasks = self.resolve_tasks(opts["tasks"])
        try:
            limits = RunLimits(
                max_steps=opts["max_steps"],
                max_time_s=opts["max_time"],
                max_tokens=opts["max_tokens"],
                max_cost=opts["max_cost"],
            )
            spec = RunSpec(agent, opts["model"], opts["fast_model"], opts["edit_model"], limits)
            _, runs = batch_create(spec=spec, tasks=tasks, repeats=opts["repeats"], enqueue=not opts["inline"])
        except RunRequestError as exc:
            raise CommandError(str(exc)) from exc
        except QueueUnreachable as exc:
            raise CommandError(str(exc)) from exc
        for run in runs:
            self.emit(run_line(run))
        if opts["inline"]:
            for run in runs:
                run_execute(run.pk, worker="inline")
        if not (opts["wait"] or opts["inline"]):
            return
        pending = {run.pk for run in runs}
        try:
            self.wait(pending, timeout=opts["timeout"])
        except KeyboardInterrupt:
            pages = ", ".join(run_page(run) for run in runs if run.pk in pending)
            self.stderr.write(f"stopped waiting; the runs go on without you: {pages}")
            raise SystemExit(130) from None

    def wait(self, pending: set[int], *, timeout: float | None) -> None:
        """Until every run in ``pending`` ended: its final line on stdout, its progress on stderr."""
        deadline = time.monotonic() + timeout if timeout else None
        said: dict[int, str] = {}
        while pending:
            now = with_queue_position(Run.objects.select_related("task", "agent").filter(pk__in=pending))
            for run in now.order_by("pk"):
                if run.has_ended:
                    self.emit(run_line(run, final=True))
                    pending.discard(run.pk)
                elif (words := self.progress(run)) != said.get(run.pk):
                    self.stderr.write(words)  # what a person watches; stdout keeps one JSON line per run
                    said[run.pk] = words
            if pending:
                if deadline and time.monotonic() > deadline:
                    raise CommandError(f"gave up waiting for runs {sorted(pending)}")
                time.sleep(0.5)

    @staticmethod
    def progress(run: Run) -> str:
        """Where a live run is, in the words its page uses (``Run.live_line``)."""
        line = run.live_line
        return f"run {run.pk} ({run.agent.name} on {run.task.slug}): {line['label']}, {line['text']}"

    def emit(self, line: dict) -> None:
        self.stdout.write(json.dumps(line))
        self.stdout.flush()
