"""Does the leaderboard's ``?counting=mlagentbench`` count what MLAgentBench's own ``plot.py`` counts, on the same
runs? Prints both sides' figures for the same agent row (runs, success rate, mean improvement, success at any step)
with whether each matches (floats to 1e-9), and which runs each side counted, by how they ended.

The platform's side. A small offline task (``eval.py`` scores the number in ``value.txt``; the starter ``train.py``
writes one drawn between 0.49 and 0.51, as a training script's score varies from run to run), imported and
validated in a scratch database. Runs of the built-in ``baseline`` agent on that version (plot.py's "Baseline" exp):
three that submit, one stopped by the step limit after running train.py, one stopped before it (nothing to score).
Then the scripted agent (``tests/agents/scripted_agent.py``) ending in each way: Final Answer scored above the
baseline, Final Answer scored below it, Final Answer scored between the two baselines' 10 % marks (the mean of the
baseline agent's runs, which the counting uses, and the validated one: set once both are known), the step limit,
the agent's clean return without a Final Answer (exit 0: MLAgentBench's agent after its retries), a crash (exit 1),
the time limit between steps (the agent asleep), the time limit inside Execute Script (a sleeping script), final
scores of 0 and of -1, and a Final Answer with nothing to score. Each run that ends in an error first writes a value
that would succeed, so a counted error would show. The scripted runs belong to one agent row (one ``Agent`` row,
version a stamp of this invocation): its config is set to each run's script before the run starts (the conversation
reads it then). Every run is executed in this process (``run_execute``, sandbox ``BENCH_SANDBOX``, bwrap default).

MLAgentBench's side. Each run is exported with ``log_export`` and unzipped as MLAgentBench's logs lie:
``<root>/<exp>/<task>/run-<id>/env_log/trace.json``, exp ``ours`` for the agent, ``sanity_check`` for the baseline
agent, task the task's slug. The agent's runs are unzipped twice more for the GPT-4 rule below: as
``no_retrieval_gpt4`` as exported, and as ``full_gpt4_long`` without the final files of the runs whose export has
error.txt (MLAgentBench's runner saves none for such a run; the export writes them). ``eval.py`` and ``plot.py`` are
read from the mirror's HEAD into a temporary ``MLAgentBench`` package, with the task's ``scripts/`` in its
``benchmarks/<slug>/`` (where eval.py imports a task's eval.py from). Modules missing here are stand-ins, only for
import: of tiktoken, matplotlib, seaborn and anthropic, those not installed, and ``MLAgentBench.environment``
(eval.py takes ``get_task_info`` from it, only in its ``__main__``). Then its own code, unchanged: ``eval.run_eval``
on each exp's task folder (no intermediate steps, as its command runs by default) scores each export's
``traces/step_final_files`` with the task's eval.py (-1 where there are none or eval.py raises), and its results are
written as its ``__main__`` writes them (``EnhancedJSONEncoder``); so each run's ``final_score``, ``score`` (the
final score alone, or empty), ``score_steps`` (empty), ``submitted_final_answer``, ``path`` and ``error`` are
eval.py's, read from the export, not from ``run.final_score`` (which is printed beside it).
``plot.get_all_runs_eval`` then runs as it is, its glob of its authors' ``/lfs/.../nlp_logs/*.json`` answered with
those files (nothing of its glue re-written), with ``print_labels`` given ``ours`` as a label (it keeps only the
exps it has labels for); then ``plot.get_all_runs_results``. Its error filter, ``final_score > 0`` rule, baseline
(the mean of the "Baseline" rows' kept final scores per task), ``max_score`` and ``get_improvement`` thresholds are
its own. Its figures are the means over an exp's rows: ``final_improve_10`` (success rate), ``final_improve`` (mean
improvement, missing values left out as pandas does) and ``improve_10`` (success at any point). One thing plot.py
does that is not used: its bar charts (``get_plot``) average a sample of at most 25 runs per task and exp (8 for
GPT-4 exps); here all rows. ``plot.error`` is also applied to each export to print what it says; eval.py's and
plot.py's own prints and pandas' warnings are silenced.

Compared: ``leaderboard_rows`` (anonymous viewer) and ``task_agent_rows`` of the task version, the agent's row,
under ``RankingOptions(counting="mlagentbench")`` against plot.py's "ours" exp; the baseline agent's task row
against its "Baseline" exp; and ``counting="mlagentbench-gpt4"`` against both GPT-4 exps (plot.py keeps their runs
that ended in an error). Per run: how it ended, ``error.txt`` in the export, whether MLAgentBench's runner would
have written one and final files (by its code: ``Environment.__exit__`` writes error.txt for an exception out of the
run, ``runner.run`` saves the final files only after it ends without one, and ``execute_script`` turns the time
limit's exception inside a script into an ``EnvError``), and each side's counted (C), kept score (S), success at the
end (W) and at any point (A).

    createdb -h 127.0.0.1 -U postgres countingbench
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/countingbench CELERY_BROKER_URL=redis://127.0.0.1:6379/0 \\
        .venv/bin/python benchmarks/mlagentbench_counting.py [--database-url URL] [--mirror PATH] [--keep]

``--database-url`` (else ``DATABASE_URL``, else a throwaway SQLite file) is migrated and written to: give it a
scratch database. Each invocation makes a new task version and agent version, so earlier invocations' runs in the same
database are not on the rows compared. ``--mirror`` is the bare git directory of snap-stanford/MLAgentBench.
``--keep`` keeps the exported tree and the var folder and says where they are.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
import types
import warnings
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scratch import ROOT, django_scratch, task_validated  # noqa: E402

MIRROR = "/work/.mirror/snap-stanford+MLAgentBench/repo"
SLUG = "counting-value"
AGENT_NAME = "counting-scripted"
OURS, BASELINE_EXP, GPT4_EXP, GPT4_AS_LEFT = "ours", "sanity_check", "no_retrieval_gpt4", "full_gpt4_long"
#: The exps' labels in plot.py's tables, by folder: its own for the baseline and GPT-4 exps, ours given. It keeps
#: the errors of both GPT-4 exps and strips "_long" from the second before it looks its label up.
LABELS = {OURS: "Ours", BASELINE_EXP: "Baseline", GPT4_EXP: "GPT-4", GPT4_AS_LEFT: "GPT-4 (final files as left)"}
LABELS_ADDED = {OURS: LABELS[OURS], GPT4_AS_LEFT.removesuffix("_long"): LABELS[GPT4_AS_LEFT]}
#: What plot.py's get_all_runs_eval globs for eval.py's result files (its authors' folder).
LFS_RESULTS = "/lfs/local/0/qhwang/nlp_logs/*.json"
STUBBABLE = ("tiktoken", "matplotlib", "matplotlib.pyplot", "seaborn", "anthropic")
FIGURES = ("runs", "success_rate", "mean_improvement", "any_step_rate")
TOLERANCE = 1e-9
PLOT_THRESHOLD = 0.10

# ---------------------------------------------------------------------------------------------------- the task

PACKAGE = {
    "task.toml": (
        'title = "Counting"\ncategory = "canonical"\n[metric]\nname = "value"\nhigher_is_better = true\n'
        "[limits]\nmax_steps = 20\nmax_time_s = 600\n"
    ),
    "scripts/research_problem.txt": "Make value.txt hold a larger number than train.py writes.\n",
    "scripts/eval.py": (
        "import os\n\n\ndef get_score(submission_folder='../env'):\n"
        "    with open(os.path.join(submission_folder, 'value.txt')) as fh:\n"
        "        return float(fh.read())\n"
    ),
    "env/train.py": (
        "import random\n\n# A score that varies a little from run to run, as a training script's does.\n"
        "with open('value.txt', 'w') as fh:\n    fh.write(f'{random.uniform(0.49, 0.51):.6f}')\n"
    ),
}


def task_write(root: Path, stamp: str) -> Path:
    """The task package; ``stamp`` makes each invocation a new task version."""
    for rel, text in {**PACKAGE, "scripts/invocation.txt": stamp + "\n"}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


# ---------------------------------------------------------------------------------------------------- the runs


def act(action: str, **args) -> dict:
    return {"type": "act", "action": action, "input": args, "entries": {"Thought": f"{action} next"}}


def value(number: float | str) -> dict:
    return act("Write File", file_name="value.txt", content=str(number))


FINAL = act("Final Answer", final_answer="value.txt holds my answer")
ASLEEP = {"probe": "__import__('time').sleep(120)"}  # the agent thinks past the time limit
SLOW_SCRIPT = act("Write File", file_name="slow.py", content="import time\ntime.sleep(120)\n")


@dataclass
class Case:
    """A run to make: its label, the scripted agent's script (None: the built-in baseline agent), its limits, and
    whether MLAgentBench's runner would end such a run with error.txt (and so without final files)."""

    label: str
    script: list | None
    limits: dict = field(default_factory=dict)
    mlab_error: bool = False


BASELINE_CASES = [
    Case("baseline: train.py, Final Answer", None),
    Case("baseline: train.py, Final Answer", None),
    Case("baseline: train.py, Final Answer", None),
    Case("baseline: step limit 2, after train.py", None, {"max_steps": 2}),
    Case("baseline: step limit 1, before train.py", None, {"max_steps": 1}),
]


def agent_cases(edge: float) -> list[Case]:
    return [
        Case("Final Answer, 0.9 (above the baseline)", [value(0.9), FINAL]),
        Case("Final Answer, 0.3 (below the baseline)", [value(0.3), FINAL]),
        Case(f"Final Answer, {edge} (between 10 % marks)", [value(edge), FINAL]),
        Case("step limit (3), 0.9", [value(0.9)] + [act("List Files", dir_path=".")] * 6, {"max_steps": 3}),
        Case("agent returned, exit 0, 0.8", [value(0.8), {"exit": 0, "stderr": "no valid response after 5 tries"}]),
        Case("agent crashed, exit 1, 0.9", [value(0.9), {"exit": 1, "stderr": "Traceback: boom"}], mlab_error=True),
        Case("time limit between steps, 0.9", [value(0.9), ASLEEP, FINAL], {"max_time_s": 6}, mlab_error=True),
        Case(
            "time limit inside Execute Script, 0.9",
            [value(0.9), SLOW_SCRIPT, act("Execute Script", script_name="slow.py"), FINAL],
            {"max_time_s": 6},
        ),
        Case("Final Answer, 0", [value(0), FINAL]),
        Case("Final Answer, -1", [value(-1), FINAL]),
        Case("Final Answer, no value.txt", [act("List Files", dir_path="."), FINAL]),
    ]


def task_ready(package: Path):
    """The task imported and validated here (its baseline measured by the validation round)."""
    version = task_validated(package, SLUG)
    if version.status != "ready":
        raise SystemExit(f"the task did not validate: {version.status}\n{version.validation_log}")
    return version


def case_run(case: Case, version, agent):
    """One run of the case, executed here; the scripted agent's config set to the case's script first."""
    from runner.execution import run_execute
    from runner.models import RunLimits
    from runner.services import run_create

    if case.script is not None:
        agent.config = {"script": case.script}
        agent.save(update_fields=["config"])
    run = run_create(task=version.task, agent=agent, version=version, enqueue=False, limits=RunLimits(**case.limits))
    return run_execute(run.pk)


def edge_score(version) -> tuple[float, float, float]:
    """A score between 1.1 × the counting's baseline (the mean of the baseline agent's runs) and 1.1 × the validated
    one; and those two baselines."""
    from leaderboard.sums import plot_baseline
    from runner.models import Run

    counted = Run.objects.filter(task_version=version).annotate(b=plot_baseline()).values_list("b", flat=True)[0]
    validated = version.baseline_score
    return round((1 + PLOT_THRESHOLD) * (counted + validated) / 2, 6), counted, validated


# ---------------------------------------------------------------------------------------------------- exports


def export_tree(runs_by_exp: dict[str, list], root: Path, zips: Path) -> dict[int, Path]:
    """Each run's ``log_export`` zip unzipped into ``root/<exp>/<slug>/``; the trace.json path of each run (its
    first exp's). In ``GPT4_AS_LEFT`` a run whose export has error.txt loses its ``traces/step_final_files``, as
    MLAgentBench's runner leaves such a run (its ``run`` saves the final files only after the run ended cleanly)."""
    from runner.logs.exports import log_export

    zips.mkdir(parents=True, exist_ok=True)
    traces: dict[int, Path] = {}
    for exp, runs in runs_by_exp.items():
        for run in runs:
            archive = zips / f"run-{run.pk}.zip"
            if not archive.exists():
                log_export(run=run, out=archive)
            with zipfile.ZipFile(archive) as zipped:
                zipped.extractall(root / exp / SLUG)
            env_log = root / exp / SLUG / f"run-{run.pk}" / "env_log"
            if exp == GPT4_AS_LEFT and (env_log / "error.txt").exists():
                shutil.rmtree(env_log / "traces" / "step_final_files", ignore_errors=True)
            traces.setdefault(run.pk, root / exp / SLUG / f"run-{run.pk}" / "env_log" / "trace.json")
    return traces


# ------------------------------------------------------------------------------------------ MLAgentBench's code


def stub_missing(names: tuple[str, ...]) -> list[str]:
    """An empty module for each of ``names`` that does not import here (only so that eval.py and plot.py import)."""
    stubbed = []
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError:
            module = sys.modules[name] = types.ModuleType(name)
            parent, _, child = name.rpartition(".")
            if parent:
                setattr(sys.modules[parent], child, module)
            stubbed.append(name)
    return stubbed


def mlagentbench_load(mirror: str, dest: Path, task_root: Path) -> tuple[types.ModuleType, types.ModuleType, list]:
    """MLAgentBench's eval.py and plot.py as the mirror's HEAD has them, imported from ``dest/MLAgentBench``."""
    package = dest / "MLAgentBench"
    package.mkdir(parents=True)
    for rel in ("__init__.py", "eval.py", "plot.py"):
        text = subprocess.run(
            ["git", f"--git-dir={mirror}", "show", f"HEAD:MLAgentBench/{rel}"], check=True, capture_output=True
        ).stdout
        (package / rel).write_bytes(text)
    shutil.copytree(task_root / "scripts", package / "benchmarks" / SLUG / "scripts")
    os.environ.setdefault("MPLBACKEND", "Agg")
    stubbed = stub_missing(STUBBABLE)
    sys.path.insert(0, str(dest))
    importlib.invalidate_caches()
    mlagentbench = importlib.import_module("MLAgentBench")
    if not str(mlagentbench.__file__).startswith(str(dest)):
        raise SystemExit(f"another MLAgentBench is importable here: {mlagentbench.__file__}")
    environment = sys.modules["MLAgentBench.environment"] = types.ModuleType("MLAgentBench.environment")

    def get_task_info(task):
        raise NotImplementedError("MLAgentBench.environment is a stand-in here")

    environment.get_task_info = get_task_info
    stubbed.append("MLAgentBench.environment")
    return importlib.import_module("MLAgentBench.eval"), importlib.import_module("MLAgentBench.plot"), stubbed


class EvalResultFiles:
    """Stands for the ``glob`` module in plot.py: its get_all_runs_eval globs its authors' folder of eval.py's
    results, which is answered with ours; any other glob is refused, so nothing else is silently redirected."""

    def __init__(self, files: list[Path]) -> None:
        self.files = files

    def glob(self, pattern: str) -> list[str]:
        if pattern != LFS_RESULTS:
            raise RuntimeError(f"plot.py globbed {pattern!r}, which this benchmark does not answer")
        return [str(path) for path in self.files]


def mlagentbench_tables(mlab_eval, plot, root: Path, out: Path) -> tuple:
    """eval.py's run_eval on each exp's task folder, written as its command writes them; then plot.py's
    get_all_runs_eval and get_all_runs_results on those files. Returns (its results table, its baseline table,
    eval.py's results by trace path)."""
    out.mkdir(parents=True, exist_ok=True)
    files, evaluated = [], {}
    silenced = io.StringIO()
    with contextlib.redirect_stdout(silenced), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for exp in sorted(p.name for p in root.iterdir()):
            results = mlab_eval.run_eval(str(root / exp / SLUG), SLUG)
            path = out / f"{exp}.json"
            path.write_text(json.dumps(results, indent=4, cls=mlab_eval.EnhancedJSONEncoder))
            files.append(path)
            evaluated.update(json.loads(path.read_text()))
        plot.glob = EvalResultFiles(files)
        labels = {**plot.print_labels, **LABELS_ADDED}
        df, baseline = plot.get_all_runs_eval(print_labels=labels)
        results = plot.get_all_runs_results(df=df, baseline=baseline, print_labels=labels)
    return results, baseline, evaluated


def as_number(value) -> float | None:
    """A figure as a float, pandas' missing values (NaN, None) as None."""
    if value is None:
        return None
    number = float(value)
    return None if math.isnan(number) else number


def plot_figures(results, exp: str) -> dict:
    """plot.py's figures of one exp on the task: its rows, and the means of their success and improvement columns."""
    import pandas as pd

    rows = results[(results["exp"] == LABELS[exp]) & (results["task"] == SLUG)]

    def mean(column: str) -> float | None:
        return as_number(pd.to_numeric(rows[column], errors="coerce").astype(float).mean()) if len(rows) else None

    return {
        "runs": len(rows),
        "success_rate": mean("final_improve_10"),
        "mean_improvement": mean("final_improve"),
        "any_step_rate": mean("improve_10"),
    }


def plot_flags(results, exp: str) -> dict[int, str]:
    """Per run (by id) what plot.py's table of the exp says: C counted, S a final score kept, W success at the end,
    A success at any point."""
    flags = {}
    for _, row in results[(results["exp"] == LABELS[exp]) & (results["task"] == SLUG)].iterrows():
        run_id = int(str(row["run"]).removeprefix("run-"))
        flags[run_id] = "C" + flag("S", as_number(row["final_score"]) is not None)
        flags[run_id] += flag("W", bool(row["final_improve_10"])) + flag("A", bool(row["improve_10"]))
    return flags


def flag(letter: str, on: bool) -> str:
    return letter if on else "."


# ---------------------------------------------------------------------------------------------- the platform


def platform_rows(counting: str, version, agent) -> dict[str, dict | None]:
    """The entrant's row of leaderboard_rows and of task_agent_rows (the version) under ``counting``."""
    from django.contrib.auth.models import AnonymousUser

    from leaderboard.query import RankingOptions
    from leaderboard.selectors import leaderboard_rows, task_agent_rows

    options = RankingOptions(counting=counting)

    def mine(rows: list[dict]) -> dict | None:
        return next((r for r in rows if (r["agent__name"], r["agent__version"]) == (agent.name, agent.version)), None)

    return {
        "leaderboard_rows": mine(leaderboard_rows(viewer=AnonymousUser(), options=options)),
        "task_agent_rows": mine(task_agent_rows(viewer=AnonymousUser(), version=version, options=options)),
    }


def platform_flags(counting: str, run_ids: list[int]) -> tuple[dict[int, str], float | None]:
    """Per run what the counting says (C counted, S score kept, W success at the end, A at any step: the filters
    the leaderboard's sums use, ``counted_runs`` and ``sums_of``), and the plot.py baseline it annotates."""
    from django.contrib.auth.models import AnonymousUser
    from django.db.models import Q

    from leaderboard.query import RankingOptions
    from leaderboard.selectors import counted_runs, scores_counted
    from leaderboard.sums import PLOT_SUCCESS

    options = RankingOptions(counting=counting)
    runs, counted = counted_runs(viewer=AnonymousUser(), options=options)
    runs = runs.filter(pk__in=run_ids)
    scored = counted & scores_counted(options)

    def ids(condition: Q) -> set[int]:
        return set(runs.filter(condition).values_list("pk", flat=True))

    c, s = ids(counted), ids(scored)
    w, a = ids(scored & Q(plot_improvement__gt=PLOT_SUCCESS)), ids(counted & Q(plot_best_improvement__gt=PLOT_SUCCESS))
    flags = {pk: flag("C", pk in c) + flag("S", pk in s) + flag("W", pk in w) + flag("A", pk in a) for pk in run_ids}
    baseline = runs.values_list("plot_baseline", flat=True).first()
    return flags, baseline


# ---------------------------------------------------------------------------------------------------- printing


def shown(value) -> str:
    if value is None:
        return "none"
    if isinstance(value, int):  # bool too
        return str(value)
    return f"{value:.12g}"


def same(a, b) -> bool:
    a, b = as_number(a), as_number(b)
    if a is None or b is None:
        return a is None and b is None
    return abs(a - b) <= TOLERANCE


def compare_rows(title: str, mlab: dict, ours: dict[str, dict | None]) -> list[str]:
    """Print plot.py's figures beside the platform's rows; returns the mismatches."""
    names = list(ours)
    print(f"\n{title}")
    print(f"  {'figure':<18}{'plot.py':>18}" + "".join(f"{n:>20}" for n in names) + "   match")
    mismatches = []
    for figure in FIGURES:
        values = [row.get(figure) if row is not None else None for row in ours.values()]
        matches = [same(mlab[figure], v) for v in values]
        verdict = "yes" if all(matches) else "NO"
        print(f"  {figure:<18}{shown(mlab[figure]):>18}" + "".join(f"{shown(v):>20}" for v in values) + f"   {verdict}")
        mismatches += [f"{title}: {figure} plot.py {shown(mlab[figure])} against {n} {shown(v)}"
                       for n, v, ok in zip(names, values, matches, strict=True) if not ok]  # fmt: skip
    missing = [n for n, row in ours.items() if row is None]
    if missing:
        print(f"  (no row in {', '.join(missing)})")
    return mismatches


def short(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def print_runs(entries: list[dict], plot, evaluated: dict) -> list[str]:
    """How each run ended, what its export holds, what plot.py's error() and eval.py say of it; returns where the
    export differs from what MLAgentBench's runner would have written."""
    print("\nRuns: how each ended (the platform's status and error), its export (error.txt E, final files F), what")
    print("MLAgentBench's runner would have written for that ending, plot.py's error() on the export, eval.py's final")
    print("score of the export (-1: none) and run.final_score")
    print(f"  {'run':>5}  {'case':<44}{'ended':<66}{'export':<8}{'MLAB':<6}{'error()':<9}{'eval.py':>10}{'run':>10}")
    differences = []
    for e in entries:
        run, case, trace = e["run"], e["case"], e["trace"]
        env_log = trace.parent
        final_files = (env_log / "traces" / "step_final_files").is_dir()
        exported = flag("E", (env_log / "error.txt").exists()) + flag("F", final_files)
        mlab = flag("E", case.mlab_error) + flag("F", not case.mlab_error)
        ended = short(f"{run.status}: {run.error}" if run.error else run.status, 64)
        score = evaluated[str(trace)]["final_score"]
        print(f"  {run.pk:>5}  {short(case.label, 43):<44}{ended:<66}{exported:<8}{mlab:<6}"
              f"{str(plot.error(str(trace))):<9}{shown(score):>10}{shown(run.final_score):>10}")  # fmt: skip
        if exported != mlab:
            differences.append(f"run {run.pk} ({case.label}): export {exported}, MLAgentBench would write {mlab}")
        if not (same(score, run.final_score) or (score == -1 and run.final_score is None)):
            differences.append(f"run {run.pk} ({case.label}): eval.py {shown(score)}, run {shown(run.final_score)}")
    return differences


def print_counted(name: str, title: str, entries: list[dict], mlab: dict[int, str], ours: dict[int, str]) -> list[str]:
    """Per run, plot.py's flags and the counting's side by side; returns the runs where they differ."""
    print(f"\n{name}: {title}")
    print(f"  {'run':>5}  {'case':<44}{'plot.py':<9}{'ours':<9}same")
    differences = []
    for e in entries:
        pk = e["run"].pk
        theirs, mine = mlab.get(pk, "...."), ours.get(pk, "....")
        print(f"  {pk:>5}  {short(e['case'].label, 43):<44}{theirs:<9}{mine:<9}{'yes' if theirs == mine else 'NO'}")
        if theirs != mine:
            differences.append(f"{name}: run {pk} ({e['case'].label}) plot.py {theirs}, ours {mine}")
    return differences


# ---------------------------------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mirror", default=MIRROR, help="bare git directory of snap-stanford/MLAgentBench")
    parser.add_argument("--database-url", default=os.environ.get("DATABASE_URL", ""), help="a scratch database")
    parser.add_argument("--keep", action="store_true", help="keep the exported tree and the var folder")
    args = parser.parse_args()
    os.environ.setdefault("BENCH_SANDBOX", "bwrap")
    os.environ.setdefault("CELERY_BROKER_URL", "redis://127.0.0.1:6379/0")
    os.environ.setdefault("LOG_LEVEL", "WARNING")  # each run's end is in the table printed
    commit = subprocess.run(
        ["git", f"--git-dir={args.mirror}", "rev-parse", "--short", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()
    stamp = time.strftime("%Y%m%d%H%M%S") + f"-{os.getpid()}"
    tmp = Path(tempfile.mkdtemp(prefix="counting-"))
    var = django_scratch("counting-", args.database_url)
    try:
        measure(args, tmp, stamp, commit)
    finally:
        if args.keep:
            print(f"\nKept: {tmp} (exports under logs/, eval.py's results under evals/) and {var}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
            shutil.rmtree(var, ignore_errors=True)


def measure(args: argparse.Namespace, tmp: Path, stamp: str, commit: str) -> None:
    from django.conf import settings
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from runner.agents.builtin import agents_builtin_ensure
    from runner.models import Agent

    started = time.monotonic()
    task_root = task_write(tmp / "task" / SLUG, stamp)
    version = task_ready(task_root)
    baseline_agent = next(a for a in agents_builtin_ensure() if a.name == "baseline")
    entries = [
        {"case": case, "exp": BASELINE_EXP, "run": case_run(case, version, baseline_agent)} for case in BASELINE_CASES
    ]
    edge, counted_baseline, validated = edge_score(version)
    agent = Agent.objects.create(
        name=AGENT_NAME, version=stamp, kind=Agent.Kind.PACKAGE, entrypoint="scripted_agent",
        package_path=str(ROOT / "tests" / "agents"), description="mlagentbench_counting.py's scripted runs",
    )  # fmt: skip
    entries += [{"case": case, "exp": OURS, "run": case_run(case, version, agent)} for case in agent_cases(edge)]
    platform_seconds = time.monotonic() - started

    root = tmp / "logs"
    by_exp = {
        BASELINE_EXP: [e["run"] for e in entries if e["exp"] == BASELINE_EXP],
        OURS: [e["run"] for e in entries if e["exp"] == OURS],
    }
    by_exp[GPT4_EXP] = by_exp[GPT4_AS_LEFT] = by_exp[OURS]
    traces = export_tree(by_exp, root, tmp / "zips")
    for e in entries:
        e["trace"] = traces[e["run"].pk]
    mlab_eval, plot, stubbed = mlagentbench_load(args.mirror, tmp / "mlagentbench", task_root)
    results, baseline_table, evaluated = mlagentbench_tables(mlab_eval, plot, root, tmp / "evals")

    engine = settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]
    print(f"MLAgentBench {commit} (eval.py, plot.py) against the platform ({engine}, sandbox {settings.BENCH_SANDBOX})")
    print(f"Task {SLUG} v{version.number}; agent {agent}; {len(entries)} runs made in {platform_seconds:.1f} s")
    print(f"Stand-ins for import only: {', '.join(stubbed)}")
    plot_baseline_value = baseline_table[baseline_table["task"] == SLUG]["final_score"]
    plot_baseline_value = as_number(plot_baseline_value.iloc[0]) if len(plot_baseline_value) else None
    print(f"Baselines: plot.py's (mean of the Baseline exp's kept final scores) {shown(plot_baseline_value)}; the "
          f"counting's (plot_baseline) {shown(counted_baseline)}; validated {shown(validated)}; the third "
          f"Final Answer's score {edge} lies between their 10 % marks")  # fmt: skip
    differences = print_runs(entries, plot, evaluated)

    mismatches = []
    agent_entries = [e for e in entries if e["exp"] == OURS]
    baseline_entries = [e for e in entries if e["exp"] == BASELINE_EXP]
    for counting, exp in (("mlagentbench", OURS), ("mlagentbench-gpt4", GPT4_EXP), ("mlagentbench-gpt4", GPT4_AS_LEFT)):
        rows = platform_rows(counting, version, agent)
        title = f"Agent row, ?counting={counting} against plot.py's {exp} exp ({LABELS[exp]})"
        mismatches += compare_rows(title, plot_figures(results, exp), rows)
        flags, annotated = platform_flags(counting, [e["run"].pk for e in agent_entries])
        mismatches += print_counted(
            f"{counting} / {exp}",
            f"which runs each side counted (C counted, S final score kept, W success at the end, "
            f"A at any point; the counting's baseline {shown(annotated)})",
            agent_entries,
            plot_flags(results, exp),
            flags,
        )
    baseline_rows = platform_rows("mlagentbench", version, baseline_agent)
    baseline_rows.pop("leaderboard_rows")  # over every task the baseline agent ran, not only this one
    mismatches += compare_rows(
        "Baseline agent's task row, ?counting=mlagentbench against plot.py's Baseline exp",
        plot_figures(results, BASELINE_EXP),
        baseline_rows,
    )
    flags, _ = platform_flags("mlagentbench", [e["run"].pk for e in baseline_entries])
    mismatches += print_counted(
        "mlagentbench, baseline agent", "which runs each side counted", baseline_entries,
        plot_flags(results, BASELINE_EXP), flags,
    )  # fmt: skip

    print("\nExports against what MLAgentBench's runner writes, and eval.py against run.final_score:")
    print("\n".join(f"  {d}" for d in differences) or "  no difference")
    print(f"\nMismatches: {len(mismatches)}")
    for mismatch in mismatches:
        print(f"  {mismatch}")


if __name__ == "__main__":
    main()
