import json
import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from core.first_start import admin_password_keep
from runner.agents.builtin import agents_builtin_ensure
from runner.demo import demo_queue
from runner.llm.gateway import endpoints_sync
from runner.llm.local_model import local_endpoint_spec
from runner.models import Run
from task_bank.services import builtin_tasks_load


class Command(BaseCommand):
    help = (
        "First-start setup for `make run`: load the built-in tasks and agents, create an admin account if "
        "there is none, queue the demo (the quick built-in tasks validated, the tuner on them, on the demo's "
        "own worker) if no runs exist, and with BENCH_LOCAL_MODEL=1 register the local model endpoint local-smollm2."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--no-demo", action="store_true", help="do not queue the demo")

    def handle(self, *args, **opts) -> None:
        self.verbosity = opts["verbosity"]
        loaded = builtin_tasks_load()
        for version, created in loaded:
            self.say(f"task {version.task.slug}: v{version.number}{' (new)' if created else ''}", level=2)
        self.say(f"built-in tasks: {len(loaded)}, {sum(created for _, created in loaded)} of them new")
        agents_builtin_ensure()
        if settings.BENCH_MODEL_ENDPOINTS:
            try:
                specs = json.loads(settings.BENCH_MODEL_ENDPOINTS)
                names = [e.name for e in endpoints_sync(specs if isinstance(specs, list) else [specs])]
            except (ValueError, TypeError) as exc:
                raise CommandError(f"BENCH_MODEL_ENDPOINTS is not a valid list of endpoints: {exc}") from exc
            self.say(f"model endpoints: {', '.join(names)}")
        if settings.BENCH_LOCAL_MODEL:
            spec = local_endpoint_spec(var_dir=settings.VAR_DIR, port=settings.BENCH_LOCAL_MODEL_PORT)
            (local,) = endpoints_sync([spec])
            self.say(
                f"local model endpoint: {local.name} at {local.base_url} (SmolLM2-135M, price 0; too small and too "
                "slow to make progress on a task, there to watch the research agent's loop without an API key)"
            )
        self.ensure_admin()
        if not opts["no_demo"] and not Run.objects.exists():
            runs = demo_queue()
            tasks = {run.task_id for run in runs}
            tuned = sum(run.agent.name == "tuner" for run in runs)
            self.say(
                f"queued the demo: {len(tasks)} quick built-in tasks validated, quickest first, and the tuner on "
                f"{tuned} of them ({len(runs)} runs on the demo's own worker); the slow ones are validated before "
                "their first run"
            )

    def say(self, text: str, level: int = 1) -> None:
        """Say it at this verbosity or above (`make run` asks for 0: bench_ready has the last word)."""
        if self.verbosity >= level:
            self.stdout.write(text)

    def ensure_admin(self) -> None:
        User = get_user_model()
        if User.objects.filter(is_superuser=True).exists():
            return
        password = settings.BENCH_ADMIN_PASSWORD or secrets.token_urlsafe(12)
        User.objects.create_superuser("admin", "admin@localhost", password)
        if settings.BENCH_ADMIN_PASSWORD:
            self.say("created admin account 'admin' with the password from BENCH_ADMIN_PASSWORD")
        else:
            admin_password_keep(password)  # bench_ready says it again once the site is up
            self.say(self.style.WARNING(f"created admin account 'admin' with password: {password}"))
