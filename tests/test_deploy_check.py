"""Production settings: `manage.py check --deploy` passes, without a single warning, with the environment the
docs/deploy.md gives (BENCH_HTTPS=1, DEBUG off, a secret key, the site's host)."""

import os
import secrets
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def deploy_check(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    # Not the test session's own switches (the browser tests allow sync database calls from async code).
    left_out = {"DEBUG", "SECRET_KEY", "ALLOWED_HOSTS", "DJANGO_ALLOW_ASYNC_UNSAFE"}
    settings_env = {k: v for k, v in os.environ.items() if k not in left_out}
    settings_env.update(BENCH_VAR_DIR=str(tmp_path), **env)
    command = [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"]
    return subprocess.run(command, cwd=ROOT, env=settings_env, capture_output=True, text=True, timeout=120)


def test_production_settings_pass_the_deploy_check_without_a_warning(tmp_path):
    done = deploy_check(
        tmp_path, BENCH_HTTPS="1", DEBUG="0", SECRET_KEY=secrets.token_urlsafe(50), ALLOWED_HOSTS="bench.example.org"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "System check identified no issues" in done.stdout


def test_without_https_the_deploy_check_names_what_is_missing(tmp_path):
    done = deploy_check(tmp_path, DEBUG="0", SECRET_KEY=secrets.token_urlsafe(50), ALLOWED_HOSTS="bench.example.org")
    assert done.returncode != 0
    for warning in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert warning in done.stderr + done.stdout
