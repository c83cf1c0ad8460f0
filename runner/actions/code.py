"""Code actions: run in the workspace sandbox with no network, under the run's limits."""

from __future__ import annotations

from .environment import WORKSPACE, ActionOutcome, EnvError, Environment


def execute_script(env: Environment, script_name: str) -> ActionOutcome:
    path = env.resolve(script_name)
    if not path.is_file():
        raise EnvError(f"The file {script_name} does not exist.")
    rel = env.relative(path)
    from ..sandbox.process import run_process

    proc = env.sandbox.popen(
        [env.python, "-u", rel],
        mounts=env.mounts(),
        cwd=WORKSPACE,
        env=env.sandbox_env(),
        limits=env.limits,
    )
    result = run_process(
        proc,
        timeout=env.action_timeout_s,
        keep_bytes=env.observation_limit,
        on_output=env.on_output,
        tick=env.tick,
    )
    detail = {
        "exit_code": result.exit_code,
        "duration_s": round(result.duration_s, 3),
        "cpu_seconds": round(result.cpu_seconds, 3),
        "max_rss_mb": round(result.max_rss_mb, 1),
        "output_bytes": result.output_bytes,
    }
    if result.timed_out:
        text = result.stdout + result.stderr
        return ActionOutcome(
            f"EnvError: the script {script_name} was stopped after the {env.action_timeout_s:.0f}-second time "
            f"limit for one action. Output before it was stopped:\n{text}",
            error=True,
            detail=detail | {"limit": "action_timeout"},
        )
    output = result.stdout if result.exit_code == 0 else result.stderr
    if result.exit_code == 0 and not output.strip():
        output = result.stderr
    note = ""
    if result.exit_code != 0:
        note = f"\n(The script exited with code {result.exit_code}{_signal_note(result.exit_code, env)}.)"
    return ActionOutcome(
        "The script has been executed. Here is the output:\n" + output + note,
        error=result.exit_code != 0,
        detail=detail,
    )


def _signal_note(exit_code: int | None, env: Environment) -> str:
    if exit_code is None or exit_code >= 0:
        return ""
    import signal

    try:
        name = signal.Signals(-exit_code).name
    except ValueError:
        name = f"signal {-exit_code}"
    hints = {
        "SIGKILL": " - killed, most likely for using more memory than the limit",
        "SIGXCPU": f" - the CPU time limit of {env.limits.cpu_seconds} s was reached",
        "SIGXFSZ": f" - a file grew over the {env.limits.file_size_mb} MB file size limit",
        "SIGSEGV": " - a segmentation fault (possibly memory exhaustion)",
    }
    return f": {name}{hints.get(name, '')}"


HANDLERS = {"Execute Script": execute_script}
