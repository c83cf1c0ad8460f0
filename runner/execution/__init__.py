"""Executing a run: claim it, prepare the task, converse with the agent, record every step, evaluate, finish.

- ``session``: the run's life on a worker (claim, stages, evaluation, the end); ``pulse``: its heartbeat, cancel,
  hand-back, deadline and live output; ``workspaces``: an attempt's workspace and environment; ``action_llm``: the
  model of the LLM-backed actions;
- ``conversation``: the agent process and the protocol loop, one handler per message kind;
- ``recording``: the writes (each step, the run's end), fenced by the run's attempt;
- ``validation``: task validation runs (the measured baseline) and their queueing;
- ``reaper``: runs whose worker died, queued again or failed;
- ``endings``: how a run can end, as types;
- ``preparation``: prepare.py once per task version (cached); ``evaluation``: scoring in the sandbox (paired for
  timed tasks);
- ``protocol``, ``agent_process``: the agent's channel and process;
- ``sandboxes``: the configured sandbox; ``workers``, ``stopping``: worker heartbeats and handing runs back;
- ``views``: the workers page.
"""

from .session import RunSession, run_claim, run_claim_next, run_execute, run_execute_next, runs_dir

__all__ = ["RunSession", "run_claim", "run_claim_next", "run_execute", "run_execute_next", "runs_dir"]
