import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from runner.logs.exports import trace_export
from runner.models import Run
from runner.selectors import run_detail, run_trace_json


class Command(BaseCommand):
    help = (
        "Write a run as an MLAgentBench log zip (env_log/trace.json, env_log/traces/step_N_files/, "
        "step_final_files/, overall_time.txt, and mlab_bench.json with the score, agent, model, status and usage); "
        "to a name ending in .json, or - for standard output, only trace.json."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("run", type=int)
        parser.add_argument("out", help="output zip; a .json file or - for trace.json alone")

    def handle(self, *args, **opts) -> None:
        try:
            run = run_detail(viewer=None, pk=opts["run"])  # an operator: every run
        except Run.DoesNotExist:
            raise CommandError(f"no run {opts['run']}") from None
        out = opts["out"]
        if out == "-":
            self.stdout.write(json.dumps(run_trace_json(run=run), indent=2))
            return
        try:
            if out.endswith(".json"):
                with open(out, "w") as fh:
                    fh.write(json.dumps(run_trace_json(run=run), indent=2))
                self.stdout.write(f"wrote {out}")
                return
            steps = trace_export(run=run, out=Path(out))
        except OSError as exc:
            raise CommandError(f"cannot write {out}: {exc.strerror}") from exc
        self.stdout.write(f"wrote {out}: an MLAgentBench log of run {run.pk} ({steps} steps)")
