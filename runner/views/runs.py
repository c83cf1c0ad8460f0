from django.conf import settings
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import (
    FileResponse,
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseBadRequest,
    JsonResponse,
    StreamingHttpResponse,
)
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from core.pagination import MAX_ID, whole_number
from core.roles import may_review, staff_required
from runner.actions import ACTIONS, catalogue_for_agent
from runner.charts import score_over_steps_figure, scores_overlaid_figure
from runner.filters import RunFilters
from runner.holds import NOTE_MAX, held_runs, hold_decide
from runner.jobs import QueueUnreachable
from runner.logs.exports import log_export_file
from runner.models import ReviewTag, Run, Step
from runner.selectors import (
    COMPARE_STEPS,
    ORIGINS,
    RANKINGS,
    TRACE_PAGE_STEPS,
    CompareError,
    NoSuchRun,
    StepFilter,
    compared_steps,
    run_detail,
    run_plan_before,
    run_review_tags,
    run_step_scores,
    run_steps_matching,
    run_steps_window,
    run_trace_json,
    runs_compared,
    runs_list,
    runs_of_same_task,
    runs_page,
    runs_rows,
    runs_step_scores,
    step_llm_calls,
)
from runner.services import (
    RunRequestError,
    review_tag_add,
    review_tag_remove,
    run_again,
    run_cancel,
    run_fork,
    run_steps_score_queue,
)
from runner.trace import (
    PLAN,
    WorkspaceTooLarge,
    input_summary,
    search_tree,
    steps_display,
    workspace_changes,
    workspace_entry,
    workspace_file,
    workspace_files,
    workspace_zip,
    workspaces_compared,
)
from runner.workspace.snapshots import BlobStore


def _run_or_404(request: HttpRequest, pk: int) -> Run:
    """The run if the requester may see it; a hidden run is a 404 like a missing one, so it does not leak."""
    try:
        return run_detail(viewer=request.user, pk=pk)
    except Run.DoesNotExist:
        raise Http404(f"no run {pk}") from None


def _step_or_404(run: Run, index: int) -> Step:
    step = Step.objects.filter(run=run, index=index).first()
    if step is None:
        raise Http404(f"run {run.pk} has no step {index}")
    return step


#: Runs on a page of the runs list.
RUNS_PAGE_SIZE = 50
#: The largest step index a query string may name (the column is a 32-bit integer).
STEP_INDEX_MAX = 2**31 - 1


def run_list_view(request: HttpRequest) -> HttpResponse:
    """The runs, newest first, a page at a time: ?before=N lists the runs older than run N, ?after=N the newer ones
    (keyset pages: as fast deep in the list as at its head). A wrong filter is named, and the rest apply."""
    filters, errors = RunFilters.parse(request.GET, blank_is_absent=True)
    unknown = {name: request.GET.get(name) for name in errors}
    before, after = (_whole_number(request, key, minimum=1) for key in ("before", "after"))
    runs = runs_rows(runs_list(viewer=request.user, **RunFilters.selector_arguments(filters)))
    unknown_from = None
    try:
        page = runs_page(runs, viewer=request.user, before=before, after=None if before else after, size=RUNS_PAGE_SIZE)
    except NoSuchRun:
        unknown_from = before or after
        page = runs_page(runs, viewer=request.user, size=RUNS_PAGE_SIZE)
    context = {
        "page": page,
        "unknown_from": unknown_from,
        "filters": filters,
        "filtered": any(v is not None for name, v in filters.items() if name != "versions")
        or filters["versions"] == "current",
        "statuses": Run.Status.choices,
        "rankings": list(RANKINGS),
        "unknown_status": unknown.get("status"),
        "unknown_ranking": unknown.get("ranking"),
        "origins": list(ORIGINS),
        "unknown_origin": unknown.get("origin"),
        "tags": ReviewTag.Kind.choices,
        "unknown_tag": unknown.get("tag"),
    }
    return render(request, "runner/run_list.html", context)


def _trace_context(run: Run, steps: list[Step], previous: Step | None) -> dict:
    """What the trace's partials need to show ``steps`` (the step before them is ``previous``)."""
    plan = None
    if previous is not None and PLAN not in previous.entries and any(PLAN in step.entries for step in steps):
        plan = run_plan_before(run=run, index=previous.index)  # only a shown plan is compared with it
    items = steps_display(steps, initial_snapshot=run.initial_snapshot, previous=previous, previous_plan=plan)
    earlier = steps[0].index if previous is not None and steps else None
    return {"run": run, "steps": items, "earlier_before": earlier, "page_steps": TRACE_PAGE_STEPS}


def _matching_context(run: Run, steps: list[Step], predecessors: dict[int, Step], earlier: bool) -> dict:
    """As ``_trace_context``, for steps a filter picked: each is compared with the step before it in the run."""
    items = []
    for step in steps:
        previous = predecessors.get(step.index - 1)
        plan = None
        if previous is not None and PLAN not in previous.entries and PLAN in step.entries:
            plan = run_plan_before(run=run, index=previous.index)
        items += steps_display([step], initial_snapshot=run.initial_snapshot, previous=previous, previous_plan=plan)
    earlier_before = steps[0].index if earlier and steps else None
    return {"run": run, "steps": items, "earlier_before": earlier_before, "page_steps": TRACE_PAGE_STEPS}


#: The failure modes a reviewer chooses from, as (value, label).
TAG_KINDS = [(str(kind), kind.label) for kind in ReviewTag.REVIEWED]


def _steps_context(run: Run, where: StepFilter, *, before: int | None = None, after: int | None = None) -> dict:
    """A page of the trace's steps (the last ones, those before ``before``, those after ``after``), all of them
    or those ``where`` picks, with what links to the next page need (``last_index``, the filter's query)."""
    if where:
        steps, predecessors, earlier = run_steps_matching(run=run, where=where, before=before, after=after)
        context = _matching_context(run, steps, predecessors, earlier)
        last = steps[-1].index if steps else after if after is not None else -1
    else:
        steps, previous = run_steps_window(run=run, before=before, after=after)
        context = _trace_context(run, steps, previous)
        last = steps[-1].index if steps else after if after is not None else (previous.index if previous else -1)
    own_tags, step_tags = run_review_tags(run=run, indexes=[item["step"].index for item in context["steps"]])
    for item in context["steps"]:
        item["tags"] = step_tags.get(item["step"].index, [])
    context["run_tags"] = own_tags
    limit = settings.BENCH_RUN_MAX_STORED_MB
    return context | {"last_index": last, "where": where, "tag_kinds": TAG_KINDS, "stored_limit_mb": limit}


def _score_chart(run: Run) -> dict | None:
    return score_over_steps_figure(
        run_step_scores(run=run),
        baseline=run.task_version.baseline_score,
        metric=run.task_version.metric_name,
        threshold=run.task_version.success_threshold,
        higher_is_better=run.task_version.higher_is_better,
    )


def run_detail_view(request: HttpRequest, pk: int) -> HttpResponse:
    """The run's header and its last TRACE_PAGE_STEPS steps (of those a filter picks: ``?q=``, ``?errors=1``,
    ``?action=``); earlier steps, LLM calls and long observations load on demand, and a live run polls
    ``run_poll_view`` for what is new."""
    run = _run_or_404(request, pk)
    where = StepFilter.from_query(request.GET)
    context = _steps_context(run, where)
    context |= _step_tools(request, run)
    context["score_chart"] = _score_chart(run)
    context["search_tree"] = search_tree(run)
    context["actions"] = [spec.name for spec in ACTIONS]
    context["matching"] = where.apply(Step.objects.filter(run=run)).count() if where else None
    return render(request, "runner/run_detail.html", context)


def _step_tools(request: HttpRequest, run: Run) -> dict:
    """What a card offers its viewer: a reviewer tags a step; staff fork an ended run from one."""
    return {"reviewer": may_review(request.user), "fork": request.user.is_staff and not run.is_live}


def run_steps_view(request: HttpRequest, pk: int) -> HttpResponse:
    """The steps before ``?before=N`` (one page of them), with the control that loads the page before."""
    run = _run_or_404(request, pk)
    before = _whole_number(request, "before", minimum=-1, maximum=STEP_INDEX_MAX)
    if before is None:
        return HttpResponseBadRequest("?before= needs a step index (a whole number)")
    context = _steps_context(run, StepFilter.from_query(request.GET), before=before)
    context |= _step_tools(request, run)
    return render(request, "runner/run_detail.html#earlier-page", context)


def run_poll_view(request: HttpRequest, pk: int) -> HttpResponse:
    """A live run's poll: the steps after ``?after=N`` (the last one the page shows), the header and the live
    step, swapped in out of band, and the poller itself (without its trigger once the run has ended)."""
    run = _run_or_404(request, pk)
    after = _whole_number(request, "after", minimum=-1, maximum=STEP_INDEX_MAX)
    if after is None:
        return HttpResponseBadRequest("?after= needs a step index (a whole number, -1 for none)")
    context = _steps_context(run, StepFilter.from_query(request.GET), after=after)
    context |= _step_tools(request, run)
    context["score_chart"] = _score_chart(run)
    response = render(request, "runner/run_detail.html#poll", context)
    if request.user.is_staff and not run.is_live:
        # Staff act on an ended run (fork from a step, run again, score every step): the buttons the live page
        # did not show come with the whole page, loaded once, when the run ends.
        response["HX-Refresh"] = "true"
    return response


def _whole_number(request: HttpRequest, name: str, *, minimum: int, maximum: int = MAX_ID) -> int | None:
    """?NAME=N within bounds; None when absent or anything else (a page falls back to its default)."""
    try:
        return whole_number(request.GET, name, minimum=minimum, maximum=maximum, default=None)
    except ValueError:
        return None


#: LLM calls shown at a time in a step's list (each with its whole prompt).
LLM_CALLS_PAGE = 20


def step_llm_calls_view(request: HttpRequest, pk: int, index: int) -> HttpResponse:
    """A step's LLM calls with their prompts and completions (loaded when the step's calls are opened)."""
    run = _run_or_404(request, pk)
    step = _step_or_404(run, index)
    page = Paginator(step_llm_calls(step=step), LLM_CALLS_PAGE).get_page(request.GET.get("page"))
    return render(request, "runner/_step_llm_calls.html", {"calls": page, "run": run, "step": step})


def step_observation_view(request: HttpRequest, pk: int, index: int) -> HttpResponse:
    """A step's whole observation (the trace shows the start of a long one)."""
    run = _run_or_404(request, pk)
    return render(request, "runner/_step_observation.html", {"step": _step_or_404(run, index)})


def step_changes_view(request: HttpRequest, pk: int, index: int) -> HttpResponse:
    """The workspace change a step made (loaded on demand into the step card)."""
    run = _run_or_404(request, pk)
    step = _step_or_404(run, index)
    changes = workspace_changes(run, step, page=_page_number(request))
    return render(request, "runner/_step_changes.html", {"run": run, "step": step, "changes": changes})


def _page_number(request: HttpRequest) -> int:
    """?page=N (from 1); anything else is the first page."""
    return _whole_number(request, "page", minimum=1) or 1


def step_files_view(request: HttpRequest, pk: int, index: int) -> HttpResponse:
    """The workspace as it was after a step: the file list, and one file when ?path= is given (its bytes, as a
    download, with ?download=1)."""
    run = _run_or_404(request, pk)
    step = _step_or_404(run, index)
    path = request.GET.get("path")
    if path and request.GET.get("download") == "1":
        try:
            sha, _size = workspace_entry(step, path)
        except KeyError:
            raise Http404(f"no file {path} after step {index}") from None
        name = path.rsplit("/", 1)[-1]
        return FileResponse(BlobStore().open(sha), as_attachment=True, filename=name)
    context = {"run": run, "step": step, "files": workspace_files(step, page=_page_number(request)), "path": path}
    if path:
        try:
            context["content"], context["size"] = workspace_file(step, path)
        except KeyError:
            raise Http404(f"no file {path} after step {index}") from None
    return render(request, "runner/step_files.html", context)


def step_workspace_zip_view(request: HttpRequest, pk: int, index: int) -> HttpResponse:
    """The whole workspace as it was after a step, as a zip (written while it is sent)."""
    run = _run_or_404(request, pk)
    step = _step_or_404(run, index)
    try:
        chunks = workspace_zip(step, max_bytes=settings.BENCH_WORKSPACE_ZIP_MAX_MB * 1024 * 1024)
    except WorkspaceTooLarge as exc:
        return HttpResponse(
            f"Not zipped: {exc} (BENCH_WORKSPACE_ZIP_MAX_MB). Download its files one by one from the step's files.",
            status=413,
            content_type="text/plain; charset=utf-8",
        )
    response = StreamingHttpResponse(chunks, content_type="application/zip")
    response["Content-Disposition"] = f'attachment; filename="run-{run.pk}-step-{step.index}-workspace.zip"'
    return response


def _run_ids(request: HttpRequest) -> list[int] | None:
    """?runs=1,2 (or ?runs=1&runs=2): the run ids asked for; None when one is not a whole number."""
    parts = [part.strip() for value in request.GET.getlist("runs") for part in value.split(",") if part.strip()]
    try:
        return [whole_number({"runs": part}, "runs", minimum=0, maximum=MAX_ID, default=None) for part in parts]
    except ValueError:
        return None


def runs_compare_view(request: HttpRequest) -> HttpResponse:
    """Runs of one task side by side (``?runs=1,2``): their headers, their scores over the steps on one chart,
    their steps aligned by index (``?from=N``, a page at a time) and their final workspaces compared with the
    first run's, one file's diff shown (``?file=``, by default the task's script). One run: a choice of the
    runs of its task to compare it with."""
    ids = _run_ids(request)
    if ids is None:
        return render(request, "runner/run_compare.html", {"error": "?runs= takes run ids (1,2,...)"}, status=400)
    if not ids:
        return render(request, "runner/run_compare.html", {"error": "choose the runs to compare (?runs=1,2)"})
    try:
        runs = runs_compared(viewer=request.user, ids=ids)
    except CompareError as exc:
        status = 404 if str(exc).startswith("no run") else 400
        return render(request, "runner/run_compare.html", {"error": str(exc)}, status=status)
    version = runs[0].task_version
    context: dict = {"runs": runs, "ids": ",".join(str(run.pk) for run in runs), "version": version}
    if len(runs) == 1:
        context["others"] = runs_of_same_task(viewer=request.user, run=runs[0])
        return render(request, "runner/run_compare.html", context)
    start = _whole_number(request, "from", minimum=0, maximum=STEP_INDEX_MAX) or 0
    rows = compared_steps(runs=runs, start=start)
    for row in rows:
        for step in row["steps"]:
            if step is not None:
                step.summary = input_summary(step.action_input)
                step.plan = step.entries.get(PLAN, "")
    scores = runs_step_scores(runs=runs)
    series = [
        (f"#{run.pk} {run.agent.name}", reverse("runner:run_detail", args=[run.pk]), scores[run.pk]) for run in runs
    ]
    last = max(run.steps_count for run in runs)
    workspaces = workspaces_compared(runs, path=request.GET.get("file") or version.script_name)
    context |= {
        "rows": rows,
        "start": start,
        "previous_from": max(start - COMPARE_STEPS, 0) if start > 0 else None,
        "next_from": start + COMPARE_STEPS if start + COMPARE_STEPS < last else None,
        "chart": scores_overlaid_figure(series, baseline=version.baseline_score, metric=version.metric_name),
        "last_shown": rows[-1]["index"] if rows else None,
        "workspaces": workspaces,
        "diffs": list(zip(runs[1:], workspaces["diffs"], strict=True)),
    }
    return render(request, "runner/run_compare.html", context)


def run_trace_json_view(request: HttpRequest, pk: int) -> JsonResponse:
    run = _run_or_404(request, pk)
    response = JsonResponse(run_trace_json(run=run), json_dumps_params={"indent": 2})
    response["Content-Disposition"] = f'attachment; filename="run-{run.pk}-trace.json"'
    return response


def run_log_zip_view(request: HttpRequest, pk: int) -> FileResponse:
    """The run as an MLAgentBench log zip (``exports.log_export``), which MLAgentBench's tools and
    ``import_log`` read."""
    run = _run_or_404(request, pk)
    path = log_export_file(run=run)
    handle = open(path, "rb")  # noqa: SIM115 - closed by the response
    path.unlink()  # the open handle keeps the file until the response is sent
    return FileResponse(handle, as_attachment=True, filename=f"run-{run.pk}-log.zip", content_type="application/zip")


def action_catalogue_view(request: HttpRequest) -> HttpResponse:
    """The actions agents can take, as the agent receives them in its first message."""
    return render(request, "runner/actions.html", {"actions": catalogue_for_agent()})


@require_POST
@staff_required
def run_cancel_view(request: HttpRequest, pk: int) -> HttpResponse:
    run = _run_or_404(request, pk)
    if run_cancel(run=run):
        messages.success(request, f"Run {run.pk}: cancel requested; it stops within seconds.")
    else:
        messages.warning(request, f"Run {run.pk} is {run.get_status_display().lower()}: nothing to cancel.")
    return redirect("runner:run_detail", pk=run.pk)


@require_POST
@staff_required
def run_again_view(request: HttpRequest, pk: int) -> HttpResponse:
    try:
        again = run_again(run=_run_or_404(request, pk))
    except RunRequestError as exc:
        messages.error(request, str(exc))
        return redirect("runner:run_detail", pk=pk)
    except QueueUnreachable as exc:
        messages.warning(request, f"Queued, but not sent to a worker: {exc}.")
        return redirect("runner:run_detail", pk=exc.unsent[0])
    messages.success(request, f"Queued run {again.pk}: the same agent, model, task version and limits.")
    return redirect("runner:run_detail", pk=again.pk)


@require_POST
@staff_required
def run_score_steps_view(request: HttpRequest, pk: int) -> HttpResponse:
    run = _run_or_404(request, pk)
    if run.is_live:
        messages.error(request, "The run is still going: score its steps once it has ended.")
    else:
        try:
            jobs = run_steps_score_queue(run=run)
        except QueueUnreachable as exc:
            messages.error(request, f"Could not queue the evaluations: {exc}. Ask again when it is back.")
            return redirect("runner:run_detail", pk=pk)
        messages.success(
            request,
            f"Queued {jobs} evaluation job(s), one per distinct workspace; the score chart fills in as they finish."
            if jobs
            else "Every step already has its score.",
        )
    return redirect("runner:run_detail", pk=pk)


@require_POST
@staff_required
def run_fork_view(request: HttpRequest, pk: int, index: int) -> HttpResponse:
    run = _run_or_404(request, pk)
    try:
        fork = run_fork(run=run, step_index=index)
    except RunRequestError as exc:
        messages.error(request, str(exc))
        return redirect("runner:run_detail", pk=pk)
    except QueueUnreachable as exc:
        messages.warning(request, f"Queued, but not sent to a worker: {exc}.")
        return redirect("runner:run_detail", pk=exc.unsent[0])
    messages.success(request, f"Queued run {fork.pk}, starting from the workspace after step {index} of run {pk}.")
    return redirect("runner:run_detail", pk=fork.pk)


def held_runs_view(request: HttpRequest) -> HttpResponse:
    """The review queue: runs held because their score is beyond their task's ceiling, each with why, to clear
    (rankings count it) or reject (never counted); then the latest decided."""
    _reviewer_or_403(request)
    decided = Run.objects.filter(review__in=(Run.Review.CLEARED, Run.Review.REJECTED)).select_related(
        "agent", "task", "reviewed_by"
    )
    context = {
        "held": list(held_runs()[:HELD_PAGE]),
        "decided": list(decided.order_by("-reviewed_at", "-id")[:HELD_PAGE]),
        "note_max": NOTE_MAX,
    }
    return render(request, "runner/run_held.html", context)


@require_POST
def run_hold_decide_view(request: HttpRequest, pk: int) -> HttpResponse:
    _reviewer_or_403(request)
    clear = request.POST.get("decision") == "clear"
    try:
        decided = hold_decide(run_id=pk, reviewer=request.user, clear=clear, note=request.POST.get("note", ""))
    except RunRequestError as exc:
        messages.error(request, f"Run {pk} not decided: {exc}.")
    else:
        if not decided:
            messages.warning(request, f"Run {pk} is not held for review (any more).")
        elif clear:
            messages.success(request, f"Run {pk} cleared: rankings count it.")
        else:
            messages.success(request, f"Run {pk} rejected: rankings never count it.")
    return redirect("runner:run_held")


HELD_PAGE = 100


def _reviewer_or_403(request: HttpRequest) -> None:
    if not may_review(request.user):
        raise PermissionDenied("reviewers (and staff) tag runs and steps")


def step_tag_form_view(request: HttpRequest, pk: int, index: int) -> HttpResponse:
    """A step's tag form, loaded when a reviewer opens "tag this step" (the run page once carried one per card)."""
    run = _run_or_404(request, pk)
    _reviewer_or_403(request)
    step = _step_or_404(run, index)
    context = {"run": run, "step_index": step.index, "tag_kinds": TAG_KINDS}
    return render(request, "runner/_tag_form_fields.html", context)


@require_POST
def run_tag_view(request: HttpRequest, pk: int) -> HttpResponse:
    """A reviewer tags the run, or one of its steps (``step``), with a failure mode and a comment."""
    run = _run_or_404(request, pk)
    _reviewer_or_403(request)
    step = request.POST.get("step", "")
    try:
        if step and not (step.isdigit() and len(step) < 9):
            raise RunRequestError(f"step {step!r} is not a step index")
        review_tag_add(
            run=run,
            kind=request.POST.get("kind", ""),
            author=request.user,
            step_index=int(step) if step else None,
            comment=request.POST.get("comment", ""),
        )
    except RunRequestError as exc:
        messages.error(request, f"Not tagged: {exc}.")
    else:
        messages.success(request, f"Run {run.pk}{f' step {step}' if step else ''} tagged.")
    return redirect(reverse("runner:run_detail", args=[run.pk]) + (f"#step-{step}" if step.isdigit() else ""))


@require_POST
def run_tag_remove_view(request: HttpRequest, pk: int, tag_pk: int) -> HttpResponse:
    run = _run_or_404(request, pk)
    _reviewer_or_403(request)
    tag = ReviewTag.objects.filter(run=run, pk=tag_pk).select_related("step").first()
    if tag is None:
        raise Http404(f"run {run.pk} has no tag {tag_pk}")
    try:
        review_tag_remove(tag=tag, user=request.user)
    except RunRequestError as exc:
        messages.error(request, f"Not removed: {exc}.")
    return redirect(reverse("runner:run_detail", args=[run.pk]) + (f"#step-{tag.step.index}" if tag.step_id else ""))
