from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from task_bank.models import Task
from task_bank.services import task_export


class Command(BaseCommand):
    help = "Write a task's current version as a zip that import_task reads back."

    def add_arguments(self, parser) -> None:
        parser.add_argument("slug")
        parser.add_argument("out", help="output .zip")
        parser.add_argument("--task-version", type=int, help="version number (default: the current one)")

    def handle(self, *args, **opts) -> None:
        task = Task.objects.filter(slug=opts["slug"]).select_related("current_version").first()
        if task is None:
            valid = ", ".join(Task.objects.values_list("slug", flat=True))
            raise CommandError(f"unknown task {opts['slug']!r}; valid tasks: {valid or 'none'}")
        version = (
            task.versions.filter(number=opts["task_version"]).first() if opts["task_version"] else task.current_version
        )
        if version is None:
            raise CommandError(f"task {task.slug} has no version {opts['task_version']}")
        try:
            count = task_export(version=version, out=Path(opts["out"]))
        except OSError as exc:
            raise CommandError(f"cannot write {opts['out']}: {exc.strerror}") from exc
        self.stdout.write(f"wrote {opts['out']}: {task.slug} v{version.number}, {count} files")
