import os
import tempfile
from pathlib import Path

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import FileResponse, Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import path, reverse

from .archive import upload_saved
from .forms import TaskImportForm
from .models import Task, TaskVersion
from .package import MetricDirectionUnknown, TaskPackageError
from .services import task_export, task_import_source, task_set_enabled


def baseline_shown(score: float | None) -> str | None:
    """A baseline as the site shows it (four decimals), not as a float prints (17 digits)."""
    return None if score is None else f"{score:.4f}"


class TaskVersionInline(admin.TabularInline):
    model = TaskVersion
    extra = 0
    can_delete = False
    fields = ["number", "short_digest", "status", "baseline", "baseline_time_s", "validated_at", "created_at"]
    readonly_fields = fields

    @admin.display(description="Digest")
    def short_digest(self, version: TaskVersion) -> str:
        return version.digest[:12]

    @admin.display(description="Baseline")
    def baseline(self, version: TaskVersion) -> str | None:
        return baseline_shown(version.baseline_score)

    show_change_link = True


@admin.register(Task)
class TaskAdmin(admin.ModelAdmin):
    list_display = ["slug", "title", "category", "source", "is_enabled", "version_status", "baseline", "updated_at"]
    list_filter = ["category", "source", "is_enabled"]
    list_select_related = ["current_version"]
    search_fields = ["slug", "title"]
    inlines = [TaskVersionInline]
    readonly_fields = ["source", "current_version", "created_at", "updated_at"]
    fields = ["slug", "title", "category", "is_enabled", "source", "current_version", "created_at", "updated_at"]
    actions = ["enable", "retire", "export"]
    change_list_template = "admin/task_bank/task/change_list.html"

    @admin.display(description="Status")
    def version_status(self, task: Task) -> str:
        return task.status

    @admin.display(description="Baseline")
    def baseline(self, task: Task):
        return baseline_shown(task.current_version.baseline_score if task.current_version else None)

    @admin.action(description="Enable selected tasks (they take new runs)")
    def enable(self, request, queryset) -> None:
        for task in queryset:
            task_set_enabled(task=task, enabled=True)
        self.message_user(request, f"Enabled {queryset.count()} task(s).", messages.SUCCESS)

    @admin.action(description="Retire selected tasks (no new runs; their runs stay)")
    def retire(self, request, queryset) -> None:
        for task in queryset:
            task_set_enabled(task=task, enabled=False)
        self.message_user(request, f"Retired {queryset.count()} task(s).", messages.SUCCESS)

    @admin.action(description="Export the current version as a zip (the package import_task reads back)")
    def export(self, request, queryset):
        if queryset.count() != 1:
            self.message_user(request, "Select one task to export.", messages.WARNING)
            return None
        return redirect(reverse("admin:task_bank_task_export", args=[queryset.get().pk]))

    def get_urls(self):
        extra = [
            path("import/", self.admin_site.admin_view(self.import_view), name="task_bank_task_import"),
            path("<int:pk>/export/", self.admin_site.admin_view(self.export_view), name="task_bank_task_export"),
        ]
        return extra + super().get_urls()

    def export_view(self, request, pk: int):
        if not self.has_change_permission(request):
            raise PermissionDenied("exporting a task needs the permission to change tasks (the zip holds hidden files)")
        task = get_object_or_404(Task.objects.select_related("current_version"), pk=pk)
        version = task.current_version
        if version is None:
            raise Http404(f"task {task.slug} has no files yet")
        fd, tmp = tempfile.mkstemp(prefix="export-", suffix=".zip")
        os.close(fd)
        try:
            task_export(version=version, out=Path(tmp))
            handle = open(tmp, "rb")  # noqa: SIM115 - FileResponse closes it
        finally:
            os.unlink(tmp)  # the open handle keeps the file until the response is sent
        return FileResponse(handle, as_attachment=True, filename=f"{task.slug}-v{version.number}.zip")

    def import_view(self, request):
        if not self.has_add_permission(request):
            raise PermissionDenied("importing a task needs the permission to add tasks")
        form = TaskImportForm(request.POST or None, request.FILES or None)
        if request.method == "POST" and form.is_valid():
            upload = form.cleaned_data["package"]
            with upload_saved(upload, prefix="task-upload-") as zip_path:
                try:
                    version, created = task_import_source(
                        source=zip_path,
                        name=upload.name,
                        slug=form.cleaned_data["slug"] or None,
                        source_kind=Task.Source.UPLOADED,
                        metric_name=form.cleaned_data["metric"] or None,
                        higher_is_better=form.higher_is_better,
                    )
                except MetricDirectionUnknown:
                    form.add_error(
                        "direction",
                        "this package does not say whether a higher metric is better (task.toml has no "
                        "metric.higher_is_better): choose the direction",
                    )
                except TaskPackageError as exc:
                    form.add_error("package", str(exc))
                else:
                    state = "imported as a new version" if created else "unchanged (same files)"
                    self.message_user(
                        request,
                        f"{version.task.slug} v{version.number}: {state}. Validate it to measure its baseline.",
                        messages.SUCCESS,
                    )
                    return redirect(reverse("admin:task_bank_task_change", args=[version.task.pk]))
        context = {
            **self.admin_site.each_context(request),
            "form": form,
            "title": "Import a task package",
            "opts": self.model._meta,
        }
        return render(request, "admin/task_bank/task/import.html", context)


@admin.register(TaskVersion)
class TaskVersionAdmin(admin.ModelAdmin):
    list_display = ["__str__", "status", "metric_name", "higher_is_better", "baseline", "created_at"]
    list_filter = ["status"]
    list_select_related = ["task"]
    readonly_fields = [
        "task", "number", "digest", "package_path", "status", "validation_log", "validated_at", "baseline_score",
        "baseline_time_s", "created_at",
    ]  # fmt: skip

    @admin.display(description="Baseline")
    def baseline(self, version: TaskVersion) -> str | None:
        return baseline_shown(version.baseline_score)
