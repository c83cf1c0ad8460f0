"""The leaderboard's figures computed once per state of the runs: cached under the ranking generation
(``models.RankingGeneration``), which database triggers change in the same transaction as every write that can
change a ranking figure. A reader reads the generation first, then (on a miss) the runs: what it computes is at
least as new as the generation it is stored under, so a cached figure is never older than the key that finds it.

Cached here: the board's rows and cells (``selectors.leaderboard_board``), the improvement chart's points or boxes
and the home page's counts, each under the generation, the viewer's class (``viewer_key``: the access rule decides
which runs a viewer's figures sum) and the ranking options; the rendered table is a template fragment keyed by
``ranking_fragment_key`` and its URL. The cache is Django's default one, each process's memory: it is only a cache.

Why triggers and a cache rather than a summary table kept by the services: runner must not know of rankings (it
imports nothing of leaderboard); a summary table would need the same invalidations plus every place a figure's
inputs change (a version's baseline changes every normalised score, an agent's visibility who sees which sums, and
the chart's quartiles cannot be summed); and triggers also cover the admin, bulk updates and management commands.
The cost: the first request after a ranking write computes the figures again (``benchmarks/lists_at_scale.py``
prints that figure); every UPDATE of runs runs a statement trigger that compares the rows it changed (a heartbeat
too, though it bumps nothing); and a ranking write locks the generation row until it commits, so a transaction
that writes one takes its other row locks first (``recording.run_finish`` locks the task version before it ends the
run). ``tests/leaderboard/test_ranking_cache.py`` compares the cached figures with a computation from scratch after
each kind of write."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from typing import TYPE_CHECKING, TypeVar

from django.core.cache import cache

from runner.selectors import Viewer

from .models import RankingGeneration

if TYPE_CHECKING:
    from .query import RankingOptions

T = TypeVar("T")

#: How long an entry is kept (its key already makes it right; this only frees the memory of old generations).
TIMEOUT_S = 3600


def ranking_generation() -> str | None:
    """The current generation, ``token:number``; None where there is none (a database the triggers do not cover,
    or just emptied: the first write creates it again)."""
    row = RankingGeneration.objects.filter(pk=1).values_list("token", "number").first()
    return f"{row[0]}:{row[1]}" if row else None


def viewer_key(viewer: Viewer) -> str:
    """Who sees the same runs (``runner.selectors.agents_visible_filter``): staff and operators every run, an
    anonymous visitor the public agents' runs, a signed-in user those and their own agents' runs."""
    if viewer is None or viewer.is_staff:
        return "all"
    return f"user-{viewer.pk}" if viewer.is_authenticated else "public"


def ranking_fragment_key(viewer: Viewer) -> str | None:
    """What a rendered fragment of ranking figures is cached under (with the URL that asked for it): the
    generation, read before the figures are, and the viewer's class; None where there is no generation."""
    generation = ranking_generation()
    return None if generation is None else f"{generation}:{viewer_key(viewer)}"


def ranking_cached(name: str, *, viewer: Viewer, options: RankingOptions, compute: Callable[[], T]) -> T:
    """``compute()`` once per generation, viewer class and options; every time where there is no generation."""
    generation = ranking_generation()
    if generation is None:
        return compute()
    listed = ",".join(f"{k}={v!r}" for k, v in sorted(asdict(options).items()))
    key = f"ranking:{generation}:{name}:{viewer_key(viewer)}:{listed}"
    found = cache.get(key)
    if found is None:
        found = compute()
        cache.set(key, found, TIMEOUT_S)
    return found
