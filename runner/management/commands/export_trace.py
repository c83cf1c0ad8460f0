import json

from django.core.management.base import BaseCommand, CommandError

from runner.models import Run
from runner.selectors import run_detail, run_trace_json


class Command(BaseCommand):
    help = "Write a run's trace in MLAgentBench's trace.json shape."

    def add_arguments(self, parser) -> None:
        parser.add_argument("run", type=int)
        parser.add_argument("out", help="output file, or - for standard output")

    def handle(self, *args, **opts) -> None:
        try:
            run = run_detail(viewer=None, pk=opts["run"])  # an operator: every run
        except Run.DoesNotExist:
            raise CommandError(f"no run {opts['run']}") from None
        text = json.dumps(run_trace_json(run=run), indent=2)
        if opts["out"] == "-":
            self.stdout.write(text)
        else:
            try:
                with open(opts["out"], "w") as fh:
                    fh.write(text)
            except OSError as exc:
                raise CommandError(f"cannot write {opts['out']}: {exc.strerror}") from exc
            self.stdout.write(f"wrote {opts['out']}")
