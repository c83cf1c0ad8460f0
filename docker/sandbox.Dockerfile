# The image of the docker sandbox (BENCH_SANDBOX=docker): Python 3.11 with what task scripts, agents and eval.py
# import, and nothing of the platform (no Django, no Celery). The platform mounts the workspace, the agent code
# (mlab_agents, at /opt/mlab), the evaluation harness (runner/harness, at /opt/mlab/harness) and the hidden task
# scripts at run time.
#
# Built offline by docker/build-images.sh, which prepares the build context: wheels of every package
# (requirements.txt: the `tasks` extra; nodeps.txt: packages installed without their declared dependencies), made
# on the host with pip. BASE is a Debian root filesystem brought in with `docker import` (the same script).
#   docker/build-images.sh sandbox
ARG BASE=mlab-bench-base:bookworm

FROM ${BASE} AS install
# build-images.sh removes this stage's image (the wheels and the venv: over 2 GB) once the sandbox image is built.
LABEL mlab-bench.stage=sandbox-install
COPY . /wheels
# A venv at /usr/local: its interpreter is /usr/local/bin/python, which the platform runs inside (BENCH_SANDBOX_PYTHON
# for docker). Nothing comes from an index: every wheel is in the context.
RUN python3 -m venv /usr/local \
    && /usr/local/bin/pip install --no-cache-dir --no-index --find-links /wheels -r /wheels/requirements.txt \
    && /usr/local/bin/pip install --no-cache-dir --no-index --find-links /wheels --no-deps -r /wheels/nodeps.txt

# The installed venv alone, without the wheels it came from.
FROM ${BASE}
COPY --from=install /usr/local /usr/local
ENV LANG=C.UTF-8 PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PATH=/usr/local/bin:/usr/bin:/bin
WORKDIR /workspace
