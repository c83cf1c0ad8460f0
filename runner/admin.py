from django.contrib import admin, messages
from django.db import models
from django.urls import reverse
from django.utils.html import format_html

from task_bank import admin as task_bank_admin
from task_bank.models import Task

from .agents.submissions import submission_approve
from .execution.validation import task_version_revalidate
from .llm.gateway import endpoint_check
from .models import Agent, Batch, LLMCall, ModelEndpoint, Run, Step, Submission
from .services import RunRequestError, run_again, run_cancel, run_steps_score_queue

admin.site.site_header = "mlab-bench administration"
admin.site.site_title = "mlab-bench admin"
admin.site.index_title = "Tasks, agents, runs and model endpoints"


class RecordAdmin(admin.ModelAdmin):
    """What a run recorded is evidence: shown, never edited or added by hand (runs are made by the services)."""

    def get_readonly_fields(self, request, obj=None):
        return [f.name for f in self.model._meta.fields] + list(self.readonly_fields)

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):
    list_display = [
        "name", "version", "kind", "entrypoint", "uses_llm", "visibility", "owner", "smoke_state", "created_at",
    ]  # fmt: skip
    list_filter = ["kind", "visibility", "smoke_state"]
    list_select_related = ["owner"]
    search_fields = ["name"]
    readonly_fields = ["package_digest", "package_path", "smoke_state", "smoke_error", "smoke_tested_at"]
    fields = [
        "name", "version", "kind", "entrypoint", "package_digest", "package_path", "smoke_state", "smoke_error",
        "smoke_tested_at", "description", "default_model", "uses_llm", "config", "owner", "visibility",
    ]  # fmt: skip

    def get_fieldsets(self, request, obj=None):
        """A package's files are written by an upload (or ``import_agent``), which checks and smoke-tests them:
        their digest and path are never typed in here."""
        upload = reverse("runner:agent_upload")
        note = format_html(
            'To add an agent package, <a href="{}">upload it</a> (or <code>manage.py import_agent</code>): its '
            "files are checked, stored by digest and smoke-tested in the sandbox by a worker. Here, change its "
            "description, owner or visibility.",
            upload,
        )
        return [(None, {"fields": self.fields, "description": note})]


@admin.register(Batch)
class BatchAdmin(RecordAdmin):
    """Runs launched together, as asked for."""

    list_display = ["pk", "agent", "model", "repeats", "created_by", "created_at"]
    list_select_related = ["agent", "created_by"]
    readonly_fields = ["tasks"]


@admin.register(Submission)
class SubmissionAdmin(RecordAdmin):
    """Requests for runs that staff decide on. Staff approve here too; rejecting needs a reason, given on the
    submissions page."""

    list_display = ["pk", "batch", "approval", "decided_by", "decided_at"]
    list_filter = ["approval"]
    list_select_related = ["batch__agent", "decided_by"]
    actions = ["approve"]

    @admin.action(description="Approve selected submissions (queue their runs)")
    def approve(self, request, queryset) -> None:
        pending = queryset.filter(approval=Submission.Approval.PENDING).select_related("batch__agent")
        for submission in pending:
            try:
                runs = submission_approve(submission=submission, by=request.user)
            except RunRequestError as exc:
                self.message_user(request, f"Submission {submission.pk} was not approved: {exc}", messages.ERROR)
            else:
                self.message_user(request, f"Submission {submission.pk}: {len(runs)} run(s) queued.", messages.SUCCESS)


class StepInline(admin.TabularInline):
    model = Step
    extra = 0
    can_delete = False
    fields = ["index", "action", "is_error", "duration_s", "snapshot"]
    readonly_fields = fields
    show_change_link = True

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Run)
class RunAdmin(RecordAdmin):
    list_display = ["pk", "agent", "task", "status", "final_score", "succeeded", "steps_count", "created_at", "trace"]
    list_filter = ["status", "origin", "purpose", "failure_kind", "agent", "task"]
    list_select_related = ["agent", "task"]
    readonly_fields = ["trace"]
    inlines = [StepInline]
    actions = ["cancel_runs", "run_again", "score_steps"]

    @admin.display(description="Trace")
    def trace(self, run: Run):
        return format_html('<a href="{}">view the trace</a>', reverse("runner:run_detail", args=[run.pk]))

    @admin.action(description="Score every step (evaluate intermediate workspaces)")
    def score_steps(self, request, queryset) -> None:
        jobs = sum(run_steps_score_queue(run=run) for run in queryset)
        self.message_user(request, f"Queued {jobs} evaluation job(s).", messages.SUCCESS)

    @admin.action(description="Cancel selected runs")
    def cancel_runs(self, request, queryset) -> None:
        count = sum(run_cancel(run=run) for run in queryset)
        self.message_user(request, f"Cancel requested for {count} run(s).", messages.SUCCESS)

    @admin.action(description="Run again (a new run: same agent, model, task version and limits)")
    def run_again(self, request, queryset) -> None:
        new = [run_again(run=run).pk for run in queryset.select_related("task", "agent", "task_version")]
        self.message_user(request, f"Queued runs {', '.join(map(str, new))}.", messages.SUCCESS)


@admin.register(Step)
class StepAdmin(RecordAdmin):
    list_display = ["run", "index", "action", "is_error", "duration_s"]
    list_select_related = ["run"]


@admin.register(LLMCall)
class LLMCallAdmin(RecordAdmin):
    list_display = ["run", "step_index", "model", "tokens_in", "tokens_out", "cost", "latency_s", "error"]


@admin.register(ModelEndpoint)
class ModelEndpointAdmin(admin.ModelAdmin):
    list_display = [
        "name", "model_id", "base_url", "api_key_env", "price_input_per_mtok", "price_output_per_mtok",
        "timeout_s", "output_tokens_per_s", "max_concurrency", "default_max_tokens", "default_temperature",
        "is_enabled", "last_check_ok", "last_check_at",
    ]  # fmt: skip
    readonly_fields = ["last_check_at", "last_check_ok", "last_check_message", "created_at"]
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}  # Django 6's default, said explicitly
    actions = ["test_connection"]

    @admin.action(description="Test connection (one tiny completion)")
    def test_connection(self, request, queryset) -> None:
        for endpoint in queryset:
            ok, message = endpoint_check(endpoint)
            self.message_user(request, f"{endpoint.name}: {message}", messages.SUCCESS if ok else messages.ERROR)


# The task admin of the task bank, with what the runner adds: validation as a background job.
admin.site.unregister(Task)


@admin.register(Task)
class TaskAdmin(task_bank_admin.TaskAdmin):
    actions = [*task_bank_admin.TaskAdmin.actions, "validate"]

    @admin.action(description="Validate the current version (prepare, baseline agent, eval) in the background")
    def validate(self, request, queryset) -> None:
        for task in queryset.select_related("current_version"):
            version = task.current_version
            if version is None:
                continue
            runs = task_version_revalidate(version=version)
            if not runs:
                self.message_user(request, f"{task.slug}: already validating.", messages.WARNING)
            else:
                link = reverse("runner:run_detail", args=[runs[0].pk])
                self.message_user(
                    request,
                    format_html(
                        '{}: validation queued as {} baseline runs, the first <a href="{}">run {}</a>.',
                        task.slug,
                        len(runs),
                        link,
                        runs[0].pk,
                    ),
                )
