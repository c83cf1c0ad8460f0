from django.core.management.base import BaseCommand, CommandError

from runner.execution import run_execute
from runner.execution.validation import task_version_validate_queue
from task_bank.models import Task, TaskVersion


class Command(BaseCommand):
    help = (
        "Validate a task's current version here and now: prepare.py (cached), the baseline agent, eval.py. "
        "Prints the measured baseline, or what failed with the failing script's own error."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("slug")
        parser.add_argument("--force", action="store_true", help="validate again even if it is ready")
        parser.add_argument(
            "--repeats", type=int, default=None, help="baseline runs to measure (default: the task's, 3 unless set)"
        )

    def handle(self, *args, **opts) -> None:
        task = Task.objects.filter(slug=opts["slug"]).select_related("current_version").first()
        if task is None:
            valid = ", ".join(Task.objects.values_list("slug", flat=True))
            raise CommandError(f"unknown task {opts['slug']!r}; valid tasks: {valid or 'none'}")
        version = task.current_version
        if version.status == TaskVersion.Status.READY and opts["force"]:
            TaskVersion.objects.filter(pk=version.pk).update(status=TaskVersion.Status.PENDING)
        if version.status == TaskVersion.Status.VALIDATING:
            raise CommandError(f"{task.slug} v{version.number} is being validated right now")
        if opts["repeats"] is not None and opts["repeats"] < 1:
            raise CommandError(f"--repeats must be at least 1, got {opts['repeats']}")
        for run in task_version_validate_queue(version=version, enqueue=False, repeats=opts["repeats"]):
            run_execute(run.pk, worker="validate_task")
        version.refresh_from_db()
        if version.status != TaskVersion.Status.READY:
            raise CommandError(f"{task.slug} v{version.number} failed validation:\n{version.validation_log}")
        if version.baseline_declared:
            self.stdout.write(f"{task.slug} v{version.number} is ready: {version.validation_summary}")
            return
        values = ", ".join(f"{s:.6g}" for s in version.baseline_scores)
        self.stdout.write(
            f"{task.slug} v{version.number} is ready: baseline {version.metric_name} = {version.baseline_score:.6g} "
            f"({'higher' if version.higher_is_better else 'lower'} is better), the mean of "
            f"{len(version.baseline_scores)} runs ({values}; relative spread {version.baseline_spread:.1%}); the "
            f"starter script ran in {version.baseline_time_s:.1f} s; digest {version.digest[:12]}"
        )
