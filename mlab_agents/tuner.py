"""The tuner: an agent that needs no LLM. It reads the starter script, finds its numeric hyperparameters,
tries changes one at a time (coordinate search), runs the script, reads the validation metric it prints,
keeps what improves it, and leaves the best version in place with its submission. Every step carries honest
Reflection / Research Plan and Status / Fact Check / Thought entries saying what it does and why.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

from .sdk import Env, main

# Names that are hyperparameters worth tuning, and how to vary them.
GROW = r"epochs?|n_?estimators|num_?epochs|max_?iter|iterations|n_?iter|num_?boost_?round|num_?leaves"
SIZE = r"hidden(_?(size|dim|units|channels))?|n_?hidden|width|embed(ding)?_?dim|d_?model|num_?filters|channels"
DEPTH = r"max_?depth|depth|num_?layers|n_?layers|layers"
RATE = r"lr|learning_?rate|eta"
REG = r"alpha|c|weight_?decay|l2|lambda_?|reg(ularization)?"
FRACTION = r"dropout|subsample|colsample_?bytree|max_?features"
NEIGHBOURS = r"n_?neighbors|k|min_?samples_?leaf|min_?child_?weight"
BATCH = r"batch_?size"
KINDS = [
    ("grow", GROW), ("size", SIZE), ("depth", DEPTH), ("rate", RATE), ("reg", REG), ("fraction", FRACTION),
    ("neighbours", NEIGHBOURS), ("batch", BATCH),
]  # fmt: skip
NEVER = re.compile(r"seed|random_?state|test_?size|valid|split|verbose|n_?jobs|threads|workers|num_?classes")
ASSIGN = re.compile(
    r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)\s*=\s*(?P<value>-?\d+(?:\.\d*)?(?:[eE]-?\d+)?)\s*(?:#.*)?$", re.MULTILINE
)
KEYWORD = re.compile(r"(?P<name>\b[A-Za-z_][A-Za-z0-9_]*)\s*=\s*(?P<value>-?\d+(?:\.\d*)?(?:[eE]-?\d+)?)(?=\s*[,)])")
METRIC = re.compile(r"valid\w*[^\n:=]*[:=]\s*(-?\d+(?:\.\d+)?(?:[eE]-?\d+)?)", re.IGNORECASE)


@dataclass
class Param:
    name: str
    value: str
    kind: str
    start: int
    end: int

    @property
    def number(self) -> float:
        return float(self.value)

    @property
    def is_int(self) -> bool:
        return re.fullmatch(r"-?\d+", self.value) is not None


def kind_of(name: str) -> str | None:
    lowered = name.lower()
    if NEVER.search(lowered):
        return None
    for kind, pattern in KINDS:
        if re.fullmatch(pattern, lowered):
            return kind
    return None


def find_params(source: str) -> list[Param]:
    """Numeric literals assigned to hyperparameter-like names, as module constants or keyword arguments."""
    found: dict[tuple[int, int], Param] = {}
    for regex in (ASSIGN, KEYWORD):
        for m in regex.finditer(source):
            kind = kind_of(m.group("name"))
            if kind:
                found.setdefault(m.span("value"), Param(m.group("name"), m.group("value"), kind, *m.span("value")))
    return sorted(found.values(), key=lambda p: p.start)


def candidates(param: Param) -> list[float]:
    x = param.number
    if param.kind in ("grow", "size"):
        values = [x * 2, x * 4] if x >= 1 else [2.0, 8.0]
    elif param.kind == "depth":
        values = [x + 2, x * 2] if x >= 1 else [4.0, 8.0]
    elif param.kind == "rate":
        values = [x * 3, x / 3, x * 10]
    elif param.kind == "reg":
        values = [x / 10, x * 10] if x > 0 else [1e-4, 1e-2]
    elif param.kind == "fraction":
        values = [min(x * 1.5, 0.9), x / 2]
    elif param.kind == "neighbours":
        values = [x * 2, max(x / 2, 1)]
    else:  # batch size
        values = [max(x / 2, 1), x * 2]
    out = []
    for value in values:
        value = round(value) if param.is_int else float(f"{value:.6g}")
        if value != x and value not in out and value > 0:
            out.append(value)
    return out


def cost_factor(param: Param, value: float) -> float:
    """How much longer a run with this value is likely to take than with the current one."""
    ratio = value / param.number if param.number else 1.0
    if param.kind == "grow":
        return max(ratio, 1.0)
    if param.kind in ("size", "depth"):
        return max(ratio, 1.0) ** 1.5
    if param.kind == "batch":
        return max(1 / ratio, 1.0)
    return 1.0


def substitute(source: str, param: Param, value: float) -> str:
    text = str(int(value)) if param.is_int else repr(float(value))
    return source[: param.start] + text + source[param.end :]


def read_metric(output: str) -> float | None:
    values = METRIC.findall(output)
    return float(values[-1]) if values else None


@dataclass
class Best:
    """The best version of the script so far: its source, its validation metric, how long a run of it took, and
    what the last trial found (the next step's reflection)."""

    source: str
    score: float
    duration: float
    note: str


@dataclass
class Tuner:
    env: Env
    script: str = "train.py"
    higher_is_better: bool = True
    metric: str = "score"
    plan_done: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)

    def better(self, new: float, old: float) -> bool:
        return new > old if self.higher_is_better else new < old

    def plan(self, now: str) -> str:
        steps = [
            "1. Read the starter script and find its numeric hyperparameters.",
            "2. Run it unchanged to measure the baseline validation metric.",
            "3. Change one hyperparameter at a time; keep a change only if the validation metric improves.",
            "4. Leave the best version in place, rerun it so its submission is the final one, and submit.",
        ]
        done = "\n".join(f"- {d}" for d in self.plan_done[-8:]) or "- nothing yet"
        return "\n".join(steps) + f"\nDone so far:\n{done}\nNow: **{now}**"

    def act(self, action: str, action_input: dict, *, thought: str, reflection: str, now: str, facts: str):
        return self.env.act(
            action,
            action_input,
            Reflection=reflection,
            Research_Plan_and_Status=self.plan(now),
            Fact_Check=facts,
            Thought=thought,
        )

    def steps_left(self) -> int:
        return self.env.start.limits.get("max_steps", 50) - self.env.steps_taken

    def time_left(self) -> float:
        limit = self.env.start.limits.get("max_time_s") or 3600
        return limit - (time.monotonic() - self.started)

    def run_script(self, *, thought: str, reflection: str, now: str, facts: str) -> tuple[float | None, float, str]:
        began = time.monotonic()
        observation = self.act(
            "Execute Script",
            {"script_name": self.script},
            thought=thought,
            reflection=reflection,
            now=now,
            facts=facts,
        )
        return (
            read_metric(observation.text) if not observation.error else None,
            time.monotonic() - began,
            observation.text,
        )

    def write(self, source: str, *, thought: str, reflection: str, now: str) -> None:
        self.act(
            "Write File",
            {"file_name": self.script, "content": source},
            thought=thought,
            reflection=reflection,
            now=now,
            facts="No new results in this step; it only edits the script.",
        )

    def tune(self) -> None:
        """Measure the baseline, search one hyperparameter at a time, leave the best version in place, submit."""
        self.read_task()
        source = self.read_source()
        params = find_params(source)
        names = ", ".join(f"{p.name}={p.value}" for p in params) or "none"
        self.plan_done.append(f"found hyperparameters: {names}")
        baseline, duration, output = self.run_script(
            thought=f"Measure the baseline: run {self.script} unchanged and read its validation {self.metric}.",
            reflection=f"{self.script} has these numeric hyperparameters: {names}.",
            now="measure the baseline",
            facts=f"The hyperparameters {names} are read from the script above (confirmed).",
        )
        if baseline is None:
            self.give_up(output)
            return
        self.plan_done.append(f"baseline validation {self.metric} = {baseline:.4g}")
        best = Best(source, baseline, duration, f"The baseline validation {self.metric} is {baseline:.4g}.")
        for param in params:
            while self.improve(param, best):
                pass
        if best.source != source:
            self.restore(best)
        self.submit(names=names, baseline=baseline, best=best)

    def read_task(self) -> None:
        """The script to tune and its metric (which way is better), from the task in the start message."""
        task = self.env.start.task
        self.script = task.get("script") or "train.py"
        metric = task.get("metric", {})
        self.metric = metric.get("name", "score")
        self.higher_is_better = metric.get("higher_is_better", True) is not False

    def read_source(self) -> str:
        """List the workspace, then read the script."""
        listing = self.act(
            "List Files",
            {"dir_path": "."},
            thought="See which files the task provides.",
            reflection="Nothing observed yet.",
            now="look at the files",
            facts="Nothing confirmed yet.",
        )
        return self.act(
            "Read File",
            {"file_name": self.script},
            thought=f"Read {self.script} to find what can be tuned.",
            reflection=f"The workspace holds: {', '.join(listing.text.split()) or 'nothing'}.",
            now=f"read {self.script}",
            facts="The file list is confirmed by the observation above.",
        ).text

    def give_up(self, output: str) -> None:
        """Submit the starter script as it is: its output has no validation metric to compare."""
        self.act(
            "Final Answer",
            {
                "final_answer": f"{self.script} did not print a validation metric I could read, so I could not "
                "tune it; the workspace is as the starter script left it."
            },
            thought="Without a validation metric there is nothing to compare; submit as is.",
            reflection="The script's output has no line like 'validation <metric>: <number>'.",
            now="submit",
            facts=f"Output of the baseline run:\n{output[-500:]}",
        )

    def improve(self, param: Param, best: Best) -> bool:
        """Try the candidate values of one hyperparameter in the best version until one improves it (True), the
        candidates run out or the budget does (False). A value whose run would take too long is skipped."""
        current = next(p for p in find_params(best.source) if p.start == param.start or p.name == param.name)
        for value in candidates(current):
            # Each trial costs two steps (write, run); keep two for the final rerun and the answer.
            if self.steps_left() < 4 or self.time_left() < best.duration * 2.5 + 30:
                return False
            expected = best.duration * cost_factor(current, value)
            if expected > max(60.0, self.time_left() / 4):
                self.plan_done.append(f"{current.name} -> {value:g} skipped: it would take about {expected:.0f} s")
                continue
            if self.try_value(current, value, best):
                return True
        return False

    def try_value(self, current: Param, value: float, best: Best) -> bool:
        """Write the best version with one value changed and run it; keep it in ``best`` if it is better."""
        trial = substitute(best.source, current, value)
        change = f"{current.name} {current.value} -> {value:g}"
        direction = "higher" if self.higher_is_better else "lower"
        self.write(
            trial,
            thought=f"Try {change}; everything else as in the best version so far.",
            reflection=best.note,
            now=f"try {change}",
        )
        score, took, _ = self.run_script(
            thought=f"Run the script with {change} and compare its validation {self.metric} "
            f"({direction} is better) with the best so far, {best.score:.4g}.",
            reflection=f"{self.script} now has {change}.",
            now=f"measure {change}",
            facts="No new result yet; this step runs the experiment.",
        )
        if score is not None and self.better(score, best.score):
            best.note = (
                f"With {change} the validation {self.metric} is {score:.4g}, better than {best.score:.4g}: keep it."
            )
            self.plan_done.append(f"{change}: {score:.4g} (kept)")
            best.source, best.score, best.duration = trial, score, took
            return True
        result = "no metric (the run failed)" if score is None else f"{score:.4g}"
        best.note = (
            f"With {change} the validation {self.metric} is {result}, not better than "
            f"{best.score:.4g}: go back to the best version."
        )
        self.plan_done.append(f"{change}: {result} (dropped)")
        return False

    def restore(self, best: Best) -> None:
        """Put the best version back in place and rerun it, so that the submission comes from it."""
        self.write(
            best.source,
            thought="Put the best version back in place.",
            reflection=best.note,
            now="restore the best version",
        )
        final, _, _ = self.run_script(
            thought="Rerun the best version so submission.csv comes from it.",
            reflection=f"The best version reached validation {self.metric} {best.score:.4g}.",
            now="rerun the best version",
            facts=f"Best validation {self.metric} {best.score:.4g}, measured earlier.",
        )
        best.score = final if final is not None else best.score

    def submit(self, *, names: str, baseline: float, best: Best) -> None:
        self.act(
            "Final Answer",
            {
                "final_answer": f"Tuned {self.script} by coordinate search over {names}. Validation {self.metric}: "
                f"baseline {baseline:.4g}, final {best.score:.4g}. Changes kept: "
                f"{'; '.join(d for d in self.plan_done if '(kept)' in d) or 'none'}."
            },
            thought="The search is over (or its budget is spent); submit the best version.",
            reflection=best.note,
            now="submit",
            facts=f"Baseline {baseline:.4g} and final {best.score:.4g} validation {self.metric} were both measured by "
            "running the script (confirmed).",
        )


def run(env: Env) -> None:
    Tuner(env).tune()


if __name__ == "__main__":
    main(run)
