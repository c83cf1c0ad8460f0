# The image of the docker sandbox (BENCH_SANDBOX=docker): Python with what task scripts, agents and eval.py
# import. The platform mounts the workspace, the agent code, the evaluation harness (runner/harness, at
# /opt/mlab/harness) and the hidden task scripts at run time.
#   docker build -f docker/sandbox.Dockerfile -t mlab-bench-sandbox:latest .
FROM python:3.11-slim
ENV PIP_NO_CACHE_DIR=1 PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY bench ./bench
COPY task_bank ./task_bank
COPY runner ./runner
COPY leaderboard ./leaderboard
COPY mlab_agents ./mlab_agents
# The CPU build of torch (the tasks extra pins the version); then the rest of the task packages.
RUN pip install --extra-index-url https://download.pytorch.org/whl/cpu ".[tasks]" \
    && pip uninstall -y mlab-bench && rm -rf /src
WORKDIR /workspace
