from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from task_bank.package import TaskPackageError
from task_bank.services import task_import_source


class Command(BaseCommand):
    help = (
        "Import a task package (an MLAgentBench task folder, or a zip of one). Options override or complete its "
        "task.toml. The same files as an existing version make no new version."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("path", help="task folder or .zip")
        parser.add_argument("--slug", help="task slug (default: from the folder or zip name)")
        parser.add_argument("--metric", help="metric name")
        direction = parser.add_mutually_exclusive_group()
        direction.add_argument("--higher-is-better", dest="hib", action="store_true", default=None)
        direction.add_argument("--lower-is-better", dest="hib", action="store_false")

    def handle(self, *args, **opts) -> None:
        try:
            version, created = task_import_source(
                source=Path(opts["path"]), slug=opts["slug"], metric_name=opts["metric"], higher_is_better=opts["hib"]
            )
        except TaskPackageError as exc:
            raise CommandError(f"cannot import {opts['path']}: {exc}") from exc
        state = "imported as a new version" if created else "unchanged (same files as this version)"
        self.stdout.write(
            f"{version.task.slug} v{version.number}: {state}; digest {version.digest[:12]}; "
            f"metric {version.metric_name} ({'higher' if version.higher_is_better else 'lower'} is better); "
            f"status {version.get_status_display()}"
        )
