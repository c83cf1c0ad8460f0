from django.contrib import admin

from .models import Task, TaskVersion


class TaskVersionInline(admin.TabularInline):
    model = TaskVersion
    extra = 0
    can_delete = False
    fields = ["number", "digest", "status", "baseline_score", "baseline_time_s", "validated_at", "created_at"]
    readonly_fields = fields
    show_change_link = True


@admin.register(Task)
class TaskAdmin(admin.ModelAdmin):
    list_display = ["slug", "title", "category", "source", "is_enabled", "current_version", "updated_at"]
    list_filter = ["category", "source", "is_enabled"]
    search_fields = ["slug", "title"]
    inlines = [TaskVersionInline]
    readonly_fields = ["created_at", "updated_at"]


@admin.register(TaskVersion)
class TaskVersionAdmin(admin.ModelAdmin):
    list_display = ["__str__", "status", "metric_name", "higher_is_better", "baseline_score", "created_at"]
    list_filter = ["status"]
    readonly_fields = ["digest", "package_path", "created_at", "validated_at"]
