"""What the trace viewer shows of a step beyond its row: highlighted plan changes, the workspace change it
made, and the files as they were after it. Pure reads over rows and blobs."""

from __future__ import annotations

import csv
import io
import re
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from django.core.paginator import Page, Paginator
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from .agents.packages import AIDE_ADAPTER
from .models import Run, Step
from .text import unified_diff
from .workspace import fs
from .workspace.snapshots import BlobStore, Manifest, manifest_diff

PLAN = "Research Plan and Status"
ENTRY_ORDER = ["Reflection", PLAN, "Fact Check", "Thought"]
MAX_DIFF_BYTES = 200_000
MAX_VIEW_BYTES = 500_000


def _marked(text: str) -> str:
    """Escape, then show the paper's **update** markers as highlights (a bare <mark>: a plan marks most of its
    lines, and a search's hits are the ones with a class, ``mark.hit``)."""
    return re.sub(r"\*\*(.+?)\*\*", r"<mark>\1</mark>", escape(text), flags=re.DOTALL)


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


SUMMARY_CHARS = 100


def input_summary(action_input) -> str:
    """The action's input on one line, for the step's folded line: its values, whitespace collapsed, cut."""
    values = action_input.values() if isinstance(action_input, dict) else [action_input]
    text = " · ".join(" ".join(str(value).split()) for value in values if value not in ("", None))
    return text if len(text) <= SUMMARY_CHARS else text[: SUMMARY_CHARS - 1] + "…"


def steps_display(
    steps: list[Step], *, initial_snapshot: str = "", previous: Step | None = None, previous_plan: str | None = None
) -> list[dict]:
    """The steps of a trace with the plan the agent last wrote before each (``previous_plan``, which the step's
    displayed entries are compared with), whether the step changed the workspace, and whether a new attempt of
    the run took over at it (``resumed``: the worker of the step before stopped). ``previous`` is the step before
    the first of ``steps`` (None when they start the run) and ``previous_plan`` the plan last written before it,
    when it wrote none. ``_step_card.html`` renders them."""
    previous_snapshot, previous_attempt = initial_snapshot or None, None
    if previous is not None:
        previous_plan = previous.entries.get(PLAN, previous_plan)
        previous_snapshot, previous_attempt = previous.snapshot or None, previous.attempt
    shown = []
    for step in steps:
        shown.append(
            {
                "step": step,
                "previous_plan": previous_plan,
                "workspace_changed": previous_snapshot is not None and step.snapshot != previous_snapshot,
                "resumed": previous_attempt is not None and step.attempt != previous_attempt and not step.inherited,
            }
        )
        previous_attempt = step.attempt
        previous_plan = step.entries.get(PLAN, previous_plan)
        previous_snapshot = step.snapshot or previous_snapshot
    return shown


TABLE_SUFFIXES = {".csv": ",", ".tsv": "\t"}
TABLE_HEAD_ROWS = 5
TABLE_HEAD_BYTES = 64 * 1024
TABLE_COUNT_MAX_BYTES = 20 * 1024 * 1024  # rows counted exactly up to this size, estimated past it


#: The entries a tree-searching agent (AIDE: ``mlab_agents/aide.py``) gives the step that writes a node's code, and
#: the one the next step carries of its review ("node <id>: bug. ..." or "node <id>: metric 0.93. ...").
NODE_ENTRIES = ("Stage", "Node", "Parent")
#: The entry points whose runs carry a search tree: a page of another run asks nothing for one.
TREE_SEARCHERS = {AIDE_ADAPTER}
REVIEW_RE = re.compile(r"^node (\w+): (.*)", re.DOTALL)


@dataclass
class SearchNode:
    id: str
    stage: str
    plan: str
    step: int  # the step that wrote its code
    review: str = ""
    children: list[SearchNode] = field(default_factory=list)


def search_tree(run: Run) -> list[SearchNode]:
    """The search tree of a run whose agent searches one (its steps carry ``NODE_ENTRIES``): the root nodes, each
    with its children, in the order they were made, and AIDE's review of each; [] for any other run."""
    if run.agent.entrypoint not in TREE_SEARCHERS:
        return []
    rows = Step.objects.filter(run=run, entries__has_any_keys=["Node", "Review"]).order_by("index")
    nodes: dict[str, SearchNode] = {}
    roots: list[SearchNode] = []
    for index, entries in rows.values_list("index", "entries"):
        review = REVIEW_RE.match(str(entries.get("Review", "")))
        if review and review.group(1) in nodes:
            nodes[review.group(1)].review = review.group(2).strip()
        if not all(entries.get(key) for key in NODE_ENTRIES):
            continue
        node_id = str(entries["Node"]).split()[0]
        node = nodes[node_id] = SearchNode(node_id, str(entries["Stage"]), str(entries.get("Plan", "")), index)
        parent = nodes.get(str(entries["Parent"]))
        (parent.children if parent is not None else roots).append(node)
    return roots


@dataclass
class TablePreview:
    """A data file in brief: its shape and its first rows (a diff of a CSV is ~one line per row: unreadable)."""

    rows: int  # data rows, the header not counted
    columns: int
    head: list[list[str]]
    estimated: bool = False


def table_preview(store: BlobStore, sha: str, size: int, suffix: str) -> TablePreview | None:
    """The shape and first rows of a CSV or TSV blob, read in bounded pieces (None when it does not parse)."""
    delimiter = TABLE_SUFFIXES.get(suffix.lower())
    if delimiter is None:
        return None
    with store.open(sha) as fh:
        start = fh.read(TABLE_HEAD_BYTES)
        lines = start.count(b"\n")
        if size <= TABLE_COUNT_MAX_BYTES:
            while chunk := fh.read(1 << 20):
                lines += chunk.count(b"\n")
    text = start.decode("utf-8", errors="replace")
    complete = text if size <= TABLE_HEAD_BYTES else text[: text.rfind("\n") + 1]
    try:
        head = list(csv.reader(io.StringIO(complete), delimiter=delimiter))[: TABLE_HEAD_ROWS + 1]
    except csv.Error:
        return None
    if not head:
        return None
    if size and not start.endswith(b"\n") and size <= TABLE_COUNT_MAX_BYTES:
        lines += 1  # a last line without its newline
    estimated = size > TABLE_COUNT_MAX_BYTES
    if estimated:
        lines = round(size / max(len(complete.encode()), 1) * complete.count("\n"))
    return TablePreview(rows=max(lines - 1, 0), columns=len(head[0]), head=head, estimated=estimated)


@dataclass
class FileChange:
    path: str
    kind: str  # added, removed, changed
    diff: str = ""
    note: str = ""
    table: TablePreview | None = None
    table_before: TablePreview | None = None
    digest: str = ""

    @property
    def diff_lines(self) -> list[tuple[str, str]]:
        """The diff's lines with the class that colours them: added, removed, a hunk's header, a file's name."""
        lines = []
        for line in self.diff.splitlines():
            if line.startswith(("+++", "---")):
                kind = "diff-file"
            elif line.startswith("+"):
                kind = "diff-add"
            elif line.startswith("-"):
                kind = "diff-del"
            elif line.startswith("@@"):
                kind = "diff-hunk"
            else:
                kind = "diff-ctx"
            lines.append((kind, line))
        return lines


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


FILES_PER_PAGE = 500
CHANGES_PER_PAGE = 100
MAX_PAGE_DIFF_BYTES = 1_000_000  # all the diffs of one page of changes, together, as the page shows them
DIFF_LINE_MARKUP = 32  # what a diff line's colouring adds to the page (<span class="diff-add">...</span>)


def workspace_changes(run: Run, step: Step, *, page: int = 1) -> Page:
    """One page of the files added, removed or changed by this step, with unified diffs of text files: at most
    CHANGES_PER_PAGE changes and MAX_PAGE_DIFF_BYTES of diffs (only that page's files are read). Paths show
    a name that is not UTF-8 escaped."""
    store = BlobStore()
    before_sha = snapshot_before(run, step)
    before: Manifest = store.manifest_load(before_sha) if before_sha else {}
    after: Manifest = store.manifest_load(step.snapshot) if step.snapshot else {}
    diff = manifest_diff(before, after)
    kinds = [(p, "added") for p in diff["added"]] + [(p, "removed") for p in diff["removed"]]
    kinds += [(p, "changed") for p in diff["changed"]]
    shown = Paginator(sorted(kinds), CHANGES_PER_PAGE).get_page(page)
    budget = MAX_PAGE_DIFF_BYTES
    changes = []
    for path, kind in shown.object_list:
        change = FileChange(fs.shown(path), kind)
        suffix = Path(path).suffix
        if kind != "removed" and suffix.lower() in TABLE_SUFFIXES:
            change.table = table_preview(store, *after[path], suffix)
            if kind == "changed":
                change.table_before = table_preview(store, *before[path], suffix)
            if change.table is not None:
                change.note = f"{after[path][1]} bytes"
                changes.append(change)
                continue
        if kind == "changed":
            old = _text(store, *before[path])
            new = _text(store, *after[path])
            if old is None or new is None:
                change.note = f"binary or large ({after[path][1]} bytes)"
                change.digest = after[path][0]
            else:
                change.diff = unified_diff(old, new, f"a/{change.path}", f"b/{change.path}")
        elif kind == "added":
            change.note = f"{after[path][1]} bytes"
            text = _text(store, *after[path]) if budget > 0 else None
            if text is not None and len(text) < 20_000:
                change.diff = "".join(f"+{line}" for line in text.splitlines(keepends=True))
            elif text is None and budget > 0:
                change.digest = after[path][0]
        shown_bytes = len(change.diff) + DIFF_LINE_MARKUP * change.diff.count("\n")
        if shown_bytes > budget:
            change.diff, change.note = "", (change.note + "; " if change.note else "") + "diff not shown: page is full"
            shown_bytes = 0
        budget -= shown_bytes
        changes.append(change)
    shown.object_list = changes
    return shown


def workspace_files(step: Step, *, page: int = 1) -> Page:
    """One page of the files after the step (FILES_PER_PAGE of them), their names shown escaped if not UTF-8."""
    manifest = BlobStore().manifest_load(step.snapshot) if step.snapshot else {}
    shown = Paginator(sorted(manifest), FILES_PER_PAGE).get_page(page)
    shown.object_list = [{"path": fs.shown(path), "size": manifest[path][1]} for path in shown.object_list]
    return shown


def workspace_entry(step: Step, path: str) -> tuple[str, int]:
    """The blob and size of one file as it was after the step. ``path`` is the name as shown (escaped, for a name
    that is not UTF-8); KeyError when the step's workspace has no such file."""
    manifest = BlobStore().manifest_load(step.snapshot) if step.snapshot else {}
    if path not in manifest:
        path = next((p for p in manifest if not p.isascii() and fs.shown(p) == path), path)
    if path not in manifest:
        raise KeyError(path)
    sha, size = manifest[path]
    return sha, size


def workspace_file(step: Step, path: str) -> tuple[str | None, int]:
    """The text of one file as it was after the step (None for binary or too large), and its size. ``path`` is
    the name as shown (escaped, for a name that is not UTF-8)."""
    sha, size = workspace_entry(step, path)
    if size > MAX_VIEW_BYTES:
        return None, size
    data = BlobStore().read_bytes(sha)
    if b"\0" in data[:8192]:
        return None, size
    return data.decode("utf-8", errors="replace"), size


class WorkspaceTooLarge(Exception):
    """The workspace is larger than a zip download may be."""


class _Chunks(io.RawIOBase):
    """A write-only stream whose writes are collected and taken out in pieces (a zip written as it is sent)."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.offset = 0

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        self.parts.append(bytes(data))
        self.offset += len(data)
        return len(data)

    def tell(self) -> int:
        return self.offset

    def take(self) -> bytes:
        data, self.parts = b"".join(self.parts), []
        return data


def workspace_zip(step: Step, *, max_bytes: int) -> Iterator[bytes]:
    """The workspace as it was after the step, as a zip written while it is sent (the worker holds one 1 MiB
    piece at a time, whatever the files' sizes). Names that are not UTF-8 are stored as shown (escaped).
    WorkspaceTooLarge, before anything is sent, when the files add up to more than ``max_bytes``."""
    store = BlobStore()
    manifest = store.manifest_load(step.snapshot) if step.snapshot else {}
    total = sum(size for _, size in manifest.values())
    if total > max_bytes:
        raise WorkspaceTooLarge(f"the workspace after step {step.index} holds {total:,} bytes, over {max_bytes:,}")
    return _zip_stream(store, manifest)


def _zip_stream(store: BlobStore, manifest: Manifest) -> Iterator[bytes]:
    sink = _Chunks()
    with zipfile.ZipFile(sink, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        for path in sorted(manifest):
            sha, _size = manifest[path]
            with store.open(sha) as source, archive.open(fs.shown(path), "w", force_zip64=True) as out:
                while chunk := source.read(1 << 20):
                    out.write(chunk)
                    yield sink.take()
            yield sink.take()
    yield sink.take()


def final_manifest(run: Run) -> Manifest:
    """The workspace a run left (``Run.final_workspace_snapshot``)."""
    sha = run.final_workspace_snapshot()
    return BlobStore().manifest_load(sha) if sha else {}


def workspaces_compared(runs: list[Run], *, path: str) -> dict:
    """The final workspaces of ``runs`` compared with the first one's: the files that differ in any of them
    (``files``: path -> one kind per other run: added, removed, changed or ""), and for ``path`` a coloured
    diff from the first run's file to each other run's (``diffs``: one FileChange or None per other run)."""
    store = BlobStore()
    manifests = [final_manifest(run) for run in runs]
    first, others = manifests[0], manifests[1:]
    files: dict[str, list[str]] = {}
    for i, other in enumerate(others):
        diff = manifest_diff(first, other)
        for kind in ("added", "removed", "changed"):
            for name in diff[kind]:
                files.setdefault(fs.shown(name), [""] * len(others))[i] = kind
    diffs = []
    for other in others:
        change = FileChange(path, "changed")
        old, new = first.get(path), other.get(path)
        if old is None and new is None:
            diffs.append(None)
            continue
        old_text = _text(store, *old) if old else ""
        new_text = _text(store, *new) if new else ""
        if old_text is None or new_text is None:
            change.note = "binary or large"
        elif old == new:
            change.note = "the same in both"
        else:
            change.diff = unified_diff(old_text, new_text, f"a/{path}", f"b/{path}")
        diffs.append(change)
    return {"files": dict(sorted(files.items())), "diffs": diffs, "path": path}
