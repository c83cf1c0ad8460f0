from django.urls import path

from .views import agents as agent_views
from .views import logs as log_views
from .views import runs as views
from .views import workers as execution_views

app_name = "runner"
urlpatterns = [
    path("agents/", agent_views.agent_list_view, name="agent_list"),
    path("agents/new/", agent_views.agent_upload_view, name="agent_upload"),
    path("agents/example-agent.zip", agent_views.example_agent_zip_view, name="example_agent_zip"),
    path("agents/<slug:name>/", agent_views.agent_detail_view, name="agent_detail"),
    path("runs/", views.run_list_view, name="run_list"),
    path("runs/new/", agent_views.run_request_view, name="run_request"),
    path("submissions/", agent_views.submission_list_view, name="submission_list"),
    path("submissions/<int:pk>/approve/", agent_views.submission_approve_view, name="submission_approve"),
    path("submissions/<int:pk>/reject/", agent_views.submission_reject_view, name="submission_reject"),
    path("runs/compare/", views.runs_compare_view, name="runs_compare"),
    path("runs/held/", views.held_runs_view, name="run_held"),
    path("runs/<int:pk>/review/", views.run_hold_decide_view, name="run_hold_decide"),
    path("runs/import/", log_views.log_upload_view, name="log_upload"),
    path("actions/", views.action_catalogue_view, name="actions"),
    path("workers/", execution_views.worker_list_view, name="worker_list"),
    path("runs/<int:pk>/", views.run_detail_view, name="run_detail"),
    path("runs/<int:pk>/steps/", views.run_steps_view, name="run_steps"),
    path("runs/<int:pk>/poll/", views.run_poll_view, name="run_poll"),
    path("runs/<int:pk>/trace.json", views.run_trace_json_view, name="run_trace_json"),
    path("runs/<int:pk>/log.zip", views.run_log_zip_view, name="run_log_zip"),
    path("runs/<int:pk>/inspect.json", log_views.run_inspect_log_view, name="run_inspect_log"),
    path("batches/<int:pk>/inspect.json", log_views.batch_inspect_log_view, name="batch_inspect_log"),
    path("runs/<int:pk>/cancel/", views.run_cancel_view, name="run_cancel"),
    path("runs/<int:pk>/tags/", views.run_tag_view, name="run_tag"),
    path("runs/<int:pk>/tags/<int:tag_pk>/remove/", views.run_tag_remove_view, name="run_tag_remove"),
    path("runs/<int:pk>/again/", views.run_again_view, name="run_again"),
    path("runs/<int:pk>/score-steps/", views.run_score_steps_view, name="run_score_steps"),
    path("runs/<int:pk>/steps/<int:index>/fork/", views.run_fork_view, name="run_fork"),
    path("runs/<int:pk>/steps/<int:index>/changes/", views.step_changes_view, name="step_changes"),
    path("runs/<int:pk>/steps/<int:index>/files/", views.step_files_view, name="step_files"),
    path("runs/<int:pk>/steps/<int:index>/workspace.zip", views.step_workspace_zip_view, name="step_workspace_zip"),
    path("runs/<int:pk>/steps/<int:index>/llm-calls/", views.step_llm_calls_view, name="step_llm_calls"),
    path("runs/<int:pk>/steps/<int:index>/observation/", views.step_observation_view, name="step_observation"),
    path("runs/<int:pk>/steps/<int:index>/tag-form/", views.step_tag_form_view, name="step_tag_form"),
]
