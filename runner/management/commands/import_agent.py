from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from runner.agent_packages import AgentPackageError, agent_import


class Command(BaseCommand):
    help = "Import an agent package (a folder or zip with agent.toml and code using mlab_agents.sdk)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("path")

    def handle(self, *args, **opts) -> None:
        try:
            agent, created = agent_import(source=Path(opts["path"]))
        except AgentPackageError as exc:
            raise CommandError(f"cannot import {opts['path']}: {exc}") from exc
        state = "imported" if created else "unchanged (same files)"
        self.stdout.write(f"{agent.name}@{agent.version}: {state}; entrypoint {agent.entrypoint}")
