"""Where a leaderboard figure leads (the runs list filtered to the runs behind it) and a row's name in a URL."""

from __future__ import annotations

from urllib.parse import urlencode

from django.urls import reverse


def runs_href(
    row: dict,
    *,
    task: str = "",
    ranking: str = "counted",
    current: bool = True,
    category: str = "",
    self_reported: bool = False,
    tag: str = "",
) -> str:
    """The runs list filtered to the runs behind one of ``row``'s counts: its agent version and model (on ``task``
    if given, on the tasks of ``category`` if given), the runs ``ranking`` names (a key of
    ``runner.selectors.RANKINGS``), of each task's current version if ``current``, verified runs only unless
    ``self_reported``, those with the review ``tag`` if given."""
    query = {"agent": row["agent__name"], "version": row["agent__version"], "model": row["model"]}
    if task:
        query["task"] = task
    if category:
        query["category"] = category
    query["ranking"] = ranking
    if current:
        query["versions"] = "current"
    if not self_reported:
        query["origin"] = "verified"
    if tag:
        query["tag"] = tag
    return f"{reverse('runner:run_list')}?{urlencode(query)}"


def entrant_key(row: dict) -> str:
    """A row's name in a URL: "agent@version", then "/model" when it has one."""
    model = f"/{row['model']}" if row["model"] else ""
    return f"{row['agent__name']}@{row['agent__version']}{model}"


def entrant_parse(key: str) -> dict:
    """The row a key names (``entrant_key``'s inverse); ValueError when it is not "agent@version[/model]"."""
    name, at, rest = key.partition("@")
    version, _, model = rest.partition("/")
    if not (name and at and version):
        raise ValueError(f"{key!r} names no row: expected agent@version or agent@version/model")
    return {"agent__name": name, "agent__version": version, "model": model}
