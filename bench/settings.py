"""Settings, read entirely from environment variables with safe defaults.

The embedded default needs no services: SQLite and a filesystem broker under ``var/``. Set
``DATABASE_URL`` (PostgreSQL) and ``CELERY_BROKER_URL`` (Redis or RabbitMQ) to scale out.
"""

import hashlib
import os
import secrets
import shutil
import warnings
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from kombu import Exchange, Queue

BASE_DIR = Path(__file__).resolve().parent.parent


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def _env_number(name: str, default, kind: type):
    value = os.environ.get(name)
    if not value:
        return default
    try:
        return kind(value)
    except ValueError:
        what = "a whole number" if kind is int else "a number"
        raise ImproperlyConfigured(f"the environment variable {name} must be {what}, got {value!r}") from None


def env_int(name: str, default: int) -> int:
    return _env_number(name, default, int)


def env_float(name: str, default: float) -> float:
    return _env_number(name, default, float)


def env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


VAR_DIR = Path(os.environ.get("BENCH_VAR_DIR", BASE_DIR / "var")).resolve()
VAR_DIR.mkdir(parents=True, exist_ok=True)


def _secret_key() -> str:
    """SECRET_KEY from the environment; the embedded default keeps a generated one in var/."""
    if os.environ.get("SECRET_KEY"):
        return os.environ["SECRET_KEY"]
    path = VAR_DIR / "secret_key"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


SECRET_KEY = _secret_key()
DEBUG = env_bool("DEBUG", False)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "127.0.0.1,localhost,[::1],testserver")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", "")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "template_partials",
    "task_bank",
    "runner",
    "leaderboard",
    "accounts",
]

MIDDLEWARE = [
    "django_prometheus.middleware.PrometheusBeforeMiddleware",  # /metrics: requests counted and timed
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "core.middleware.RejectNulBytesMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "django_prometheus.middleware.PrometheusAfterMiddleware",
]

ROOT_URLCONF = "bench.urls"
WSGI_APPLICATION = "bench.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL") or f"sqlite:///{VAR_DIR / 'bench.sqlite3'}",
        conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 0),
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Web server and worker write to the same file: wait for locks instead of failing at once,
    # and take the write lock at the start of a transaction so it cannot be upgraded into a deadlock.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {"timeout": 30, "transaction_mode": "IMMEDIATE", "init_command": "PRAGMA journal_mode=WAL;"}
    )
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT", VAR_DIR / "staticfiles"))
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
# `collectstatic` (make run, the web image) writes each file and its gzip beside it; WhiteNoise sends the gzip to a
# browser that takes it. Before anything is collected (a fresh checkout, the tests), files come from static/ as
# they are.
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = not any(STATIC_ROOT.iterdir())


def _static_headers(headers, path: str, url: str) -> None:
    """Vendored libraries carry their version in their file name: browsers may keep them for a year."""
    if "/vendor/" in url:
        headers["Cache-Control"] = "public, max-age=31536000, immutable"


WHITENOISE_ADD_HEADERS_FUNCTION = _static_headers
#: The documentation site as `make docs` builds it (mkdocs.yml's site_dir), served at /docs/.
BENCH_DOCS_DIR = Path(os.environ.get("BENCH_DOCS_DIR", BASE_DIR / "var" / "docs-site"))
MEDIA_ROOT = Path(os.environ.get("MEDIA_ROOT", VAR_DIR / "media"))
MEDIA_URL = "media/"

# --- Caches -------------------------------------------------------------------------------------------
# "default": this process's memory, for what is only a cache (the leaderboard's figures, rendered step cards).
# "shared": what every web process must count together (core.shared_cache): the sign-up, sign-in, upload and
# run-request limits. A table in the database (runner's migration 0017 creates it) unless BENCH_SHARED_CACHE_URL
# names a Redis server (a database of its own: clearing the cache empties the whole database).
BENCH_SHARED_CACHE_URL = os.environ.get("BENCH_SHARED_CACHE_URL", "")
SHARED_CACHE_SCHEMES = ("redis://", "rediss://", "unix://")
if BENCH_SHARED_CACHE_URL and not BENCH_SHARED_CACHE_URL.startswith(SHARED_CACHE_SCHEMES):
    raise ImproperlyConfigured(
        "BENCH_SHARED_CACHE_URL must be the URL of a Redis server (redis://HOST:PORT/DB, rediss://... or "
        f"unix://PATH), or empty for a table in the database; got {BENCH_SHARED_CACHE_URL!r}"
    )
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    "shared": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": BENCH_SHARED_CACHE_URL}
    if BENCH_SHARED_CACHE_URL
    else {
        "BACKEND": "django.core.cache.backends.db.DatabaseCache",
        "LOCATION": "bench_shared_cache",  # core.shared_cache.SHARED_CACHE_TABLE
        # Past this many entries the table drops its expired ones, then a third of the rest: far above the counts
        # of one window, so a live count is not dropped.
        "OPTIONS": {"MAX_ENTRIES": 100_000},
    },
}

LOGIN_URL = "accounts:login"
LOGIN_REDIRECT_URL = "accounts:account"
LOGOUT_REDIRECT_URL = "leaderboard:home"
# Attempts per minute from one address (counted in the shared cache, one count across web processes): a
# sign-up, a sign-in (per account) or a password reset request over the limit is answered 429 with how long to
# wait; and sign-ins from one address over all accounts.
BENCH_SIGNUP_PER_MINUTE = env_int("BENCH_SIGNUP_PER_MINUTE", 5)
BENCH_SIGNIN_PER_MINUTE = env_int("BENCH_SIGNIN_PER_MINUTE", 10)
BENCH_SIGNIN_PER_ADDRESS_PER_MINUTE = env_int("BENCH_SIGNIN_PER_ADDRESS_PER_MINUTE", 60)
# The proxies (their addresses) whose X-Forwarded-For names the client, for those limits; from any other
# address the header is ignored.
BENCH_TRUSTED_PROXIES = env_list("BENCH_TRUSTED_PROXIES", "")

# --- Email (password reset links) ---------------------------------------------------------------------
# Printed to the console unless BENCH_EMAIL_HOST names an SMTP server.
BENCH_EMAIL_HOST = os.environ.get("BENCH_EMAIL_HOST", "")
if BENCH_EMAIL_HOST:
    EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    EMAIL_HOST = BENCH_EMAIL_HOST
    EMAIL_PORT = env_int("BENCH_EMAIL_PORT", 587)
    EMAIL_HOST_USER = os.environ.get("BENCH_EMAIL_USER", "")
    EMAIL_HOST_PASSWORD = os.environ.get("BENCH_EMAIL_PASSWORD", "")
    EMAIL_USE_TLS = env_bool("BENCH_EMAIL_USE_TLS", True)
    EMAIL_USE_SSL = env_bool("BENCH_EMAIL_USE_SSL", False)
    EMAIL_TIMEOUT = env_int("BENCH_EMAIL_TIMEOUT_S", 30)
    if EMAIL_USE_TLS and EMAIL_USE_SSL:
        raise ImproperlyConfigured("set only one of BENCH_EMAIL_USE_TLS and BENCH_EMAIL_USE_SSL")
else:
    EMAIL_BACKEND = "django.core.mail.backends.console.EmailBackend"
DEFAULT_FROM_EMAIL = os.environ.get("BENCH_EMAIL_FROM", "mlab-bench <noreply@localhost>")

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        # Named tokens of the account page (keys start with mlb_), then rest_framework.authtoken's single ones.
        "accounts.authentication.ApiTokenAuthentication",
        "rest_framework.authentication.TokenAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticatedOrReadOnly"],
    "DEFAULT_PAGINATION_CLASS": "core.pagination.BoundedLimitOffsetPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "core.schema.BenchAutoSchema",
    # Uploads work in the sandbox (an agent's smoke test, a log's scoring): at most this many per user
    # (?/minute, ?/hour, ?/day). Requests for runs (a submission, or staff starting runs) per user, site and API
    # together. Counted in the shared cache (CACHES above).
    "DEFAULT_THROTTLE_RATES": {
        "agent_uploads": os.environ.get("BENCH_AGENT_UPLOAD_RATE") or "20/hour",
        "log_uploads": os.environ.get("BENCH_LOG_UPLOAD_RATE") or "20/hour",
        "run_requests": os.environ.get("BENCH_RUN_REQUEST_RATE") or "60/hour",
    },
}
SPECTACULAR_SETTINGS = {
    "TITLE": "mlab-bench API",
    "DESCRIPTION": "Tasks, runs, their steps and the leaderboard. Reads are open; starting and cancelling runs "
    "needs a staff account (session or `Authorization: Token <key>`, a key made on the account page).",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums", "core.schema.request_line_limit"],
}

# --- Celery -------------------------------------------------------------------------------------------
# The longest any one operation on the broker may take (connect, send, read): seconds.
BENCH_BROKER_TIMEOUT_S = env_float("BENCH_BROKER_TIMEOUT_S", 2.0)
# The embedded default is kombu's filesystem transport: no server, messages are files under var/.
BROKER_DIR = VAR_DIR / "broker"
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL") or "filesystem://localhost//"  # a host named: no warning
if CELERY_BROKER_URL.startswith("filesystem://"):
    for sub in ("queue", "processed", "control"):
        (BROKER_DIR / sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(BROKER_DIR / "queue"),
        "data_folder_out": str(BROKER_DIR / "queue"),
        "processed_folder": str(BROKER_DIR / "processed"),
        "store_processed": False,
        "control_folder": str(BROKER_DIR / "control"),
    }
else:
    # Redis: a message not acknowledged within this time is delivered again. Runs are long; the
    # database (not the broker) decides whether a redelivered run still needs a worker.
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": env_int("CELERY_VISIBILITY_TIMEOUT", 6 * 3600)}
    # A broker that accepts connections and never answers must not hang a request, a job or /healthz: every
    # socket operation on it has a time limit (Redis; AMQP's are below).
    if CELERY_BROKER_URL.startswith(("redis://", "rediss://", "unix://")):
        CELERY_BROKER_TRANSPORT_OPTIONS |= {
            "socket_timeout": BENCH_BROKER_TIMEOUT_S,
            "socket_connect_timeout": BENCH_BROKER_TIMEOUT_S,
        }
    else:
        CELERY_BROKER_TRANSPORT_OPTIONS |= {
            "read_timeout": BENCH_BROKER_TIMEOUT_S,
            "write_timeout": BENCH_BROKER_TIMEOUT_S,
        }
CELERY_BROKER_CONNECTION_TIMEOUT = BENCH_BROKER_TIMEOUT_S
# Publishing a job tries twice at most, each bounded by the timeouts above: a write that cannot be queued answers 503
# and the reaper sends its job later.
CELERY_TASK_PUBLISH_RETRY_POLICY = {"max_retries": 1, "interval_start": 0, "interval_step": 0.5, "interval_max": 0.5}
# Queues by kind of work (runner/jobs.py): agent runs (validation runs too) on CELERY_QUEUE; short jobs (step
# scoring, the reaper) and GPU runs (a task that asks for a GPU) each on a queue of their own, named after it unless
# set. A worker started without --queues serves them all; BENCH_WORKER_QUEUES narrows the Procfile's and the
# image's worker (e.g. a GPU machine's: bench-gpu). The first start's demo runs go to <CELERY_QUEUE>-demo, a lane
# that only a worker named to it serves (the Procfile's demo process): it is not among these.
CELERY_TASK_DEFAULT_QUEUE = os.environ.get("CELERY_QUEUE", "bench")
BENCH_SHORT_QUEUE = os.environ.get("BENCH_SHORT_QUEUE", "")  # empty: <CELERY_QUEUE>-short
BENCH_GPU_QUEUE = os.environ.get("BENCH_GPU_QUEUE", "")  # empty: <CELERY_QUEUE>-gpu
# The GPUs a bare MLAgentBench folder's runs get (MLAgentBench gives one, its --device): 1 on a deployment whose
# GPU queue has workers, so that they go there; 0, the default, where none has.
BENCH_BARE_FOLDER_GPUS = env_int("BENCH_BARE_FOLDER_GPUS", 0)
# The Python packages a bare MLAgentBench folder's scripts get, installed once like a task's [environment] packages:
# "mlagentbench" (MLAgentBench's environment of its time, task_bank/mlagentbench-environment.txt: about 6.5 GB),
# "none" (the platform's own packages only), or requirement specifiers separated by spaces.
BENCH_BARE_FOLDER_PACKAGES = os.environ.get("BENCH_BARE_FOLDER_PACKAGES", "mlagentbench")
# The device files of a worker's GPUs, for the bwrap sandbox (a glob; the docker sandbox asks its engine instead).
BENCH_GPU_DEVICES = os.environ.get("BENCH_GPU_DEVICES", "/dev/nvidia[0-9]*")
# Each queue on an exchange of its own name, bound by its name (as Celery makes a queue it was not told of): a
# message for one queue never reaches another.
CELERY_TASK_QUEUES = [
    Queue(name, Exchange(name, type="direct"), routing_key=name)
    for name in (
        CELERY_TASK_DEFAULT_QUEUE,
        BENCH_SHORT_QUEUE or f"{CELERY_TASK_DEFAULT_QUEUE}-short",
        BENCH_GPU_QUEUE or f"{CELERY_TASK_DEFAULT_QUEUE}-gpu",
    )
]
CELERY_TASK_ROUTES = ("runner.jobs.job_route",)
# A run's job is stopped after this long whatever run it executes (its run goes back to the queue and another job
# resumes it); a run's own limits end it long before, unless its max_time_s is longer.
BENCH_RUN_JOB_TIME_LIMIT_S = env_int("BENCH_RUN_JOB_TIME_LIMIT_S", 24 * 3600)
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = False
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_WORKER_HIJACK_ROOT_LOGGER = False

# --- The benchmark ------------------------------------------------------------------------------------
BENCH_DATA_DIR = VAR_DIR
BENCH_RUNS_DIR = Path(os.environ.get("BENCH_RUNS_DIR", VAR_DIR / "runs"))
BENCH_TASK_CACHE_DIR = Path(os.environ.get("BENCH_TASK_CACHE_DIR", VAR_DIR / "tasks"))
# The seed a generated task draws its data from (prepare.py reads BENCH_TASK_SEED): this deployment's own and secret,
# never a public default, so that no agent can generate a task's hidden test data again. Derived from SECRET_KEY
# unless set. 32 bits, what numpy's legacy seeding takes. Changing it changes the data of tasks prepared after:
# clear BENCH_TASK_CACHE_DIR and validate them again.
# Kaggle credentials for prepare.py (MLAgentBench's folders download competitions' files): given to prepare.py only,
# and only where it may reach the network (task.toml [prepare] network = true and BENCH_ALLOW_PREPARE_NETWORK).
BENCH_KAGGLE_USERNAME = os.environ.get("BENCH_KAGGLE_USERNAME", "")
BENCH_KAGGLE_KEY = os.environ.get("BENCH_KAGGLE_KEY", "")
BENCH_TASK_SEED = os.environ.get("BENCH_TASK_SEED") or str(
    int(hashlib.sha256(f"task seed:{SECRET_KEY}".encode()).hexdigest()[:8], 16)
)
# A task's own Python packages ([environment] packages): installed once per list by the worker, wheels only, from the
# package registry it reaches (runner/execution/task_packages.py), within this many seconds.
BENCH_TASK_PACKAGES_DIR = Path(os.environ.get("BENCH_TASK_PACKAGES_DIR", VAR_DIR / "task-packages"))
BENCH_TASK_PACKAGES_TIMEOUT_S = env_int("BENCH_TASK_PACKAGES_TIMEOUT_S", 1800)
BENCH_BLOB_DIR = Path(os.environ.get("BENCH_BLOB_DIR", MEDIA_ROOT / "blobs"))


def _default_sandbox() -> str:
    if shutil.which("bwrap"):
        return "bwrap"
    warnings.warn(
        "bubblewrap (bwrap) is not installed: falling back to the 'local' sandbox, which does not "
        "isolate agent code. Install bubblewrap (apt-get install bubblewrap) for real sandboxing.",
        RuntimeWarning,
        stacklevel=1,
    )
    return "local"


BENCH_SANDBOX = os.environ.get("BENCH_SANDBOX") or _default_sandbox()
# Python interpreter used inside sandboxes for task scripts and agents (the project's own by default).
BENCH_SANDBOX_PYTHON = os.environ.get("BENCH_SANDBOX_PYTHON", "")
BENCH_DOCKER_IMAGE = os.environ.get("BENCH_DOCKER_IMAGE", "mlab-bench-sandbox:latest")
BENCH_DOCKER_HOST = os.environ.get("BENCH_DOCKER_HOST", "")
BENCH_DOCKER_USER = os.environ.get("BENCH_DOCKER_USER", "65534:65534")
# Seconds the docker client waits for one answer of the engine (a container's create on a slow storage driver).
BENCH_DOCKER_TIMEOUT_S = env_float("BENCH_DOCKER_TIMEOUT_S", 120.0)
# The unprivileged user sandboxed code runs as when the worker runs as root (nobody by default).
BENCH_SANDBOX_UID = env_int("BENCH_SANDBOX_UID", 65534)
BENCH_SANDBOX_GID = env_int("BENCH_SANDBOX_GID", 65534)
# "FIRST-LAST": each run's sandboxed code runs as a uid (and gid) of its own from this range, so nothing of one run
# (its processes, files in shared places, per-user limits such as RLIMIT_NPROC where there are no cgroups) is another
# run's. The default of a root worker, which can run code as any uid; "off": every run as BENCH_SANDBOX_UID (the only
# choice of a worker that is not root). Give each worker host a range no other user of the host has.
BENCH_SANDBOX_UID_RANGE = os.environ.get("BENCH_SANDBOX_UID_RANGE", "200000-299999" if os.geteuid() == 0 else "")
if BENCH_SANDBOX_UID_RANGE.strip().lower() in ("off", "none", "0"):
    BENCH_SANDBOX_UID_RANGE = ""
# bwrap: a run's Execute Script actions run one after another in one sandbox kept for the run (a supervisor inside
# it starts each script and kills all it left behind), instead of a new sandbox per action.
BENCH_SANDBOX_PERSISTENT = env_bool("BENCH_SANDBOX_PERSISTENT", True)
BENCH_ACTION_TIMEOUT_S = env_int("BENCH_ACTION_TIMEOUT_S", 1800)
# CPU seconds one script may use; 0 = the action time limit times the task's cpus (so a script that runs more
# threads than its share is stopped with a message instead of starving the rest of the worker).
BENCH_ACTION_CPU_S = env_int("BENCH_ACTION_CPU_S", 0)
BENCH_EVAL_TIMEOUT_S = env_int("BENCH_EVAL_TIMEOUT_S", 900)
# A timed task's final score: the baseline and the final workspace are each measured this many times, alternately.
BENCH_TIMED_ROUNDS = env_int("BENCH_TIMED_ROUNDS", 3)
BENCH_PREPARE_TIMEOUT_S = env_int("BENCH_PREPARE_TIMEOUT_S", 1800)
# The most of an observation (a script's output, a file read) the agent is sent, in characters, head and tail kept:
# as MLAgentBench passes observations whole (its research agent summarises one in 10,000-character blocks), this only
# bounds what the platform holds. A step's row shows at most 20,000 characters of it; the whole is a blob.
BENCH_OBSERVATION_LIMIT = env_int("BENCH_OBSERVATION_LIMIT", 2_000_000)
BENCH_HEARTBEAT_S = env_float("BENCH_HEARTBEAT_S", 5.0)
# A live run whose heartbeat is older than this is taken to have lost its worker (the reaper re-queues it).
BENCH_HEARTBEAT_STALE_S = env_float("BENCH_HEARTBEAT_STALE_S", 120.0)
# How long a run's worker tries a lost database connection again before the attempt gives the run back to the
# queue (core.db_retry): a restart or failover of the database within this costs a run nothing.
BENCH_DB_RETRY_S = env_float("BENCH_DB_RETRY_S", 30.0)
BENCH_RUN_MAX_ATTEMPTS = env_int("BENCH_RUN_MAX_ATTEMPTS", 3)
# How often a worker records that it is alive (the staff page of workers, /workers/).
BENCH_WORKER_HEARTBEAT_S = env_float("BENCH_WORKER_HEARTBEAT_S", 15.0)
# The reaper forgets a worker not heard of for this long (a replaced container, a retired machine).
BENCH_WORKER_FORGET_AFTER_S = env_float("BENCH_WORKER_FORGET_AFTER_S", 7 * 24 * 3600)
# The most runs one request (the API's POST /api/v1/runs/, bench_run) may queue: tasks x repeats.
BENCH_MAX_RUNS_PER_REQUEST = env_int("BENCH_MAX_RUNS_PER_REQUEST", 500)
# A submitter's request for runs is approved at once instead of waiting for staff.
BENCH_AUTO_APPROVE_SUBMISSIONS = env_bool("BENCH_AUTO_APPROVE_SUBMISSIONS", False)
# A submitter's runs: the model cost each may spend (USD) when the request names none, and the most it may name.
# Their steps and time stay within each task's own limits.
BENCH_SUBMISSION_COST_DEFAULT = env_float("BENCH_SUBMISSION_COST_DEFAULT", 5.0)
BENCH_SUBMISSION_COST_MOST = env_float("BENCH_SUBMISSION_COST_MOST", 50.0)
BENCH_REAPER_EVERY_S = env_float("BENCH_REAPER_EVERY_S", 30.0)
# The collector (runner/execution/collector.py): every this many seconds, the blobs nothing names that are older than
# the grace period go (and agent package and prepared task folders nothing uses). `manage.py collect_blobs` does the
# same at once.
BENCH_BLOB_COLLECT_EVERY_S = env_float("BENCH_BLOB_COLLECT_EVERY_S", 86400.0)
BENCH_BLOB_COLLECT_GRACE_S = env_float("BENCH_BLOB_COLLECT_GRACE_S", 86400.0)
BENCH_BLOB_COLLECT_TIME_LIMIT_S = env_int("BENCH_BLOB_COLLECT_TIME_LIMIT_S", 3600)
# What a run may add to the blob store (its snapshots' new files and full observations, after deduplication, on
# disk), and all the runs of one submitter's agents together; 0: no limit. Past either, the run ends at a limit and
# no new run of the submitter's agents is queued (nor a log of theirs imported) until runs are deleted.
BENCH_RUN_MAX_STORED_MB = env_int("BENCH_RUN_MAX_STORED_MB", 4096)
BENCH_USER_MAX_STORED_MB = env_int("BENCH_USER_MAX_STORED_MB", 20480)
# A queued run that could not be sent to the job queue (unreachable) is sent again by the reaper after this long.
BENCH_RESEND_AFTER_S = env_float("BENCH_RESEND_AFTER_S", 60.0)
BENCH_ADMIN_PASSWORD = os.environ.get("BENCH_ADMIN_PASSWORD", "")
# A Prometheus scraper's bearer token for /metrics (staff may read it signed in); empty: staff only.
BENCH_METRICS_TOKEN = os.environ.get("BENCH_METRICS_TOKEN", "")
# Where `make run`'s web server listens (the Procfile's web line reads the same variables): bench_ready says it.
BENCH_HOST = os.environ.get("BENCH_HOST", "127.0.0.1")
BENCH_PORT = env_int("BENCH_PORT", 8000)
# The site's address as people reach it, for links printed outside a page (bench_run's run pages): behind a proxy,
# its public address.
BENCH_SITE_URL = os.environ.get("BENCH_SITE_URL", f"http://{BENCH_HOST}:{BENCH_PORT}")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {
        "django.db.backends": {"level": "INFO"},
        "httpx": {"level": "WARNING"},
        "httpx2": {"level": "WARNING"},
        # Celery's lines per job received, done or dropped and per beat sent (BENCH_JOB_LOG_LEVEL=INFO shows them):
        # the reaper's pass every 30 s (one that waited past its period is dropped by design) filled the console;
        # the runner's own lines say what happens to runs.
        **{
            name: {"level": os.environ.get("BENCH_JOB_LOG_LEVEL", "WARNING")}
            for name in ("celery.worker.strategy", "celery.worker.request", "celery.app.trace", "celery.beat")
        },
    },
}

# --- Production: HTTPS ---------------------------------------------------------------------------------
# BENCH_HTTPS=1: the site is served over HTTPS, by a proxy in front of gunicorn that terminates TLS and says so in
# X-Forwarded-Proto (BENCH_PROXY_SSL_HEADER=0 when gunicorn itself serves TLS). Each setting below defaults to it
# and can be set on its own; `manage.py check --deploy` passes with BENCH_HTTPS=1, DEBUG off and a SECRET_KEY.
BENCH_HTTPS = env_bool("BENCH_HTTPS", False)
if BENCH_HTTPS and env_bool("BENCH_PROXY_SSL_HEADER", True):
    # Trust X-Forwarded-Proto only behind a proxy that sets it (and drops the client's own).
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", BENCH_HTTPS)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", BENCH_HTTPS)
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", BENCH_HTTPS)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 365 * 24 * 3600 if BENCH_HTTPS else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", BENCH_HTTPS)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", BENCH_HTTPS)
# The health check answers over plain HTTP too: probes (a load balancer, compose) talk to gunicorn directly.
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
# /healthz: how long the broker may take to answer before it is called down.
BENCH_HEALTH_TIMEOUT_S = env_float("BENCH_HEALTH_TIMEOUT_S", 3.0)

# --- LLM gateway --------------------------------------------------------------------------------------
BENCH_LLM_MAX_RETRIES = env_int("BENCH_LLM_MAX_RETRIES", 4)
# Model calls a run may record (each keeps its prompt and completion): at most this many for one step, and in all;
# past either, the run ends at a limit, and nothing more is recorded. MLAgentBench's agent summarises the longest
# observation (BENCH_OBSERVATION_LIMIT) in 200 blocks and one merge: a step has room for that and its own calls.
BENCH_LLM_CALLS_PER_STEP = env_int("BENCH_LLM_CALLS_PER_STEP", 250)
BENCH_LLM_CALLS_PER_RUN = env_int("BENCH_LLM_CALLS_PER_RUN", 2000)
# ... and the bytes of prompts and completions those rows may hold, in one step and in all (0: no limit).
BENCH_LLM_RECORDED_MB_PER_STEP = env_int("BENCH_LLM_RECORDED_MB_PER_STEP", 64)
BENCH_LLM_RECORDED_MB_PER_RUN = env_int("BENCH_LLM_RECORDED_MB_PER_RUN", 512)
BENCH_LLM_BACKOFF_S = env_float("BENCH_LLM_BACKOFF_S", 1.0)
# A JSON list of endpoints, synced into the database by `manage.py bench_init`, e.g.
# [{"name": "gpt-4o-mini", "base_url": "https://api.openai.com/v1", "api_key_env": "OPENAI_API_KEY",
#   "price_input_per_mtok": 0.15, "price_output_per_mtok": 0.6}]
BENCH_MODEL_ENDPOINTS = os.environ.get("BENCH_MODEL_ENDPOINTS", "")
# The optional local endpoint (runner/llm/local_model.py): `make run` starts SmolLM2-135M-Instruct under
# `transformers serve` on this loopback port, and bench_init registers it as "local-smollm2" at price 0.
BENCH_LOCAL_MODEL = env_bool("BENCH_LOCAL_MODEL", False)
BENCH_LOCAL_MODEL_PORT = env_int("BENCH_LOCAL_MODEL_PORT", 8011)
BENCH_ALLOW_PREPARE_NETWORK = env_bool("BENCH_ALLOW_PREPARE_NETWORK", False)
BENCH_WORKSPACE_LIMIT_MB = env_int("BENCH_WORKSPACE_LIMIT_MB", 2048)
# A run's workspace on a filesystem of its own, of the limit's size (runner/workspace/mounts.py), where the kernel
# refuses the write over the limit (needs a root worker): "ext4" (a loop-mounted sparse image on the runs folder's
# disk: the default where loop devices and mkfs.ext4 are at hand), "tmpfs" (in memory: a host holds what its runs
# wrote in RAM; the default of a root worker without loop devices, e.g. in a container), or "none" (a plain folder
# whose allocated blocks are counted after every action: the default of a worker that is not root).
BENCH_WORKSPACE_FS = os.environ.get("BENCH_WORKSPACE_FS") or (
    "none"
    if os.geteuid() != 0
    else "ext4"
    if Path("/dev/loop-control").exists() and shutil.which("mkfs.ext4")
    else "tmpfs"
)
BENCH_WORKSPACE_MAX_FILES = env_int("BENCH_WORKSPACE_MAX_FILES", 100_000)
# A step's workspace as a zip download (the run page): refused past this many megabytes of files.
BENCH_WORKSPACE_ZIP_MAX_MB = env_int("BENCH_WORKSPACE_ZIP_MAX_MB", 2048)

# --- Task packages ------------------------------------------------------------------------------------
BENCH_TASK_MAX_BYTES = env_int("BENCH_TASK_MAX_BYTES", 2 * 1024**3)
# An imported log's trace.json is read whole: at most this many bytes (MLAgentBench's are a few MB).
BENCH_TRACE_JSON_MAX_BYTES = env_int("BENCH_TRACE_JSON_MAX_BYTES", 64 * 1024**2)
BENCH_TASK_MAX_FILE_BYTES = env_int("BENCH_TASK_MAX_FILE_BYTES", 1024**3)
BENCH_TASK_MAX_FILES = env_int("BENCH_TASK_MAX_FILES", 100_000)
# Any zip (task package, agent package, log) unpacks to at most this many times its own size (and a small zip to at
# least BENCH_UPLOAD_RATIO_FLOOR_BYTES): what it may cost is bounded by what was sent.
BENCH_UPLOAD_MAX_RATIO = env_int("BENCH_UPLOAD_MAX_RATIO", 100)
BENCH_UPLOAD_RATIO_FLOOR_BYTES = env_int("BENCH_UPLOAD_RATIO_FLOOR_BYTES", 16 * 1024**2)
# An imported log holds at most this many files (its steps' workspaces).
BENCH_TRACE_MAX_FILES = env_int("BENCH_TRACE_MAX_FILES", 10_000)
# An uploaded agent must answer its first message within this many seconds (runner/agents/smoke.py).
BENCH_AGENT_SMOKE_TIMEOUT_S = env_float("BENCH_AGENT_SMOKE_TIMEOUT_S", 60.0)
# An uploaded agent package (a zip) may be at most this big.
BENCH_AGENT_UPLOAD_MAX_BYTES = env_int("BENCH_AGENT_UPLOAD_MAX_BYTES", 50 * 1024**2)
# An agent package (uploaded zip or imported folder) may hold at most this many bytes of files, unpacked.
BENCH_AGENT_MAX_UNPACKED_BYTES = env_int("BENCH_AGENT_MAX_UNPACKED_BYTES", 100 * 1024**2)
