"""The docs site: mkdocs builds docs/ with --strict (a broken link or a page left out of the nav fails the build),
and the site serves the build at /docs/."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    site = tmp_path_factory.mktemp("docs-site")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return site


def test_every_page_builds_and_is_served_at_docs(client, settings, built):
    settings.BENCH_DOCS_DIR = built
    home = client.get("/docs/")
    assert home.status_code == 200 and b"mlab-bench" in b"".join(home.streaming_content)
    page = client.get("/docs/architecture/")
    assert page.status_code == 200 and b"Vocabulary" in b"".join(page.streaming_content)
    assert client.get("/docs/architecture").headers["Location"] == "/docs/architecture/"
    assert client.get("/docs/no-such-page/").status_code == 404


def test_nothing_outside_the_build_is_served(client, settings, built, tmp_path):
    site = tmp_path / "site"
    shutil.copytree(built, site)
    (tmp_path / "secret.txt").write_text("not a page")
    settings.BENCH_DOCS_DIR = site
    for path in ("/docs/../secret.txt", "/docs/%2e%2e/secret.txt", "/docs//etc/passwd"):
        response = client.get(path)
        assert response.status_code in (301, 302, 404), path
        assert b"not a page" not in b"".join(getattr(response, "streaming_content", [response.content]))


def test_a_server_without_the_build_says_how_to_make_it(client, settings, tmp_path):
    settings.BENCH_DOCS_DIR = tmp_path / "none"
    response = client.get("/docs/")
    assert response.status_code == 404
