from django.apps import AppConfig


class TaskBankConfig(AppConfig):
    name = "task_bank"
    verbose_name = "Task bank"
