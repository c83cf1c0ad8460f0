"""The documentation site at /docs/: the pages of docs/ as mkdocs built them (``make docs``), so that the users of a
hosted platform can read them. The build is a folder of static pages; this view serves its files."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.core.exceptions import SuspiciousFileOperation
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.utils._os import safe_join
from django.views.static import serve


def docs_page(request: HttpRequest, path: str = "") -> HttpResponse:
    """A file of the built site; a folder's ``index.html`` for a folder's address (``/docs/agents/``)."""
    root = Path(settings.BENCH_DOCS_DIR)
    if not (root / "index.html").is_file():
        raise Http404("The documentation is not built on this server: `make docs` builds it.")
    try:
        where = Path(safe_join(root, path))
    except SuspiciousFileOperation:
        raise Http404("No such page.") from None
    if where.is_dir():
        if path and not path.endswith("/"):
            return HttpResponseRedirect(request.path + "/")
        path = f"{path}index.html"
    return serve(request, path, document_root=root)
