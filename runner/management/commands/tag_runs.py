"""Write the automatic review tags of ended runs again (runs that ended before tags existed, or after a change
to what is tagged): ``manage.py tag_runs [--run ID ...]``."""

from django.core.management.base import BaseCommand

from runner.models import Run
from runner.review import tags_auto


class Command(BaseCommand):
    help = "Write the automatic review tags of ended runs (all of them, or those given) from their traces."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--run", type=int, action="append", default=[], help="a run id (repeatable)")

    def handle(self, *args, **opts) -> None:
        runs = Run.objects.ended()
        if opts["run"]:
            runs = runs.filter(pk__in=opts["run"])
        count = tags = 0
        for run in runs.order_by("pk").iterator():
            tags += len(tags_auto(run))
            count += 1
        self.stdout.write(f"{count} runs tagged: {tags} automatic tags")
