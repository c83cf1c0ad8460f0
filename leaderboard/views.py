from dataclasses import asdict
from functools import partial

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.cache import patch_vary_headers
from django.utils.html import json_script
from django.views.decorators.http import require_POST

from core.roles import is_staff, staff_required
from runner.execution.preparation import prepared_env_listing
from runner.execution.validation import task_version_revalidate
from runner.jobs import QueueUnreachable
from runner.models import Agent, Submission
from runner.selectors import queue_positions_fill, runs_list, runs_rows, runs_visible_to, validation_wait
from runner.services import RunRequestError
from runner.throttles import RunRequestThrottle
from task_bank.mlagentbench import bare_folder_packages, environment
from task_bank.models import Task
from task_bank.package import CATEGORIES
from task_bank.selectors import mlagentbench_folders
from task_bank.services import task_set_enabled, task_version_answers_set

from .cache import TIMEOUT_S, ranking_cached, ranking_fragment_key
from .charts import (
    cost_vs_success_figure,
    entrant,
    entrant_colours,
    improvement_boxes_figure,
    improvement_distribution_figure,
    success_by_task_figure,
    task_scores_figure,
)
from .exports import leaderboard_csv, leaderboard_json
from .links import entrant_key, entrant_parse, runs_href
from .query import COUNTINGS, BoardQuery, RankingOptions, board_query_parse
from .reproductions import reproduction_comparison, reproduction_comparisons, reproductions_visible, task_noise
from .selectors import (
    IMPROVEMENT_POINTS_MAX,
    home_page,
    improvement_boxes_possible,
    leaderboard_compare,
    leaderboard_improvement_boxes,
    leaderboard_improvements,
    leaderboard_matrix,
    leaderboard_rows,
    task_agent_rows,
    task_detail,
    task_run_scores,
    task_versions,
    tasks_list,
)
from .services import reproduction_of_row, reproduction_of_run


def home_view(request: HttpRequest) -> HttpResponse:
    return render(request, "leaderboard/home.html", home_page(viewer=request.user))


def task_list_view(request: HttpRequest) -> HttpResponse:
    """The task bank; staff see the retired tasks too (marked), so that one can be enabled again."""
    tasks = tasks_list(viewer=request.user, include_retired=is_staff(request.user))
    return render(request, "leaderboard/task_list.html", {"tasks": tasks})


def mlagentbench_tasks_view(request: HttpRequest) -> HttpResponse:
    """MLAgentBench's 13 task folders: what each needs, and whether this deployment has it ready."""
    folders = mlagentbench_folders(viewer=request.user)
    packages = bare_folder_packages()
    context = {"folders": folders, "packages": packages, "its_environment": packages == environment()}
    return render(request, "leaderboard/mlagentbench_tasks.html", context)


def task_detail_view(request: HttpRequest, slug: str) -> HttpResponse:
    try:
        task = task_detail(slug=slug, viewer=request.user)
    except Task.DoesNotExist:
        raise Http404(f"no task {slug}") from None
    version = task.current_version
    include_infrastructure = request.GET.get("infra") == "include"
    options = RankingOptions(include_infrastructure=include_infrastructure)

    def scores_chart() -> str:
        """The chart's figure as its page's JSON script ("" without scores): a run a point, thousands of them on a
        busy task, so it is serialised once per generation too."""
        scores = task_run_scores(viewer=request.user, version=version, options=options)
        if not scores["steps"] and not scores["finals"]:
            return ""
        figure = task_scores_figure(
            scores["steps"],
            scores["finals"],
            baseline=version.baseline_score,
            reference=version.reference_score,
            metric=version.metric_name,
        )
        return json_script(figure, "figure-task-scores")

    # The rows and the chart, once per ranking generation (``cache.ranking_cached``), as the leaderboard's figures.
    cached = partial(ranking_cached, viewer=request.user, options=options)
    context = {
        "task": task,
        "version": version,
        "versions": task_versions(task=task),
        "files": prepared_env_listing(version),
        "hidden_files": prepared_env_listing(version, hidden=True) if request.user.is_staff else None,
        "rows": cached(
            f"task-rows:{version.pk}",
            compute=lambda: task_agent_rows(viewer=request.user, version=version, options=options),
        ),
        "noise": task_noise(viewer=request.user, version=version),
        "validation_wait": validation_wait(version) if not version.is_ready else "",
        "include_infrastructure": include_infrastructure,
        "ranking": "with-infrastructure" if include_infrastructure else "counted",
        "runs": queue_positions_fill(list(runs_rows(runs_list(viewer=request.user, task=task.slug))[:20])),
        "scores_chart": cached(f"task-chart:{version.pk}", compute=scores_chart),
    }
    return render(request, "leaderboard/task_detail.html", context)


def self_reported_entrants() -> set[str]:
    """The agents (name@version) whose runs are all imported from logs: external agents."""
    external = Agent.objects.filter(kind=Agent.Kind.EXTERNAL).values_list("name", "version")
    return {f"{name}@{version}" for name, version in external}


def leaderboard_view(request: HttpRequest) -> HttpResponse:
    """The leaderboard, its CSV and JSON exports (?format=), filtered and ordered as the query string asks
    (``query.board_query_parse``); an htmx request for another order (a header's link) gets the table alone."""
    query, errors = board_query_parse(request.GET)
    table_key = ranking_fragment_key(request.user)  # before the figures: the table is never older than its key
    board = leaderboard_matrix(viewer=request.user, options=query.options(), sort=query.sort)
    export = request.GET.get("format")
    if export == "csv":
        csv_text = leaderboard_csv(board["rows"], counting=query.counting)
        response = HttpResponse(csv_text, content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = 'attachment; filename="leaderboard.csv"'
        return response
    if export == "json":
        return JsonResponse(leaderboard_json(board, query=query), json_dumps_params={"indent": 2})
    context = {
        "matrix": board["matrix"],
        "tasks": board["tasks"],
        "query": query,
        "errors": errors,
        "categories": CATEGORIES,
        "current_only": query.current_only,
        "include_infrastructure": query.include_infrastructure,
        "ranking": "with-infrastructure" if query.include_infrastructure else "counted",
        "counting_name": COUNTINGS[query.counting],
        # With self-reported runs counted, the rows of agents that only bring logs are marked.
        "self_reported_entrants": self_reported_entrants() if query.include_self_reported else set(),
        # The rendered table, once per ranking generation, viewer class and URL (its links keep the query string).
        "table_key": table_key,
        "table_cache_s": TIMEOUT_S if table_key else 0,
    }
    if request.htmx and not request.htmx.history_restore_request:
        response = render(request, "leaderboard/leaderboard.html#table", context)
    else:
        context["charts"] = _leaderboard_charts(request, board=board, query=query, ranking=context["ranking"])
        response = render(request, "leaderboard/leaderboard.html", context)
    patch_vary_headers(response, ("HX-Request",))  # the table alone and the page share a URL: caches keep both
    return response


def _leaderboard_charts(request: HttpRequest, *, board: dict, query: BoardQuery, ranking: str) -> dict:
    if not board["cells"]:
        return {}

    def href(row: dict) -> str:
        return runs_href(
            row,
            ranking=ranking,
            current=query.current_only,
            category=query.category,
            self_reported=query.include_self_reported,
        )

    colours = entrant_colours(entrant(row) for row in [*board["rows"], *board["cells"]])  # the same in every chart
    scored = sum(cell["scored"] for cell in board["cells"])
    if scored > IMPROVEMENT_POINTS_MAX and improvement_boxes_possible():
        improvements = improvement_boxes_figure(
            leaderboard_improvement_boxes(viewer=request.user, options=query.options()), colours=colours
        )
    elif scored:
        improvements = improvement_distribution_figure(
            leaderboard_improvements(viewer=request.user, options=query.options()), colours=colours
        )
    else:
        improvements = None
    # Success against cost says nothing when every entrant's runs cost the same (no model priced, or none used).
    costs = {float(row["mean_cost"] or 0) for row in board["rows"] if row["success_rate"] is not None}
    one_cost = len(costs) <= 1
    return {
        "success_by_task": success_by_task_figure(board["cells"], colours=colours),
        "cost_vs_success": None if one_cost else cost_vs_success_figure(board["rows"], href=href, colours=colours),
        "one_cost": f"{next(iter(costs)):g}" if one_cost and costs else "",
        "improvements": improvements,
    }


def leaderboard_compare_view(request: HttpRequest) -> HttpResponse:
    """Two leaderboard rows, paired on the tasks both ran: chosen with ?a= and ?b= (agent@version[/model])."""
    query, _ = board_query_parse(request.GET)  # a wrong filter is left at its default, as on the leaderboard
    options = query.options()
    rows = leaderboard_rows(viewer=request.user, options=options)
    keys = [entrant_key(r) for r in rows]
    chosen = {side: request.GET.get(side, "") for side in ("a", "b")}
    context = {"keys": keys, "chosen": chosen, "error": None, "comparison": None, **asdict(options)}
    if chosen["a"] and chosen["b"]:
        unknown = [key for key in chosen.values() if key not in keys]
        if unknown:
            context["error"] = f"No leaderboard row {unknown[0]!r}; choose two of the rows listed."
        elif chosen["a"] == chosen["b"]:
            context["error"] = "Choose two different rows."
        else:
            a, b = (entrant_parse(chosen[side]) for side in ("a", "b"))
            context["comparison"] = leaderboard_compare(viewer=request.user, a=a, b=b, options=options)
    return render(request, "leaderboard/compare.html", context, status=400 if context["error"] else 200)


@staff_required
@require_POST
def task_validate_view(request: HttpRequest, slug: str) -> HttpResponse:
    """Staff's "Validate" on the task page: a new validation round of its current version, in the background."""
    task = get_object_or_404(Task.objects.select_related("current_version"), slug=slug, current_version__isnull=False)
    try:
        runs = task_version_revalidate(version=task.current_version)
    except QueueUnreachable as exc:
        messages.error(request, f"{task.slug}: {exc}")
    else:
        if runs:
            messages.success(request, f"{task.slug}: validation queued as {len(runs)} baseline runs.")
        else:
            messages.warning(request, f"{task.slug}: a validation round is under way already.")
    return redirect("leaderboard:task_detail", slug=task.slug)


@staff_required
@require_POST
def task_prepare_answers_view(request: HttpRequest, slug: str) -> HttpResponse:
    """Staff's answers to the questions the task's prepare.py asks on its standard input, a line each; then a new
    validation round, which gives them to it."""
    task = get_object_or_404(Task.objects.select_related("current_version"), slug=slug, current_version__isnull=False)
    answers = str(request.POST.get("answers", "")).replace("\r\n", "\n")[:10_000]
    task_version_answers_set(version=task.current_version, answers=answers)
    messages.success(request, f"{task.slug}: prepare.py's answers saved.")
    return task_validate_view(request, slug)


@staff_required
@require_POST
def task_enabled_view(request: HttpRequest, slug: str) -> HttpResponse:
    """Staff's "Retire" (no new runs; its runs stay) and "Enable" on the task page."""
    task = get_object_or_404(Task, slug=slug)
    enabled = request.POST.get("enabled") == "1"
    if not enabled and request.POST.get("confirm") != "1":
        messages.error(request, f"{task.slug}: not retired; tick the box that says it takes no new runs, then Retire.")
        return redirect("leaderboard:task_detail", slug=task.slug)
    task_set_enabled(task=task, enabled=enabled)
    messages.success(request, f"{task.slug}: {'enabled, it takes new runs' if enabled else 'retired: no new runs'}.")
    return redirect("leaderboard:task_detail", slug=task.slug)


#: At most this many reproductions on the list page, newest first.
REPRODUCTIONS_SHOWN = 100


def reproduction_list_view(request: HttpRequest) -> HttpResponse:
    """Every reproduction the viewer may see, newest first, with its verdict; a form to reproduce a row or a run
    (staff, or an agent's owner as a submission)."""
    reproductions = list(reproductions_visible(request.user)[:REPRODUCTIONS_SHOWN])
    comparisons = reproduction_comparisons(reproductions)
    for reproduction in reproductions:
        reproduction.comparison = comparisons[reproduction.pk]
    keys = [entrant_key(r) for r in leaderboard_rows(viewer=request.user)] if request.user.is_authenticated else []
    chosen = request.GET.get("row", "")  # a leaderboard row's "reproduce" link
    context = {"reproductions": reproductions, "keys": keys, "chosen": chosen}
    return render(request, "leaderboard/reproduction_list.html", context)


@login_required
@require_POST
def reproduction_create_view(request: HttpRequest) -> HttpResponse:
    """Reproduce a leaderboard row (``row``: agent@version[/model]; ``versions=all`` over every task version's runs,
    as the leaderboard counts them then) or one run (``run``: its id)."""
    throttle = RunRequestThrottle()  # a request for runs, counted with the others (BENCH_RUN_REQUEST_RATE)
    if not throttle.allow_request(request, None):
        messages.error(request, f"too many requests for runs: try again in {throttle.wait():.0f} s")
        return redirect("leaderboard:reproductions")
    try:
        if request.POST.get("run"):
            run_id = request.POST["run"]
            run = runs_visible_to(request.user).filter(pk=int(run_id) if run_id.isdigit() else 0).first()
            if run is None:
                raise RunRequestError(f"no run {run_id}")
            reproduction = reproduction_of_run(by=request.user, run=run)
        else:
            key = entrant_parse(request.POST.get("row", ""))
            options = RankingOptions(current_only=request.POST.get("versions") != "all")
            reproduction = reproduction_of_row(by=request.user, key=key, options=options)
    except (RunRequestError, ValueError, QueueUnreachable) as exc:
        messages.error(request, str(exc))
        return redirect("leaderboard:reproductions")
    waiting = reproduction.batch.submission.approval == Submission.Approval.PENDING
    messages.success(
        request, f"Reproduction {reproduction.pk}: " + ("waits for staff's approval." if waiting else "runs queued.")
    )
    return redirect("leaderboard:reproduction_detail", pk=reproduction.pk)


def reproduction_detail_view(request: HttpRequest, pk: int) -> HttpResponse:
    """One reproduction: what the original recorded, what is not the same, and the comparison with its verdict."""
    reproduction = get_object_or_404(reproductions_visible(request.user), pk=pk)
    context = {"reproduction": reproduction, "comparison": reproduction_comparison(reproduction)}
    return render(request, "leaderboard/reproduction_detail.html", context)
