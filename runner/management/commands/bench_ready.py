import signal
import time
import urllib.error
import urllib.request

from django.conf import settings
from django.core.management.base import BaseCommand

from core.first_start import admin_password_kept


class Command(BaseCommand):
    help = (
        "`make run`'s last word: wait until the web server answers, then say where the site is and, while it is still "
        "the admin's, the first start's admin password; then wait (a Procfile process that ends stops the others)."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--timeout", type=float, default=300, help="seconds to wait for the web server")
        parser.add_argument("--once", action="store_true", help="say it and end (no waiting afterwards)")

    def handle(self, *args, **opts) -> None:
        site = f"http://{settings.BENCH_HOST}:{settings.BENCH_PORT}/"
        deadline = time.monotonic() + opts["timeout"]
        while not self.answers(f"{site}healthz"):
            if time.monotonic() > deadline:
                self.stderr.write(f"the web server did not answer at {site} within {opts['timeout']:.0f} s")
                break
            time.sleep(0.5)
        else:
            password = admin_password_kept()
            admin = f"admin: {site}admin/" + (f", user admin, password {password}" if password else "")
            logs = settings.VAR_DIR / "log"
            self.stdout.write(
                self.style.SUCCESS(f"\n  mlab-bench is at {site}  ({admin})\n")
                + f"  Ctrl-C stops everything; the processes' logs are in {logs}/\n"
            )
        self.stdout.flush()
        if not opts["once"]:
            signal.signal(signal.SIGTERM, lambda *_: exit(0))
            try:
                while True:
                    signal.pause()
            except KeyboardInterrupt:  # Ctrl-C: the terminal signals every process of `make run` at once
                return

    @staticmethod
    def answers(url: str) -> bool:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                return response.status < 500
        except (urllib.error.URLError, OSError):
            return False
