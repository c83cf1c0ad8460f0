"""Proves a GPU task end to end on a machine that has a GPU: a task that asks for one (``[resources] gpus = 1``) is
imported, validated (its starter run by the baseline agent in the sandbox) and run by an agent whose script
multiplies two matrices on the GPU; both print what the sandbox saw (the device files, CUDA_VISIBLE_DEVICES,
``torch.cuda.is_available()``, the device's name) and the score says whether the GPU was used.

No model is needed. The machine needs an NVIDIA GPU and its driver, torch with CUDA in the sandbox's interpreter
(bwrap: this one; docker: the image's), and, for docker, the NVIDIA container toolkit. On a machine without a GPU
it says so and exits 2.

    .venv/bin/python benchmarks/gpu_check.py [--sandbox bwrap|docker] [--database-url postgres://.../scratch]
"""

from __future__ import annotations

import argparse
import glob
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale_out import scripted_agent  # noqa: E402
from scratch import django_scratch, task_validated  # noqa: E402

# The score is 1 when the matrices were multiplied on a GPU, else 0: the baseline must measure 1.
SEES_GPU = """
import glob, os
print("device files:", sorted(glob.glob("/dev/nvidia*")))
print("CUDA_VISIBLE_DEVICES:", os.environ.get("CUDA_VISIBLE_DEVICES"))
try:
    import torch
except ImportError:
    torch = None
used = 0
if torch is not None and torch.cuda.is_available():
    print("device:", torch.cuda.get_device_name(0))
    a = torch.rand(512, 512, device="cuda")
    used = int(bool((a @ a).sum().item() > 0))
print("torch:", torch and torch.__version__, "cuda available:", bool(torch and torch.cuda.is_available()))
open("value.txt", "w").write(str(used))
"""
PACKAGE = {
    "task.toml": '[metric]\nname = "gpu"\nhigher_is_better = true\n[resources]\ngpus = 1\n',
    "env/train.py": SEES_GPU,
    "scripts/research_problem.txt": "Multiply two matrices on the GPU.\n",
    "scripts/eval.py": (
        "import os\n\ndef get_score(submission_folder='../env'):\n"
        "    return float(open(os.path.join(submission_folder, 'value.txt')).read())\n"
    ),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sandbox", default="bwrap", choices=["bwrap", "docker"])
    parser.add_argument("--database-url", default="")
    args = parser.parse_args()
    if not glob.glob("/dev/nvidia[0-9]*"):
        print("no GPU on this machine (no /dev/nvidia0): nothing to check")
        return 2
    var = django_scratch("gpu-check-", args.database_url)
    from django.conf import settings
    from django.core.management import call_command

    from runner.execution import run_execute
    from runner.models import Step
    from runner.services import run_create

    call_command("migrate", verbosity=0)
    settings.BENCH_SANDBOX = args.sandbox
    version = task_validated(var / "package", "gpu-check", PACKAGE)
    print(f"validation: {version.status}, baseline {version.baseline_score}: {version.validation_summary}")
    script = [
        {"type": "act", "action": "Execute Script", "input": {"script_name": "train.py"}},
        {"type": "act", "action": "Final Answer", "input": {"final_answer": "multiplied on the GPU"}},
    ]
    run = run_execute(run_create(task=version.task, agent=scripted_agent("gpu", script), enqueue=False).pk)
    step = Step.objects.get(run=run, action="Execute Script")
    print(f"run {run.pk}: {run.status}, score {run.final_score}, queue {run.queue}")
    print(step.observation)
    ok = version.status == "ready" and version.baseline_score == 1.0 and run.final_score == 1.0
    print("GPU task end to end:", "yes" if ok else "NO")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
