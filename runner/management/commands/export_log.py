import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from runner.logs.exports import log_export
from runner.logs.inspect_export import inspect_log_filename, inspect_log_name, inspect_log_write
from runner.models import Run
from runner.selectors import run_detail, run_trace_json, runs_visible_to


class Command(BaseCommand):
    help = (
        "Write a run as an MLAgentBench log zip (env_log/trace.json, env_log/traces/step_N_files/, "
        "step_final_files/, overall_time.txt, and mlab_bench.json with the score, agent, model, status and usage); "
        "to a name ending in .json, or - for standard output, only trace.json. With --format inspect, an Inspect AI "
        "eval log (.json) that `inspect view` opens: the run, or with --batch every run of the batch, one sample each; "
        "to a folder, under the name Inspect gives its logs (inspect view lists no other)."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("run", type=int, help="the run's id (with --batch, the batch's)")
        parser.add_argument("out", help="output zip; a .json file or - for trace.json alone (or the Inspect log)")
        parser.add_argument(
            "--format",
            choices=("mlagentbench", "inspect"),
            default="mlagentbench",
            help="mlagentbench (default): MLAgentBench's log; inspect: an Inspect AI eval log",
        )
        parser.add_argument("--batch", action="store_true", help="the id is a batch's (--format inspect only)")

    def handle(self, *args, **opts) -> None:
        if opts["format"] == "inspect":
            self._inspect(opts)
            return
        if opts["batch"]:
            raise CommandError("--batch exports an Inspect AI log: add --format inspect")
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
            steps = log_export(run=run, out=Path(out))
        except OSError as exc:
            raise CommandError(f"cannot write {out}: {exc.strerror}") from exc
        self.stdout.write(f"wrote {out}: an MLAgentBench log of run {run.pk} ({steps} steps)")

    def _inspect(self, opts: dict) -> None:
        pk, out = opts["run"], opts["out"]
        runs = runs_visible_to(None).filter(**({"batch_id": pk} if opts["batch"] else {"pk": pk}))
        if not runs.exists():
            raise CommandError(f"no runs in batch {pk}" if opts["batch"] else f"no run {pk}")
        batch = pk if opts["batch"] else None
        name = inspect_log_name(run=None if batch else runs.get(), batch=batch)
        if out == "-":
            inspect_log_write(runs=runs, out=self.stdout, name=name, batch=batch)
            return
        if Path(out).is_dir():
            out = str(Path(out) / inspect_log_filename(runs=runs, name=name))
        try:
            with open(out, "w", encoding="utf-8") as fh:
                samples = inspect_log_write(runs=runs, out=fh, name=name, batch=batch)
        except OSError as exc:
            raise CommandError(f"cannot write {out}: {exc.strerror}") from exc
        self.stdout.write(f"wrote {out}: an Inspect AI eval log of {samples} run(s) ({name})")
