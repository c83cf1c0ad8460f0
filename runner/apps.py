from django.apps import AppConfig


class RunnerConfig(AppConfig):
    name = "runner"
    verbose_name = "Runner"

    def ready(self) -> None:
        # Register the jobs in every process (web, worker, commands), so that queueing one by name also
        # honours CELERY_TASK_ALWAYS_EAGER.
        from . import tasks  # noqa: F401
