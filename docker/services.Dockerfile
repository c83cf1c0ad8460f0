# PostgreSQL and Redis for docker/compose.yaml, from Debian's packages on the same base as the platform's images
# (there is no image registry to pull postgres or redis images from).
#   DOCKER_BUILDKIT=0 docker build -f docker/services.Dockerfile --target postgres -t mlab-bench-postgres docker
ARG BASE=mlab-bench-base:bookworm

# PostgreSQL 15. The first start makes the cluster in /var/lib/postgresql/data (a volume) with the password of
# POSTGRES_PASSWORD for user postgres over the network, and the database POSTGRES_DB.
FROM ${BASE} AS postgres
RUN apt-get update -qq \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql-15 >/dev/null \
    && rm -rf /var/lib/apt/lists/* \
    && mkdir -p /var/lib/postgresql/data /run/postgresql && chown -R postgres:postgres /var/lib/postgresql /run/postgresql
COPY postgres-start.sh /usr/local/bin/postgres-start
USER postgres
ENV PATH=/usr/local/bin:/usr/lib/postgresql/15/bin:/usr/bin:/bin PGDATA=/var/lib/postgresql/data
EXPOSE 5432
CMD ["postgres-start"]

# Redis 7, the broker: no persistence needed (the database is the queue; the reaper sends lost messages again).
FROM ${BASE} AS redis
RUN apt-get update -qq \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends redis-server >/dev/null \
    && rm -rf /var/lib/apt/lists/*
USER redis
EXPOSE 6379
CMD ["redis-server", "--bind", "0.0.0.0", "--protected-mode", "no", "--save", "", "--appendonly", "no"]

# Prometheus, for `--profile metrics`: it scrapes the web service's /metrics every 15 s with the bearer token
# BENCH_METRICS_TOKEN (written to a file at start: Prometheus reads credentials from a file, not the environment).
FROM ${BASE} AS prometheus
RUN apt-get update -qq \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null \
    && rm -rf /var/lib/apt/lists/*
COPY prometheus.yml /etc/prometheus/prometheus.yml
EXPOSE 9090
CMD ["sh", "-c", "printf %s \"$BENCH_METRICS_TOKEN\" > /tmp/metrics-token && exec prometheus --config.file=/etc/prometheus/prometheus.yml --storage.tsdb.path=/prometheus --web.listen-address=0.0.0.0:9090"]
