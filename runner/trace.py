"""What the trace viewer shows of a step beyond its row: highlighted plan changes, the workspace change it
made, and the files as they were after it. Pure reads over rows and blobs."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from .models import Run, Step
from .snapshots import BlobStore, Manifest, manifest_diff

PLAN = "Research Plan and Status"
ENTRY_ORDER = ["Reflection", PLAN, "Fact Check", "Thought"]
MAX_DIFF_BYTES = 200_000
MAX_VIEW_BYTES = 500_000


def _marked(text: str) -> str:
    """Escape, then show the paper's **update** markers as highlights."""
    return re.sub(r"\*\*(.+?)\*\*", r'<mark class="update">\1</mark>', escape(text), flags=re.DOTALL)


def entries_display(step: Step, previous_plan: str | None) -> list[tuple[str, SafeString, bool]]:
    """(name, html, changed) per entry, the paper's entries first; plan lines new since the last step marked."""
    names = [n for n in ENTRY_ORDER if n in step.entries] + [n for n in step.entries if n not in ENTRY_ORDER]
    shown = []
    for name in names:
        value = str(step.entries[name])
        if name == PLAN and previous_plan is not None and value != previous_plan:
            before = set(previous_plan.splitlines())
            # A changed line is a block of its own: no newline after it, or the <pre> shows an empty line.
            html = "".join(
                f'<span class="changed-line">{_marked(line)}</span>' if line not in before else _marked(line) + "\n"
                for line in value.splitlines()
            )
            shown.append((name, mark_safe(html.removesuffix("\n")), True))  # noqa: S308 - every line escaped
        else:
            shown.append((name, mark_safe(_marked(value)), False))  # noqa: S308 - escaped by _marked
    return shown


def steps_display(steps: list[Step], *, initial_snapshot: str = "") -> list[dict]:
    """The steps of a trace with their displayed entries, whether the step changed the workspace, and whether a
    new attempt of the run took over at it (``resumed``: the worker of the step before stopped)."""
    previous_plan, previous_snapshot, previous_attempt, shown = None, initial_snapshot or None, None, []
    for step in steps:
        shown.append(
            {
                "step": step,
                "entries": entries_display(step, previous_plan),
                "workspace_changed": previous_snapshot is not None and step.snapshot != previous_snapshot,
                "resumed": previous_attempt is not None and step.attempt != previous_attempt and not step.inherited,
            }
        )
        previous_attempt = step.attempt
        previous_plan = step.entries.get(PLAN, previous_plan)
        previous_snapshot = step.snapshot or previous_snapshot
    return shown


@dataclass
class FileChange:
    path: str
    kind: str  # added, removed, changed
    diff: str = ""
    note: str = ""


def _text(store: BlobStore, sha: str, size: int) -> str | None:
    if size > MAX_DIFF_BYTES:
        return None
    data = store.read_bytes(sha)
    if b"\0" in data[:8192]:
        return None
    return data.decode("utf-8", errors="replace")


def snapshot_before(run: Run, step: Step) -> str:
    prior = Step.objects.filter(run=run, index__lt=step.index).order_by("-index").values_list("snapshot", flat=True)
    return prior.first() or run.initial_snapshot


def workspace_changes(run: Run, step: Step) -> list[FileChange]:
    """Files added, removed or changed by this step, with unified diffs of text files."""
    store = BlobStore()
    before_sha = snapshot_before(run, step)
    before: Manifest = store.manifest_load(before_sha) if before_sha else {}
    after: Manifest = store.manifest_load(step.snapshot) if step.snapshot else {}
    diff = manifest_diff(before, after)
    changes = [FileChange(p, "added") for p in diff["added"]] + [FileChange(p, "removed") for p in diff["removed"]]
    for path in diff["changed"]:
        old = _text(store, *before[path])
        new = _text(store, *after[path])
        if old is None or new is None:
            changes.append(FileChange(path, "changed", note=f"binary or large ({after[path][1]} bytes)"))
            continue
        lines = difflib.unified_diff(
            old.splitlines(keepends=True), new.splitlines(keepends=True), f"a/{path}", f"b/{path}"
        )
        changes.append(FileChange(path, "changed", diff="".join(lines)))
    for change in changes:
        if change.kind == "added":
            text = _text(store, *after[change.path])
            change.note = f"{after[change.path][1]} bytes"
            if text is not None and len(text) < 20_000:
                change.diff = "".join(f"+{line}" for line in text.splitlines(keepends=True))
    return sorted(changes, key=lambda c: c.path)


def workspace_files(step: Step) -> list[dict]:
    if not step.snapshot:
        return []
    manifest = BlobStore().manifest_load(step.snapshot)
    return [{"path": path, "size": size} for path, (_sha, size) in sorted(manifest.items())]


def workspace_file(step: Step, path: str) -> tuple[str | None, int]:
    """The text of one file as it was after the step (None for binary or too large), and its size."""
    manifest = BlobStore().manifest_load(step.snapshot) if step.snapshot else {}
    if path not in manifest:
        raise KeyError(path)
    sha, size = manifest[path]
    if size > MAX_VIEW_BYTES:
        return None, size
    data = BlobStore().read_bytes(sha)
    if b"\0" in data[:8192]:
        return None, size
    return data.decode("utf-8", errors="replace"), size
