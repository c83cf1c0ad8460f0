from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from runner.agents.packages import AgentPackageError, agent_import
from runner.agents.smoke import agent_smoke_run
from runner.models import Agent


class Command(BaseCommand):
    help = "Import an agent package (a folder or zip with agent.toml and code using mlab_agents.sdk)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("path")
        parser.add_argument("--owner", metavar="USERNAME", help="the user the agent belongs to")
        parser.add_argument(
            "--private",
            action="store_true",
            help="show the agent, its runs and steps only to its owner and staff (default: to everyone)",
        )
        parser.add_argument(
            "--smoke-test",
            action="store_true",
            help="smoke-test the agent in the sandbox, as a worker tests an upload, here and now: no run of it is "
            "queued unless it answers its first message within BENCH_AGENT_SMOKE_TIMEOUT_S",
        )

    def handle(self, *args, **opts) -> None:
        owner = None
        if opts["owner"]:
            User = get_user_model()
            owner = User.objects.filter(**{User.USERNAME_FIELD: opts["owner"]}).first()
            if owner is None:
                raise CommandError(
                    f"no user named {opts['owner']!r}: --owner takes the username of an existing account "
                    "(create one with createsuperuser or in the admin)"
                )
        visibility = Agent.Visibility.PRIVATE if opts["private"] else Agent.Visibility.PUBLIC
        try:
            agent, created = agent_import(
                source=Path(opts["path"]), owner=owner, visibility=visibility, smoke_test=opts["smoke_test"]
            )
        except AgentPackageError as exc:
            raise CommandError(f"cannot import {opts['path']}: {exc}") from exc
        if agent.smoke_state == Agent.Smoke.PENDING:
            agent_smoke_run(agent.pk)
            agent.refresh_from_db()
            if agent.smoke_state == Agent.Smoke.FAILED:
                raise CommandError(f"{agent} is stored but failed its smoke test: {agent.smoke_error}")
        if created:
            owned = f"owned by {agent.owner}" if agent.owner else "no owner"
            state = f"imported ({agent.get_visibility_display().lower()}, {owned})"
        else:
            state = "unchanged (same files)"
        self.stdout.write(f"{agent.name}@{agent.version}: {state}; entrypoint {agent.entrypoint}")
        if (
            not created
            and (opts["owner"] or opts["private"])
            and (agent.owner, agent.visibility) != (owner, visibility)
        ):
            self.stdout.write("its owner and visibility stay as they were: change them in the admin")
