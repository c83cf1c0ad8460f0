from django.urls import path

from . import views

app_name = "leaderboard"
urlpatterns = [
    path("", views.home_view, name="home"),
    path("leaderboard/", views.leaderboard_view, name="leaderboard"),
    path("leaderboard/compare/", views.leaderboard_compare_view, name="compare"),
    path("tasks/", views.task_list_view, name="task_list"),
    path("tasks/<slug:slug>/", views.task_detail_view, name="task_detail"),
    path("tasks/<slug:slug>/validate/", views.task_validate_view, name="task_validate"),
    path("tasks/<slug:slug>/enabled/", views.task_enabled_view, name="task_enabled"),
]
