"""The environment: executes one action on one run's workspace and says what happened.

It is trusted code running in the worker. File actions act on the workspace directly with strict path checks;
code actions run in the sandbox. It knows nothing of the database: the run service records what it returns.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from task_bank.package import is_read_only

from ..sandbox import Limits, Mount, Sandbox, folder_mounts
from ..sandbox.base import KeptSandbox
from ..sandbox.process import HeadTail
from ..workspace import fs
from .catalogue import BY_NAME, EXECUTE_SCRIPT, FINAL_ANSWER, PYTHON_REPL, READ_FILE, ActionSpec, usage_text
from .handlers import HANDLERS, HIGH_LEVEL_HANDLERS, LLM_HANDLERS, LOW_LEVEL_HANDLERS
from .repl import Repl
from .types import WORKSPACE, ActionOutcome, EnvError

# Actions that run code in the sandbox: what it writes cannot be judged by a file's stat key.
SANDBOXED_ACTIONS = frozenset({EXECUTE_SCRIPT, PYTHON_REPL})
# Room for the words an action puts around bounded output ("The script has been executed...", exit notes).
WRAPPER_ROOM = 1000
#: The actions an agent's own code may carry out itself (``Environment.made``), and how many low-level actions one
#: such step may take through the platform (MLAgentBench's take at most three).
MADE_BY_AGENT = frozenset(HIGH_LEVEL_HANDLERS)
MAX_LOW_PER_STEP = 10
#: Where a task's own packages are in its sandboxes (runner/execution/task_packages.py installs them).
PACKAGES_TARGET = "/opt/task-packages"
#: Where the module that hides the platform's packages is, for a task whose packages are its whole environment.
ALONE_TARGET = "/opt/mlab/alone"
ALONE_DIR = Path(__file__).resolve().parent.parent / "harness" / "alone"


@dataclass(frozen=True)
class TaskPackages:
    """A task's own packages, installed (``execution/task_packages.py``): their folder, and whether they are its
    whole environment (``alone``: the platform's own site-packages hidden from its code) or added to the
    platform's."""

    folder: Path
    alone: bool = False


@dataclass
class Environment:
    workspace: Path
    sandbox: Sandbox
    read_only_patterns: list[str] = field(default_factory=list)
    read_only_files: list[str] = field(default_factory=list)
    limits: Limits = field(default_factory=Limits)
    action_timeout_s: float = 1800
    observation_limit: int = 20_000
    on_output: Callable[[str, bytes], None] | None = None
    tick: Callable[[], None] | None = None
    python: str = "python"
    cpus: int = 1
    research_problem: str = ""
    #: llm(messages, purpose, options) -> text, for the LLM-backed actions; None = the run has no model.
    llm: Callable[[list[dict], str, dict], str] | None = None
    workspace_limit_mb: int = 2048
    #: Package data the task is built from, masked in the workspace's sandbox (sandbox/masks.py).
    masks: list[Mount] = field(default_factory=list)
    #: The task's own packages (``execution/task_packages.py``), mounted at PACKAGES_TARGET, first on the path.
    packages: TaskPackages | None = None
    keeps_backups: bool = True  # False only while an agent's own high-level action takes a low-level one

    def __post_init__(self) -> None:
        self.workspace = Path(self.workspace)
        # Actions that need an LLM are offered only when the run has a model.
        self.handlers: dict[str, Callable[..., ActionOutcome | str]] = {
            **HANDLERS,
            **(LLM_HANDLERS if self.llm is not None else {}),
        }
        self.low_level: list[dict] = []
        self._repl: Repl | None = None
        self._kept: KeptSandbox | None = None  # the sandbox kept for this run's scripts, where there is one
        self._kept_asked = False
        self._sandbox_ran = True  # until the first snapshot says otherwise
        self._walk = fs.FolderWalk(self.workspace)

    # -- building blocks for high-level actions --------------------------------------------------------------
    def low(self, name: str, args: dict) -> str:
        """Run a low-level action as part of the current one and record it under the step."""
        handler = LOW_LEVEL_HANDLERS[name]
        try:
            observation = handler(self, **args)
        except EnvError as exc:
            self.low_level.append({"action": name, "input": args, "observation": f"EnvError: {exc}"[:2000]})
            raise
        self.low_level.append({"action": name, "input": _short(args), "observation": observation[:2000]})
        return observation

    def low_read_or_empty(self, file_name: str) -> str:
        return self.low(READ_FILE, {"file_name": file_name}) if self.kind(file_name) != "missing" else ""

    def ask(self, prompt: str, purpose: str, options: dict) -> str:
        if self.llm is None:
            raise EnvError("this run has no model, so actions that need an LLM are not available")
        return self.llm([{"role": "user", "content": prompt}], purpose, options)

    def repl(self) -> Repl:
        if self._repl is None:
            self._repl = Repl(self)
        return self._repl

    def sandbox_may_have_written(self) -> bool:
        """Whether sandboxed code may have written the workspace since the last call: a code action ran, or a
        REPL (and any thread it left) is alive. A snapshot then re-hashes every file it cannot trust."""
        ran = self._sandbox_ran or (self._repl is not None and self._repl.proc is not None)
        self._sandbox_ran = False
        return ran

    def close(self) -> None:
        if self._repl is not None:
            self._repl.close()
        if self._kept is not None:
            self._kept.close()

    def kept_sandbox(self) -> KeptSandbox | None:
        """The sandbox kept for the run's scripts (made once, with the mounts the workspace has now), or None where
        the backend starts one per script."""
        if not self._kept_asked:
            self._kept_asked = True
            self._kept = self.sandbox.keep(mounts=self.mounts(), limits=self.limits)
        return self._kept

    def kept_sandbox_launch(self) -> None:
        """Start the sandbox kept for the run's scripts now, without waiting for it, so that the first script finds
        it ready (the session calls this as the agent starts, once the workspace is laid out). ``close`` ends it,
        whether a script ran in it or not; nothing where the backend keeps no sandbox."""
        kept = self.kept_sandbox()
        if kept is not None:
            kept.launch()

    def script_process(self, argv: list[str]):
        """Start a script in the workspace sandbox: the one kept for the run where the backend keeps one, else a
        new one. A kept sandbox that was lost is started again here."""
        kept = self.kept_sandbox()
        if kept is not None:
            return kept.popen(
                argv, cwd=WORKSPACE, env=self.sandbox_env(), limits=self.limits, timeout=self.action_timeout_s
            )
        return self.sandbox.popen(argv, mounts=self.mounts(), cwd=WORKSPACE, env=self.sandbox_env(), limits=self.limits)

    def workspace_size_mb(self) -> float:
        """Disk space of what the agent put in the workspace: the blocks its files occupy (a sparse file counts
        what it really holds; the task's read-only files do not count). A workspace too deep or with too many
        files to walk raises fs.WalkLimitError: it fails closed, never counted short."""
        skip = set(self.read_only_files)
        total = 0
        for folder in self._walk.folders():  # a folder whose entries did not change: its read-only files not looked at
            names = folder.listing.files
            if folder.trusted:
                names = folder.listing.derived.get("counted")
                if names is None:
                    names = [n for n in folder.listing.files if folder.prefix + n not in skip]
                    folder.listing.derived["counted"] = names
            for name in names:
                if folder.prefix + name in skip:
                    continue
                try:
                    st = os.stat(name, dir_fd=folder.fd, follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISREG(st.st_mode):
                    total += st.st_blocks * 512
        return total / (1024 * 1024)

    @property
    def action_names(self) -> list[str]:
        return [name for name in BY_NAME if name in self.handlers]

    # -- paths ---------------------------------------------------------------------------------------------
    def name(self, rel: str) -> str:
        """The normalised relative path of a file in the workspace ("." for the workspace itself), or EnvError.
        Only names are checked here; every operation then walks the path without following links (fs)."""
        if not isinstance(rel, str) or rel.strip() == "":
            raise EnvError("the file name is empty; give a path relative to the current directory")
        try:
            parts = fs.split(rel)
        except fs.UnsafePath as exc:
            if "absolute" in str(exc) or "'..'" in str(exc):
                raise EnvError(f"cannot access file {rel} because it is not in the work directory.") from None
            raise EnvError(f"cannot access file {rel!r}: {exc}") from None
        return "/".join(parts) or "."

    def kind(self, rel: str) -> str:
        """'file', 'dir', 'missing', or 'other' (a link or special file) for a workspace path."""
        return fs.kind(self.workspace, self.name(rel))

    @property
    def owner(self) -> tuple[int, int] | None:
        """Files the environment writes belong to the sandbox user, like the agent's own files."""
        return self.sandbox.ids

    def check_writable(self, rel: str, name: str | None = None) -> None:
        name = name or self.name(rel)
        if is_read_only(name, self.read_only_patterns) or name in self.read_only_files:
            raise EnvError(f"cannot write file {rel} because it is a read-only file.")

    # -- sandbox -------------------------------------------------------------------------------------------
    def mounts(self) -> list[Mount]:
        """The workspace read-write, with the task's read-only files bound read-only on top, and the package data
        the task is built from masked."""
        return [*folder_mounts(self.workspace, WORKSPACE, self.read_only_files), *self.code_mounts]

    @property
    def code_mounts(self) -> list[Mount]:
        """What the workspace's code sees besides the workspace: the masks, and the task's packages."""
        return [*self.masks, *packages_mounts(self.packages)]

    def sandbox_env(self) -> dict[str, str]:
        return script_env(cpus=self.cpus, gpus=self.limits.gpus) | packages_env(self.packages)

    # -- execution -----------------------------------------------------------------------------------------
    def validate_input(self, spec: ActionSpec, action_input: object) -> dict:
        usage = usage_text(spec)
        if not isinstance(action_input, dict):
            raise EnvError(
                f"The action input for {spec.name} needs to be a valid json with proper entries. You may have "
                f"missed the comma between entries. Please use the correct format and try again:\n{usage}"
            )
        missing = [k for k in spec.usage if k not in action_input]
        extra = [k for k in action_input if k not in spec.usage]
        if missing or extra:
            parts = []
            if missing:
                parts.append("missing " + ", ".join(missing))
            if extra:
                parts.append("unexpected " + ", ".join(extra))
            raise EnvError(
                f"The action input for {spec.name} has {'; '.join(parts)}. "
                f"Please use the correct format and try again:\n{usage}"
            )
        clean = {}
        for key, value in action_input.items():
            if key in spec.int_args:
                try:
                    clean[key] = int(str(value).strip())
                except ValueError:
                    raise EnvError(
                        f"The action input for {spec.name}: {key} must be a whole number, got {value!r}. "
                        f"Please use the correct format and try again:\n{usage}"
                    ) from None
            elif not isinstance(value, str):
                raise EnvError(
                    f"The action input for {spec.name}: {key} must be a string, got {type(value).__name__}. "
                    f"Please use the correct format and try again:\n{usage}"
                )
            else:
                clean[key] = value
        return clean

    def bound(self, observation: str) -> tuple[str, str | None]:
        """Cut an observation over the limit to its head and tail. Script output is bounded as it streams (and
        says how much was cut), so the few words around it must not cut it a second time."""
        if len(observation) <= self.observation_limit + WRAPPER_ROOM:
            return observation, None
        keeper = HeadTail(self.observation_limit)
        keeper.write(observation.encode())
        return keeper.text(), observation

    def execute(self, name: str, action_input: object) -> ActionOutcome:
        started = time.monotonic()
        spec = BY_NAME.get(name) if isinstance(name, str) else None
        if spec is None or name not in self.handlers:
            names = ", ".join(self.action_names)
            outcome = ActionOutcome(
                f"Invalid action: {name}. Action did not execute. Please use one of the following actions:\n{names}",
                error=True,
            )
        else:
            if spec.name in SANDBOXED_ACTIONS:
                self._sandbox_ran = True
            outcome = _carried_out(name, lambda: self.handlers[name](self, **self.validate_input(spec, action_input)))
        outcome.detail.setdefault("duration_s", round(time.monotonic() - started, 3))
        return self.ended(name, outcome)

    def low_request(self, name: object, action_input: object) -> ActionOutcome:
        """A low-level action the agent's own code takes inside one of its high-level actions (``made``): carried
        out as any action, recorded under the step that action becomes."""
        if name not in LOW_LEVEL_HANDLERS:
            names = ", ".join(LOW_LEVEL_HANDLERS)
            return ActionOutcome(f"EnvError: {name} is not a low-level action; these are: {names}.", error=True)
        if len(self.low_level) >= MAX_LOW_PER_STEP:
            return ActionOutcome(
                f"EnvError: a step may take at most {MAX_LOW_PER_STEP} low-level actions; take the step first.",
                error=True,
            )
        self.keeps_backups = False  # its own code keeps its backups, as MLAgentBench's edit actions do
        try:
            return _carried_out(name, lambda: self.low(name, self.validate_input(BY_NAME[name], action_input)))
        finally:
            self.keeps_backups = True

    def made(self, name: str, action_input: object, observation: str) -> ActionOutcome:
        """A high-level action the agent's own code carried out (MLAgentBench's agents run their package's own
        Understand File, Edit Script (AI), ...): its observation as the agent made it, with the low-level actions it
        took (``low_request``). A low-level action may not be made so: what a script printed, or a file held, is
        always the platform's to say. A name the run does not offer is recorded as the agent's error (its own code
        said what was wrong)."""
        if name in self.handlers and name not in MADE_BY_AGENT:
            outcome = ActionOutcome(
                f"EnvError: {name} cannot bring its own observation; only these high-level actions can: "
                + ", ".join(n for n in self.action_names if n in MADE_BY_AGENT),
                error=True,
            )
        else:
            offered = name in self.handlers
            error = not offered or observation.startswith("EnvError")
            outcome = ActionOutcome(observation, error=error, detail={"made_by": "agent"})
        return self.ended(name, outcome)

    def ended(self, name: str, outcome: ActionOutcome) -> ActionOutcome:
        """The outcome as recorded: bounded, with its low-level actions, and a warning past the workspace's limit."""
        outcome.observation, outcome.full_observation = self.bound(outcome.observation)
        outcome.low_level = outcome.low_level or self.low_level
        self.low_level = []
        if name != FINAL_ANSWER and self.workspace_limit_mb:
            size = self.workspace_size_mb()
            if size > self.workspace_limit_mb:
                stopped = self._repl is not None and self._repl.proc is not None
                self.close()  # a REPL's background threads may be what keeps writing
                outcome.observation += (
                    f"\n\nWarning: the workspace holds {size:.0f} MB, over its limit of {self.workspace_limit_mb} MB. "
                    + ("The Python REPL was stopped (its variables are gone). " if stopped else "")
                    + "Scripts that write more will be stopped; delete files you do not need."
                )
        return outcome


def _carried_out(name: str, handle: Callable[[], ActionOutcome | str]) -> ActionOutcome:
    """The outcome of ``handle()``, an action's handler called on its checked input; what the agent's input or its
    files made fail is an error observation for the agent to see, not a crash."""
    try:
        result = handle()
    except EnvError as exc:
        return ActionOutcome(f"EnvError: {exc}", error=True)
    except fs.UnsafePath as exc:
        return ActionOutcome(f"EnvError: the action cannot be done on that path: {exc}.", error=True)
    except (OSError, ValueError, UnicodeError) as exc:
        return ActionOutcome(f"EnvError: {name} failed: {type(exc).__name__}: {exc}", error=True)
    return result if isinstance(result, ActionOutcome) else ActionOutcome(result)


def _short(args: dict) -> dict:
    """Low-level inputs as recorded: long contents cut, so a step's record stays small."""
    return {
        k: (v[:2000] + f"... [{len(v)} characters]" if isinstance(v, str) and len(v) > 2000 else v)
        for k, v in args.items()
    }


def packages_mounts(packages: TaskPackages | None) -> list[Mount]:
    """The task's own packages (None: it lists none), read-only at PACKAGES_TARGET; alone, with the module that
    hides the platform's."""
    if packages is None:
        return []
    return [Mount(packages.folder, PACKAGES_TARGET), *([Mount(ALONE_DIR, ALONE_TARGET)] if packages.alone else [])]


def packages_env(packages: TaskPackages | None) -> dict[str, str]:
    """The task's own packages first on the module path (alone: the platform's hidden by ALONE_DIR's
    sitecustomize), and their commands (such as ``kaggle``) first on PATH."""
    if packages is None:
        return {}
    path = f"{ALONE_TARGET}:{PACKAGES_TARGET}" if packages.alone else PACKAGES_TARGET
    return {"PYTHONPATH": path, "PATH": f"{PACKAGES_TARGET}/bin"}


def script_env(*, cpus: int, gpus: int) -> dict[str, str]:
    """The environment a workspace's script runs with: as many threads as the task has CPUs, and no GPU it lacks."""
    threads = str(max(1, cpus))
    env = {"OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads, "OPENBLAS_NUM_THREADS": threads}
    if not gpus:
        env["CUDA_VISIBLE_DEVICES"] = ""  # a task without GPUs does not see any the host has
    return env
