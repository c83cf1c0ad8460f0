from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.routers import DefaultRouter

from core.docs import docs_page
from core.health import healthz
from leaderboard.api import leaderboard_api, reproduction_api, reproductions_api
from runner.api.agents import AgentViewSet, SubmissionViewSet
from runner.api.logs import batch_inspect_log_api, inspect_import_api, log_import_api, run_inspect_log_api
from runner.api.runs import RunViewSet
from runner.metrics import metrics
from task_bank.api import TaskViewSet

router = DefaultRouter()
router.register("tasks", TaskViewSet, basename="task")
router.register("runs", RunViewSet, basename="run")
router.register("agents", AgentViewSet, basename="agent")
router.register("submissions", SubmissionViewSet, basename="submission")

urlpatterns = [
    path("favicon.ico", RedirectView.as_view(url=static("favicon.svg"), permanent=True)),  # pages without our <head>
    path("healthz", healthz, name="healthz"),
    path("metrics", metrics, name="metrics"),
    path("docs/", docs_page, name="docs"),
    path("docs/<path:path>", docs_page, name="docs_page"),
    path("admin/", admin.site.urls),
    path("api/v1/runs/<int:pk>/inspect-log/", run_inspect_log_api, name="api-run-inspect-log"),
    path("api/v1/batches/<int:pk>/inspect-log/", batch_inspect_log_api, name="api-batch-inspect-log"),
    path("api/v1/", include(router.urls)),
    path("api/v1/leaderboard/", leaderboard_api, name="api-leaderboard"),
    path("api/v1/reproductions/", reproductions_api, name="api-reproductions"),
    path("api/v1/reproductions/<int:pk>/", reproduction_api, name="api-reproduction"),
    path("api/v1/logs/", log_import_api, name="api-logs"),
    path("api/v1/logs/inspect/", inspect_import_api, name="api-logs-inspect"),
    path("api/v1/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/v1/docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    path("account/", include("accounts.urls")),
    path("", include("leaderboard.urls")),
    path("", include("runner.urls")),
]

handler404 = "core.errors.page_not_found"
