from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from runner.logs.imports import LogImportError, inspect_import, log_import
from runner.logs.inspect_read import is_inspect_log


class Command(BaseCommand):
    help = (
        "Import a run made elsewhere from its MLAgentBench log (a folder or zip with env_log/trace.json and "
        "env_log/traces/step_N_files/) as a self-reported run; its final workspace is scored here. An Inspect AI eval "
        "log (a .json file) becomes one self-reported run per sample, not scored: it holds no workspace files."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("path")
        parser.add_argument(
            "--task",
            metavar="SLUG",
            help="the task of the bank the run is of (default: the one "
            "the log names, or whose research problem it has)",
        )
        parser.add_argument(
            "--agent",
            metavar="NAME[@VERSION]",
            help="the agent that made the run (default: the "
            "one the log names, else mlagentbench-log; an agent not here yet is added, with no code)",
        )
        parser.add_argument("--model", help="the model the run used (default: the one the log names, else none)")

    def handle(self, *args, **opts) -> None:
        if is_inspect_log(Path(opts["path"])):
            self._inspect(opts)
            return
        try:
            run = log_import(
                source=Path(opts["path"]), task_slug=opts["task"], agent_name=opts["agent"], model=opts["model"]
            )
        except LogImportError as exc:
            raise CommandError(f"cannot import {opts['path']}: {exc}") from exc
        score = "no score" if run.final_score is None else f"final score {run.final_score:.6g}"
        if run.final_score is None and run.eval_error:
            score += f" ({run.eval_error_summary})"
        self.stdout.write(
            f"run {run.pk}: {run.steps_count} steps of {run.agent} on {run.task.slug} v{run.task_version.number}, "
            f"{run.status}, {score}; self-reported (left out of rankings unless ?origin=all)"
        )

    def _inspect(self, opts: dict) -> None:
        try:
            runs = inspect_import(
                source=Path(opts["path"]), task_slug=opts["task"], agent_name=opts["agent"], model=opts["model"]
            )
        except LogImportError as exc:
            raise CommandError(f"cannot import {opts['path']}: {exc}") from exc
        for run in runs:
            self.stdout.write(
                f"run {run.pk}: {run.steps_count} steps of {run.agent} on {run.task.slug} v{run.task_version.number}, "
                f"{run.status}, not scored (an Inspect log holds no workspace files); self-reported"
            )
