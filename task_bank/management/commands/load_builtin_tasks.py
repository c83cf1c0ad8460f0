from django.core.management.base import BaseCommand

from task_bank.services import builtin_tasks_load


class Command(BaseCommand):
    help = "Import (or update) the built-in tasks shipped with mlab-bench. Unchanged tasks stay as they are."

    def handle(self, *args, **options) -> None:
        for version, created in builtin_tasks_load():
            state = "new version" if created else "unchanged"
            self.stdout.write(f"{version.task.slug}: v{version.number} ({state}, {version.get_status_display()})")
