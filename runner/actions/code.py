"""Code actions: Execute Script and Python REPL run in the workspace sandbox, no network, under the limits."""

from __future__ import annotations

import signal
import time

from ..sandbox.process import ProcessResult, run_process
from ..sandbox.supervised import SupervisorLost
from .catalogue import EXECUTE_SCRIPT, PYTHON_REPL
from .types import ActionEnv, ActionOutcome, EnvError


def limits_note(env: ActionEnv, result: ProcessResult) -> str:
    """Which limit stopped the process, in words the agent can act on ('' when none did)."""
    if result.stopped_reason:
        return result.stopped_reason
    if result.timed_out:
        also = f" (it had also hit the limit of {env.limits.processes} processes)" if result.hit_process_limit else ""
        return f"it was stopped after the {env.action_timeout_s:.0f}-second time limit of one action{also}"
    if result.oom_killed:
        return f"it was killed for using more than the memory limit of {env.limits.memory_mb} MB"
    if result.hit_process_limit:
        return f"it tried to start more than the limit of {env.limits.processes} processes"
    code = result.exit_code
    if code is None or code == 0:
        return ""
    if env.limits.cpu_seconds and result.cpu_seconds >= env.limits.cpu_seconds:
        return f"it reached the CPU time limit of {env.limits.cpu_seconds} s"
    signum = -code if code < 0 else code - 128 if code > 128 else 0
    try:
        name = signal.Signals(signum).name if signum else ""
    except ValueError:
        name = ""
    return {
        "SIGXCPU": f"it reached the CPU time limit of {env.limits.cpu_seconds} s",
        "SIGXFSZ": f"a file grew over the file size limit of {env.limits.file_size_mb} MB",
        "SIGKILL": "it was killed (SIGKILL), most likely for using more memory than the limit",
    }.get(name, "")


def workspace_guard(env: ActionEnv):
    """A check for run_process: stop the script when the workspace grows over its size limit."""
    last = [0.0]

    def check() -> str:
        now = time.monotonic()
        if not env.workspace_limit_mb or now - last[0] < 2.0:  # 0: no limit, nothing to walk
            return ""
        last[0] = now
        size = env.workspace_size_mb()
        if size > env.workspace_limit_mb:
            return (
                f"it was stopped because the workspace grew to {size:.0f} MB, over its limit of "
                f"{env.workspace_limit_mb} MB"
            )
        return ""

    return check


def execute_script(env: ActionEnv, script_name: str) -> ActionOutcome:
    rel = env.name(script_name)
    if env.kind(script_name) != "file":
        raise EnvError(f"The file {script_name} does not exist.")
    try:
        result = run_process(
            env.script_process([env.python, "-u", rel]),
            timeout=env.action_timeout_s,
            keep_bytes=env.observation_limit,
            on_output=env.on_output,
            tick=env.tick,
            check=workspace_guard(env),
        )
    except SupervisorLost as exc:
        return ActionOutcome(
            f"EnvError: the script {script_name} could not be run to its end because its sandbox failed "
            f"(an infrastructure error: {exc}). The next action starts a new sandbox.",
            error=True,
            detail={"infrastructure_error": str(exc)},
        )
    detail = {
        "exit_code": result.exit_code,
        "duration_s": round(result.duration_s, 3),
        "cpu_seconds": round(result.cpu_seconds, 3),
        "max_rss_mb": round(result.max_rss_mb, 1),
        "output_bytes": result.output_bytes,
    }
    limit = limits_note(env, result)
    if limit:
        detail["limit"] = limit
    if result.timed_out or result.stopped_reason:
        text = (result.stdout + result.stderr).strip()
        return ActionOutcome(
            f"EnvError: the script {script_name} did not finish: {limit}. Output before it was stopped:\n{text}",
            error=True,
            detail=detail,
        )
    output = result.stdout if result.exit_code == 0 else result.stderr
    if result.exit_code == 0 and not output.strip():
        output = result.stderr
    note = ""
    if result.exit_code != 0:
        note = f"\n(The script exited with code {result.exit_code}{': ' + limit if limit else ''}.)"
    return ActionOutcome(
        "The script has been executed. Here is the output:\n" + output + note,
        error=result.exit_code != 0,
        detail=detail,
    )


def python_repl(env: ActionEnv, command: str) -> ActionOutcome:
    return env.repl().run(command)


HANDLERS = {EXECUTE_SCRIPT: execute_script, PYTHON_REPL: python_repl}
