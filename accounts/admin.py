from django.contrib import admin

from .models import ApiToken


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Staff see and revoke (delete) tokens; keys are never shown (only their prefix is kept)."""

    list_display = ["name", "user", "prefix", "created_at", "last_used_at"]
    list_select_related = ["user"]
    search_fields = ["name", "user__username", "prefix"]
    readonly_fields = ["user", "name", "prefix", "digest", "created_at", "last_used_at"]

    def has_add_permission(self, request) -> bool:
        return False  # a key is made on its owner's account page, where it is shown once
