"""Reproduce a leaderboard row or a run from the command line, as a staff account (docs/reproductions.md)."""

import json

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from leaderboard.links import entrant_parse
from leaderboard.query import RankingOptions
from leaderboard.reproductions import reproduction_comparison
from leaderboard.services import reproduction_of_row, reproduction_of_run
from runner.jobs import QueueUnreachable
from runner.models import Run
from runner.services import RunRequestError


class Command(BaseCommand):
    help = "Re-run a leaderboard row (agent@version[/model]) or a run with what its runs recorded; print its id."

    def add_arguments(self, parser) -> None:
        which = parser.add_mutually_exclusive_group(required=True)
        which.add_argument("--row", help="agent@version or agent@version/model")
        which.add_argument("--run", type=int, help="a run's id")
        parser.add_argument("--all-versions", action="store_true", help="the row's runs of every task version")
        parser.add_argument("--user", default="", help="a staff account's username (default: the first superuser)")

    def handle(self, *args, **options) -> None:
        users = get_user_model().objects.filter(is_active=True, is_staff=True)
        user = (users.filter(username=options["user"]) if options["user"] else users.filter(is_superuser=True)).first()
        if user is None:
            raise CommandError(f"no active staff account {options['user'] or '(no superuser)'}: name one with --user")
        try:
            if options["run"]:
                run = Run.objects.filter(pk=options["run"]).first()
                if run is None:
                    raise CommandError(f"no run {options['run']}")
                reproduction = reproduction_of_run(by=user, run=run)
            else:
                key = entrant_parse(options["row"])
                ranking = RankingOptions(current_only=not options["all_versions"])
                reproduction = reproduction_of_row(by=user, key=key, options=ranking)
        except (RunRequestError, ValueError, QueueUnreachable) as exc:
            raise CommandError(str(exc)) from None
        comparison = reproduction_comparison(reproduction)
        line = {"reproduction": reproduction.pk, "batch": reproduction.batch_id, "exact": reproduction.exact}
        line |= {
            "differences": reproduction.differences,
            "runs": reproduction.spec["runs"],
            "state": comparison["state"],
        }
        self.stdout.write(json.dumps(line))
