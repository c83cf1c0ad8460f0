from django.urls import path

from . import views

app_name = "leaderboard"
urlpatterns = [
    path("", views.home_view, name="home"),
    path("leaderboard/", views.leaderboard_view, name="leaderboard"),
    path("leaderboard/compare/", views.leaderboard_compare_view, name="compare"),
    path("leaderboard/reproductions/", views.reproduction_list_view, name="reproductions"),
    path("leaderboard/reproductions/new/", views.reproduction_create_view, name="reproduction_create"),
    path("leaderboard/reproductions/<int:pk>/", views.reproduction_detail_view, name="reproduction_detail"),
    path("tasks/", views.task_list_view, name="task_list"),
    path("mlagentbench/tasks/", views.mlagentbench_tasks_view, name="mlagentbench_tasks"),
    path("tasks/<slug:slug>/", views.task_detail_view, name="task_detail"),
    path("tasks/<slug:slug>/validate/", views.task_validate_view, name="task_validate"),
    path("tasks/<slug:slug>/prepare-answers/", views.task_prepare_answers_view, name="task_prepare_answers"),
    path("tasks/<slug:slug>/enabled/", views.task_enabled_view, name="task_enabled"),
]
