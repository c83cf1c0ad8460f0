"""How any agent's process starts in its sandbox: a run's conversation and an upload's smoke test start it the
same way."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

import mlab_agents

from ..sandbox import Limits, Mount, Sandbox, SandboxError

AGENTS_DIR = Path(mlab_agents.__file__).resolve().parent


def agent_popen(
    *,
    sandbox: Sandbox,
    entrypoint: str,
    package_path: str | Path = "",
    trusted: bool = False,
    run_id: int = 0,
    masks: Sequence[Mount] = (),
) -> subprocess.Popen:
    """Start an agent in ``sandbox``: no workspace, ``mlab_agents`` and its package (if any) mounted read-only,
    the task's package data masked, stdin, stdout and stderr piped. An agent that is not built in runs only in a
    sandbox that isolates."""
    if not trusted and not sandbox.isolates:
        raise SandboxError(
            f"the {sandbox.name} sandbox does not isolate processes and runs built-in agents only; "
            "use BENCH_SANDBOX=bwrap or docker for uploaded agents"
        )
    mounts = [Mount(AGENTS_DIR, "/opt/mlab/mlab_agents")]
    python_path = "/opt/mlab"
    if package_path:
        mounts.append(Mount(Path(package_path), "/opt/agent"))
        python_path += ":/opt/agent"
    return sandbox.popen(
        [sandbox.python, "-u", "-m", entrypoint],
        mounts=[*mounts, *masks],
        cwd="/tmp",
        env={"PYTHONPATH": python_path, "MLAB_RUN_ID": str(run_id)},
        limits=Limits(memory_mb=4096),
        stdin=subprocess.PIPE,
    )
