"""MLAgentBench's ResearchAgent run twice on the same scripted model answers: (a) by MLAgentBench's own code as its
users run it, and (b) on the platform, its package folder imported as an agent package. Prints how the two compare.

(a) The repository's ``MLAgentBench/`` is extracted from a git mirror into a temporary folder, the task is put in
its ``benchmarks/`` and ``MLAgentBench.runner`` is run as ``python -m MLAgentBench.runner --task ...`` runs it
(``runpy``, in a child process, its working folder the extract's root, ``python`` on its PATH this venv's). Two
of its modules are replaced before it starts: ``MLAgentBench.LLM``, by a few functions that send each prompt to the
scripted server with the stop sequences, tokens and temperature its ``complete_text`` passes on its OpenAI path
(500 tokens at 0.2 unless the caller passes others; ``complete_text_fast`` 0.01 on ``LLM.FAST_MODEL``), always as
one chat message; ``MLAgentBench.agents.agent_langchain`` (langchain is not installed; ResearchAgent does not use
it). Two third-party modules it imports and this venv lacks are given as stand-ins: ``anthropic`` (its two turn
markers, the SDK's values) and ``dacite`` (used only to resume).
``agent_autogpt`` fails to import, as it does for anyone without Auto-GPT's packages.
(b) The platform: the same folder's ten files its ResearchAgent needs, with an ``agent.toml`` naming the class, are
imported with ``agent_import``; the task with ``task_import`` (validated: one baseline run); the models are two
``ModelEndpoint`` rows on the scripted server; the run is executed in this process (``run_execute``, bwrap).

The task is small and offline: scikit-learn's bundled digits (``train.csv``, ``test.csv``), a logistic regression
``train.py`` that prints its validation accuracy and writes ``submission.csv``, and an ``eval.py`` that scores it
against answers kept in ``scripts/``. The main model's 12 answers are a fixed session in MLAgentBench's format
(List Files, Understand File, Inspect Script Lines, Edit Script (AI), Execute Script, Copy File, List Files of
backup/, Undo Edit Script, Execute Script, Understand File of a missing file, Execute Script, Final Answer); the fast
and edit model answer by what the prompt asks (an edit with a ```python block). Both sides get the same answers.

Printed: how many main-model prompts and fast/edit-model prompts (and their stop, max_tokens and temperature), step
actions and observations (MLAgentBench's ``trace.json`` against ``Step``), the low-level actions under its
high-level steps and the files of the final workspace are byte-identical, with a short unified diff of each that is
not; then the final score of each side (MLAgentBench's: the task's eval.py on ``traces/step_final_files``; the
platform's: ``run.final_score``).

    createdb -h 127.0.0.1 -U postgres sidebyside
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/sidebyside CELERY_BROKER_URL=redis://127.0.0.1:6379/0 \\
        .venv/bin/python benchmarks/mlagentbench_side_by_side.py [--mirror PATH] [--database-url URL] [--full]

``--database-url`` (else ``DATABASE_URL``, else a throwaway SQLite file) is migrated and written to: give it a
scratch database. ``--mirror`` is the bare git directory of snap-stanford/MLAgentBench (default below). ``--full``
prints whole diffs instead of their first 20 lines. ``--keep`` keeps the temporary folders and says where they are.
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import importlib.util
import json
import os
import re
import runpy
import shutil
import subprocess
import sys
import tempfile
import time
import types
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scratch import ROOT, django_scratch  # noqa: E402

MIRROR = "/work/.mirror/snap-stanford+MLAgentBench/repo"
SLUG = "sbs-digits"
MAIN_MODEL, FAST_MODEL = "scripted-main", "scripted-fast"
#: What the platform's agent package holds of MLAgentBench's folder.
PACKAGE_FILES = (
    "__init__.py", "schema.py", "LLM.py", "low_level_actions.py", "high_level_actions.py", "environment.py",
    "prepare_task.py", "agents/__init__.py", "agents/agent.py", "agents/agent_research.py",
)  # fmt: skip
DIFF_LINES = 20
#: The high-level actions of MLAgentBench's high_level_actions.py (their low-level actions are compared).
HIGH_LEVEL = {
    "Understand File", "Append Summary to Research Log", "Inspect Script Lines", "Edit Script (AI)",
    "Edit Script Segment (AI)", "Reflection", "Retrieval from Research Log",
}  # fmt: skip
#: The time stamp in a backup's name: MLAgentBench's _2024-01-31_12-00-00, or the platform's form of it.
STAMP = re.compile(r"\d{4}-\d\d-\d\d[_T]\d\d-\d\d-\d\d(-\d+)?")

# ---------------------------------------------------------------------------------------------------- the task

RESEARCH_PROBLEM = (
    "Given a training script train.py for 8x8 handwritten digit images (train.csv: a label column and the pixels "
    "p0..p63), improve the accuracy on test.csv (no labels) over the current model. Save a prediction for every "
    "row of test.csv to submission.csv with the columns id and label, as train.py does.\n"
)
TRAIN_PY = """import pandas as pd
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split

train = pd.read_csv("train.csv")
test = pd.read_csv("test.csv")
features = [c for c in train.columns if c.startswith("p")]
X_train, X_valid, y_train, y_valid = train_test_split(train[features], train["label"], test_size=0.2, random_state=0)

model = LogisticRegression(C=0.0001, max_iter=100)
model.fit(X_train, y_train)
print(f"validation accuracy: {model.score(X_valid, y_valid):.4f}")

model.fit(train[features], train["label"])
pd.DataFrame({"id": test["id"], "label": model.predict(test[features])}).to_csv("submission.csv", index=False)
print("wrote submission.csv")
"""
EDITED_PY = TRAIN_PY.replace(
    "from sklearn.linear_model import LogisticRegression\n",
    "from sklearn.linear_model import LogisticRegression\nfrom sklearn.pipeline import make_pipeline\n"
    "from sklearn.preprocessing import StandardScaler\n",
).replace(
    "model = LogisticRegression(C=0.0001, max_iter=100)",
    "model = make_pipeline(StandardScaler(), LogisticRegression(C=1.0, max_iter=1000))",
)
EVAL_PY = """import os

import pandas as pd


def get_score(submission_folder="../env"):
    submission = pd.read_csv(os.path.join(submission_folder, "submission.csv"))
    answer = pd.read_csv(os.path.join(os.path.dirname(os.path.abspath(__file__)), "answer.csv"))
    merged = answer.merge(submission.drop_duplicates("id"), on="id", how="left", suffixes=("", "_pred"))
    return float((merged["label"] == merged["label_pred"]).mean())
"""


def task_write(root: Path, stamp: str) -> Path:
    """The task as a bare MLAgentBench folder: env/ (data, train.py), scripts/ (problem, eval.py, answers).
    ``stamp`` goes into a hidden file so that each invocation is a new task version with files of its own."""
    import numpy as np
    import pandas as pd
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    (root / "env").mkdir(parents=True)
    (root / "scripts").mkdir()
    digits = load_digits()
    pixels = pd.DataFrame(digits.data.astype(int), columns=[f"p{i}" for i in range(64)])
    x_train, x_test, y_train, y_test = train_test_split(
        pixels, digits.target, test_size=0.3, random_state=0, stratify=digits.target
    )
    x_train.insert(0, "label", y_train)
    x_train.to_csv(root / "env" / "train.csv", index=False)
    x_test.insert(0, "id", np.arange(len(x_test)))
    x_test.to_csv(root / "env" / "test.csv", index=False)
    pd.DataFrame({"id": np.arange(len(x_test)), "label": y_test}).to_csv(root / "scripts" / "answer.csv", index=False)
    (root / "env" / "train.py").write_text(TRAIN_PY)
    (root / "scripts" / "research_problem.txt").write_text(RESEARCH_PROBLEM)
    (root / "scripts" / "eval.py").write_text(EVAL_PY)
    (root / "scripts" / "invocation.txt").write_text(stamp + "\n")
    return root


def task_score(task_root: Path, folder: Path) -> float | None:
    """The task's eval.py on ``folder``, in this process (None when it raises)."""
    spec = importlib.util.spec_from_file_location("sbs_eval", task_root / "scripts" / "eval.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    try:
        return module.get_score(str(folder))
    except Exception as exc:  # noqa: BLE001 - the score is reported, not needed
        print(f"  eval.py on {folder} failed: {exc}")
        return None


# ---------------------------------------------------------------------------------------------- the answers


def answer(reflection: str, plan: str, fact: str, thought: str, action: str, action_input: dict) -> str:
    return (
        f"Reflection: {reflection}\nResearch Plan and Status: {plan}\nFact Check: {fact}\nThought: {thought}\n"
        f"Action: {action}\nAction Input: {json.dumps(action_input, indent=4)}"
    )


PLAN = "1. Look at the files and train.py. 2. Measure the baseline. 3. Scale the features and weaken the penalty."
MAIN_ANSWERS = [
    answer("Nothing yet.", PLAN, "None.", "See which files there are.", "List Files", {"dir_path": "."}),
    answer(
        "There are train.py, train.csv and test.csv.",
        PLAN + "\n**Step 1 in progress: train.py read.**",
        "train.py, train.csv and test.csv exist: confirmed by the listing.",
        "Understand the training script.",
        "Understand File",
        {"file_name": "train.py", "things_to_look_for": "the model, its hyperparameters and what the script prints"},
    ),
    answer(
        "train.py fits a logistic regression with a strong penalty.",
        PLAN,
        "The model is confirmed by the file.",
        "Look at the exact lines before editing.",
        "Inspect Script Lines",
        {"script_name": "train.py", "start_line_number": 1, "end_line_number": 20},
    ),
    answer(
        "C is 0.0001 and the pixels are not scaled.",
        PLAN + "\n**Step 3: editing train.py.**",
        "C=0.0001 is confirmed by the lines.",
        "Scale the features and raise C.",
        "Edit Script (AI)",
        {
            "script_name": "train.py",
            "edit_instruction": "Scale the features with a StandardScaler in a pipeline before the logistic "
            "regression, and use LogisticRegression(C=1.0, max_iter=1000).",
            "save_name": "train.py",
        },
    ),
    answer(
        "The diff shows the pipeline.",
        PLAN,
        "The edit is confirmed by the diff.",
        "Measure the edited script.",
        "Execute Script",
        {"script_name": "train.py"},
    ),
    answer(
        "The edited script printed its validation accuracy.",
        PLAN + "\n**Edited script measured.**",
        "The accuracy is confirmed by the output.",
        "Keep a copy of the edited script.",
        "Copy File",
        {"source": "train.py", "destination": "train_scaled.py"},
    ),
    answer(
        "The copy was made.",
        PLAN,
        "The copy is confirmed.",
        "See what the edit left in backup/.",
        "List Files",
        {"dir_path": "backup"},
    ),
    answer(
        "backup/ holds the original script.",
        PLAN,
        "The backup is confirmed by the listing.",
        "Restore the original train.py to measure the baseline.",
        "Undo Edit Script",
        {"script_name": "train.py"},
    ),
    answer(
        "train.py is the original again.",
        PLAN + "\n**Step 2: measuring the baseline.**",
        "The restored content is confirmed.",
        "Run the original script for the baseline.",
        "Execute Script",
        {"script_name": "train.py"},
    ),
    answer(
        "The baseline accuracy is printed.",
        PLAN,
        "The baseline is confirmed by the output.",
        "Read the second version (a name that does not exist, to see the error).",
        "Understand File",
        {"file_name": "train_v2.py", "things_to_look_for": "how it differs from train.py"},
    ),
    answer(
        "There is no train_v2.py.",
        PLAN,
        "The error is confirmed.",
        "Run the kept edited copy for the submission.",
        "Execute Script",
        {"script_name": "train_scaled.py"},
    ),
    answer(
        "The scaled model wrote submission.csv.",
        PLAN + "\n**Done: the scaled model is better.**",
        "Both accuracies are confirmed by the outputs.",
        "Submit.",
        "Final Answer",
        {"final_answer": "Scaling the pixels and C=1.0 raised the validation accuracy; submission.csv is written."},
    ),
]


def fast_answer(prompt: str) -> str:
    """The fast and edit model: an edit gets the edited script in a python block, anything else a short text."""
    if "Edit the script by following the instruction" in prompt:
        return f"Here is the edited script.\n```python\n{EDITED_PY}```\n"
    if "Given this (partial) file" in prompt:
        return "train.py reads train.csv, fits LogisticRegression(C=0.0001, max_iter=100) and prints the accuracy."
    return "[Observation]: a summary of the observation."


def scripted_server():
    """A FakeOpenAI (tests/llm_server.py) answering the main model from MAIN_ANSWERS in order, the others by
    fast_answer; it records every request."""
    sys.path.insert(0, str(ROOT))
    from tests.llm_server import FakeOpenAI

    server = FakeOpenAI()
    main_calls = [0]

    def reply(request: dict) -> str:
        prompt = request["messages"][-1]["content"]
        if request["model"] == MAIN_MODEL:
            main_calls[0] += 1
            return MAIN_ANSWERS[min(main_calls[0], len(MAIN_ANSWERS)) - 1]
        return fast_answer(prompt)

    server.default = reply
    return server.start()


# ---------------------------------------------------------------------------- (a) MLAgentBench, as its users run it


def mirror_extract(mirror: str, dest: Path) -> Path:
    """``git archive`` of the mirror's MLAgentBench/ into ``dest``; returns the package folder."""
    dest.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(
        ["git", f"--git-dir={mirror}", "archive", "HEAD", "MLAgentBench"], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest / "MLAgentBench"


def child_modules(base_url: str) -> None:
    """The modules replaced in the child before MLAgentBench's runner starts (module docstring)."""
    anthropic = types.ModuleType("anthropic")
    anthropic.HUMAN_PROMPT, anthropic.AI_PROMPT = "\n\nHuman:", "\n\nAssistant:"  # the anthropic SDK's constants
    dacite = types.ModuleType("dacite")

    def from_dict(*args, **kwargs):
        raise NotImplementedError("dacite is not installed (used only to resume)")

    dacite.from_dict = from_dict
    langchain_agent = types.ModuleType("MLAgentBench.agents.agent_langchain")
    langchain_agent.LangChainAgent = None
    sys.modules.update({"anthropic": anthropic, "dacite": dacite})

    import MLAgentBench
    import MLAgentBench.agents
    from MLAgentBench.schema import LLMError, TooLongPromptError

    sys.modules["MLAgentBench.agents.agent_langchain"] = langchain_agent
    llm = types.ModuleType("MLAgentBench.LLM")
    llm.FAST_MODEL = "claude-v1"
    llm.LLMError, llm.TooLongPromptError = LLMError, TooLongPromptError

    def log_to_file(log_file, prompt, completion, model, max_tokens_to_sample):
        with open(log_file, "a") as fh:
            fh.write(f"\n===================prompt=====================\n{anthropic.HUMAN_PROMPT} {prompt} ")
            fh.write(f"{anthropic.AI_PROMPT}\n==================={model} response ({max_tokens_to_sample})")
            fh.write(f"=====================\n{completion}\n===================tokens=====================\n\n\n")

    def complete_text(prompt, log_file, model, **kwargs):
        """LLM.complete_text: the stop sequences by the model's name, then the defaults of the function it calls
        (complete_text_openai: 500 tokens at 0.2; the others 2,000 at 0.5); sent as one chat message."""
        other = model.startswith(("claude", "gemini", "huggingface")) or "/" in model
        stop = [anthropic.HUMAN_PROMPT, "Observation:"] if model.startswith("claude") else ["Observation:"]
        stop = kwargs.pop("stop_sequences", stop)
        max_tokens = kwargs.pop("max_tokens_to_sample", 2000 if other else 500)
        temperature = kwargs.pop("temperature", 0.5 if other else 0.2)
        request = {"model": model, "temperature": temperature, "max_tokens": max_tokens, "stop": stop or None}
        request["messages"] = [{"role": "user", "content": prompt}]
        body = json.dumps(request | kwargs).encode()
        post = urllib.request.Request(
            f"{base_url}/chat/completions", body, {"Content-Type": "application/json"}, method="POST"
        )
        with urllib.request.urlopen(post, timeout=60) as response:
            completion = json.load(response)["choices"][0]["message"]["content"]
        if log_file is not None:
            log_to_file(log_file, prompt, completion, model, max_tokens)
        return completion

    def complete_text_fast(prompt, **kwargs):
        return complete_text(prompt=prompt, model=llm.FAST_MODEL, temperature=0.01, **kwargs)

    llm.log_to_file, llm.complete_text, llm.complete_text_fast = log_to_file, complete_text, complete_text_fast

    def complete_text_claude(prompt, stop_sequences=(anthropic.HUMAN_PROMPT,), log_file=None, **kwargs):
        """What its environment imports, for interactive mode only (never called here)."""
        return complete_text(prompt, log_file, kwargs.pop("model", "claude-v1"), stop_sequences=stop_sequences)

    llm.complete_text_claude = complete_text_claude
    sys.modules["MLAgentBench.LLM"] = MLAgentBench.LLM = llm


def child_main(root: str, base_url: str) -> None:
    """In the child: ``python -m MLAgentBench.runner`` with runner.py's defaults but the task and models."""
    sys.path.insert(0, root)
    child_modules(base_url)
    sys.argv = ["runner.py", "--task", SLUG, "--llm-name", MAIN_MODEL, "--fast-llm-name", FAST_MODEL,
                "--edit-script-llm-name", FAST_MODEL]  # fmt: skip
    runpy.run_module("MLAgentBench.runner", run_name="__main__", alter_sys=True)


def side_mlagentbench(mirror: str, task_root: Path, tmp: Path, base_url: str) -> dict:
    """Side (a): MLAgentBench's runner in a child process; its trace.json and the score of its final files."""
    root = tmp / "mlagentbench"
    package = mirror_extract(mirror, root)
    shutil.copytree(task_root, package / "benchmarks" / SLUG, ignore=shutil.ignore_patterns("invocation.txt"))
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    for name in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE"):
        env.pop(name, None)
    started = time.monotonic()
    with open(tmp / "mlagentbench.log", "w") as log:
        child = subprocess.run(
            [sys.executable, __file__, "--child", str(root), base_url],
            cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=1800,
        )  # fmt: skip
    seconds = time.monotonic() - started
    log_text = (tmp / "mlagentbench.log").read_text(errors="replace")
    if child.returncode != 0:
        raise SystemExit(f"MLAgentBench's runner exited with {child.returncode}:\n{log_text[-3000:]}")
    env_log = root / "logs" / "env_log"
    trace = json.loads((env_log / "trace.json").read_text())
    final = env_log / "traces" / "step_final_files"
    message = re.findall(r"^Final message:\s+(.*)$", log_text, re.MULTILINE)
    return {
        "trace": trace,
        "score": task_score(task_root, final),
        "seconds": seconds,
        "final_message": message[-1] if message else "(none printed)",
        "final_files": {
            p.relative_to(final).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(final.rglob("*"))
            if p.is_file()
        },
    }


# ------------------------------------------------------------------------------------------------ (b) the platform


def side_platform(mlab_package: Path, task_root: Path, tmp: Path, base_url: str, stamp: str) -> dict:
    """Side (b): the package imported as an agent, the task as a task package, one run executed here."""
    from runner.agents.packages import agent_import
    from runner.execution import run_execute
    from runner.execution.validation import task_version_validate_queue
    from runner.models import ModelEndpoint, Step
    from runner.services import run_create
    from task_bank.services import task_import

    agent_dir = tmp / "agent-package"
    for rel in PACKAGE_FILES:
        (agent_dir / "MLAgentBench" / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(mlab_package / rel, agent_dir / "MLAgentBench" / rel)
    (agent_dir / "agent.toml").write_text(
        f'name = "mlab-side-by-side"\nversion = "{stamp}"\n\n[mlagentbench]\nagent = "ResearchAgent"\n'
    )
    agent, _ = agent_import(source=agent_dir)
    version, _ = task_import(root=task_root, slug=SLUG, metric_name="accuracy", higher_is_better=True)
    for validation in task_version_validate_queue(version=version, enqueue=False, repeats=1):
        run_execute(validation.pk)
    version.refresh_from_db()
    if version.status != "ready":
        raise SystemExit(f"the task did not validate: {version.status}\n{version.validation_log}")
    for name in (MAIN_MODEL, FAST_MODEL):
        ModelEndpoint.objects.update_or_create(
            name=name, defaults={"base_url": base_url, "model_id": name, "timeout_s": 60, "is_enabled": True}
        )
    started = time.monotonic()
    run = run_create(task=version.task, agent=agent, model=MAIN_MODEL, fast_model=FAST_MODEL, enqueue=False)
    run = run_execute(run.pk)
    return {
        "run": run,
        "steps": list(Step.objects.filter(run=run).order_by("index")),
        "score": run.final_score,
        "baseline": version.baseline_score,
        "seconds": time.monotonic() - started,
    }


# ---------------------------------------------------------------------------------------------------- comparing


def unified_diff(a: list[str], b: list[str]) -> list[str]:
    """difflib's unified diff (one line of context) without its "autojunk" heuristic, which in a prompt of 200
    lines and more takes frequent lines (```, blank) for junk and shows them as changed when they are not."""
    lines = ["--- mlagentbench", "+++ platform"]
    for group in difflib.SequenceMatcher(None, a, b, autojunk=False).get_grouped_opcodes(1):
        (_, i1, _, j1, _), (_, _, i2, _, j2) = group[0], group[-1]
        lines.append(f"@@ -{i1 + 1},{i2 - i1} +{j1 + 1},{j2 - j1} @@")
        for tag, i, ii, j, jj in group:
            if tag == "equal":
                lines += [" " + line for line in a[i:ii]]
                continue
            lines += ["-" + line for line in a[i:ii]] + ["+" + line for line in b[j:jj]]
    return lines if len(lines) > 2 else []


def diff_lines(a: str, b: str, full: bool) -> list[str]:
    """A unified diff of a (MLAgentBench) against b (the platform), or what else tells them apart."""
    lines = unified_diff(a.splitlines(), b.splitlines())
    if not lines:  # the same lines: they differ in line endings or a final newline
        return [f"same lines; MLAgentBench's ends {a[-40:]!r}, the platform's {b[-40:]!r}"]
    if full or len(lines) <= DIFF_LINES:
        return lines
    return lines[:DIFF_LINES] + [f"... ({len(lines) - DIFF_LINES} more lines; --full shows them)"]


def compare(title: str, pairs: list[tuple[str, str | None, str | None]], full: bool) -> None:
    """Print how many of the labelled pairs are byte-identical, and a diff of each that is not."""
    same = sum(a == b for _, a, b in pairs)
    print(f"\n{title}: {same}/{len(pairs)} byte-identical")
    for label, a, b in pairs:
        if a == b:
            continue
        if a is None or b is None:
            print(f"  {label}: only {'the platform' if a is None else 'MLAgentBench'} has it")
            continue
        print(f"  {label}:")
        for line in diff_lines(a, b, full):
            print(f"    {line}")


def paired(a: list, b: list) -> list[tuple]:
    return [(a[i] if i < len(a) else None, b[i] if i < len(b) else None) for i in range(max(len(a), len(b)))]


def canonical(value) -> str | None:
    return None if value is None else json.dumps(value, sort_keys=True, indent=1)


def low_level_by_step(trace: dict) -> list[list[dict]]:
    """trace.json's low-level steps, each under the step whose time it precedes, in the platform's shape."""
    grouped, low, previous = [], trace["low_level_steps"], 0.0
    for step in trace["steps"]:
        grouped.append(
            [
                {"action": s["action"]["name"], "input": s["action"]["args"], "observation": str(s["observation"])}
                for s in low
                if previous < s["timestamp"] <= step["timestamp"]
            ]
        )
        previous = step["timestamp"]
    return grouped


def platform_files(run) -> dict[str, str]:
    """Path -> sha256 of the files of the run's final workspace (its snapshot's manifest)."""
    from runner.workspace.snapshots import BlobStore

    snapshot = run.final_workspace_snapshot()
    return {path: entry[0] for path, entry in BlobStore().manifest_load(snapshot).items()} if snapshot else {}


def settings_of(request: dict) -> str:
    return json.dumps({key: request.get(key) for key in ("stop", "max_tokens", "temperature")})


def prompt_of(request: dict) -> str:
    messages = request["messages"]
    if len(messages) == 1 and messages[0]["role"] == "user":
        return messages[0]["content"]
    return json.dumps(messages, indent=1)  # not one user message: shown whole


def report(a: dict, a_requests: list[dict], b: dict, b_requests: list[dict], full: bool) -> None:
    for model, label in ((MAIN_MODEL, "Main-model"), (FAST_MODEL, "Fast/edit-model")):
        calls = paired([r for r in a_requests if r["model"] == model], [r for r in b_requests if r["model"] == model])
        prompts = [(f"call {i + 1}", x and prompt_of(x), y and prompt_of(y)) for i, (x, y) in enumerate(calls)]
        compare(f"{label} prompts", prompts, full)
        masked = sum(STAMP.sub("<stamp>", x or "") == STAMP.sub("<stamp>", y or "") for _, x, y in prompts)
        print(f"  ... {masked}/{len(prompts)} identical once the time stamps of backup names are masked")
        options = [(f"call {i + 1}", x and settings_of(x), y and settings_of(y)) for i, (x, y) in enumerate(calls)]
        compare(f"{label} call settings (stop, max_tokens, temperature)", options, full)
    steps_a, steps_b = a["trace"]["steps"], b["steps"]
    steps = paired(steps_a, steps_b)
    actions = [
        (
            x and {"name": x["action"]["name"], "args": x["action"]["args"]},
            y and {"name": y.action, "args": y.action_input},
        )
        for x, y in steps
    ]
    compare(
        "Step actions (trace.json's action against Step.action and action_input, as JSON with sorted keys)",
        [(f"step {i + 1}", canonical(x), canonical(y)) for i, (x, y) in enumerate(actions)],
        full,
    )
    ordered = sum(json.dumps(x) == json.dumps(y) for x, y in actions)
    print(f"  ... {ordered}/{len(actions)} also with their keys in the same order")
    observations = [
        (f"step {i + 1} ({x['action']['name'] if x else y.action})", x and x["observation"], y and y.observation)
        for i, (x, y) in enumerate(steps)
    ]
    compare("Observations (trace.json's steps against Step.observation)", observations, full)
    masked = sum(STAMP.sub("<stamp>", x or "") == STAMP.sub("<stamp>", y or "") for _, x, y in observations)
    print(f"  ... {masked}/{len(observations)} identical once the time stamps of backup names are masked")
    compare(
        "Low-level actions of the high-level steps (trace.json's low_level_steps of the step against Step.low_level,"
        " as JSON with sorted keys)",
        [
            (f"step {i + 1} ({x['action']['name']})", canonical(low_a), canonical(y and y.low_level))
            for i, ((x, y), low_a) in enumerate(zip(steps, low_level_by_step(a["trace"]), strict=False))
            if x and x["action"]["name"] in HIGH_LEVEL
        ],
        full,
    )
    files_b = platform_files(b["run"])
    names = sorted(set(a["final_files"]) | set(files_b))
    compare(
        "Final workspace files (sha256 of each: MLAgentBench's traces/step_final_files against the run's final "
        "snapshot)",
        [(name, a["final_files"].get(name), files_b.get(name)) for name in names],
        full,
    )
    run = b["run"]
    print("\nFinal scores (accuracy on the held-out answers):")
    print(f"  MLAgentBench (eval.py on traces/step_final_files): {a['score']}")
    print(f"  platform (run.final_score): {run.final_score}   run {run.pk}: {run.status} {run.error or ''}".rstrip())
    print(f"  the platform's validated baseline (train.py unchanged): {b['baseline']}")
    print(f"MLAgentBench's final message: {a['final_message']}")
    print(f"Time: MLAgentBench {a['seconds']:.1f} s, the platform's run {b['seconds']:.1f} s")
    if run.status != "finished":
        print(f"The platform agent's stderr tail:\n{run.stderr_tail[-2000:]}")


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        return child_main(sys.argv[2], sys.argv[3])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mirror", default=MIRROR, help="bare git directory of snap-stanford/MLAgentBench")
    parser.add_argument("--database-url", default=os.environ.get("DATABASE_URL", ""), help="a scratch database")
    parser.add_argument("--full", action="store_true", help="print whole diffs")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folders")
    args = parser.parse_args()
    os.environ.setdefault("BENCH_SANDBOX", "bwrap")
    os.environ.setdefault("CELERY_BROKER_URL", "redis://127.0.0.1:6379/0")
    os.environ.setdefault("BENCH_BARE_FOLDER_PACKAGES", "none")  # both runners' scripts see the platform's packages
    commit = subprocess.run(
        ["git", f"--git-dir={args.mirror}", "rev-parse", "--short", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()
    tmp = Path(tempfile.mkdtemp(prefix="sidebyside-"))
    stamp = time.strftime("%Y%m%d%H%M%S") + f"-{os.getpid()}"
    var = None
    try:
        task_root = task_write(tmp / "task" / SLUG, stamp)
        server_a = scripted_server()
        try:
            side_a = side_mlagentbench(args.mirror, task_root, tmp, server_a.base_url)
        finally:
            server_a.stop()
        var = django_scratch("sidebyside-", args.database_url)
        from django.conf import settings
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        server_b = scripted_server()
        try:
            side_b = side_platform(tmp / "mlagentbench" / "MLAgentBench", task_root, tmp, server_b.base_url, stamp)
        finally:
            server_b.stop()
        engine = settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]
        print(f"MLAgentBench {commit} (ResearchAgent, runner.py's defaults) against the platform ({engine}, sandbox "
              f"{settings.BENCH_SANDBOX}); the same {len(MAIN_ANSWERS)} scripted main-model answers; LANG "
              f"{os.environ.get('LANG', '')!r} for ls")  # fmt: skip
        report(side_a, server_a.requests, side_b, server_b.requests, args.full)
    finally:
        if args.keep:
            print(f"\nKept: {tmp} (MLAgentBench's logs under mlagentbench/logs) and {var}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
            if var is not None:
                shutil.rmtree(var, ignore_errors=True)


if __name__ == "__main__":
    main()
