"""The run page against the run's length.

1. The first paint of the run page (its HTML, as Django's test client gets it through every middleware) for a
   finished run of 10 and of 500 steps, without and with LLM calls (one per step, a prompt of ~12 kB and a
   completion of ~1.5 kB, about what MLAgentBench's research agent sends): time and bytes, with the step cards
   not cached yet (the cache cleared before each request) and cached; and the 500-step page as staff see it (a
   fork button and a tag form on each step).
2. A live run's poll that finds one new step, for runs of 10, 500 and 5,000 steps: time and bytes.
3. A step's files and changes pages (first page, last page) when its workspace holds 200,000 files, all of them
   new in that step: time and bytes.

Steps carry the paper's entries (a research plan of about ten lines, revised every five steps), an action
input and a 1.5 kB observation; one step in ten has an 8 kB one. The database is a throwaway SQLite under a
temporary folder; ``--database-url`` measures another (it is migrated and gets a task and runs: give it a scratch
database, never a live one).

    .venv/bin/python benchmarks/trace_page.py [--repeats 20] [--database-url postgres://.../scratch]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from scratch import django_scratch

PLAN = "Research Plan and Status"


def step_rows(run, count: int, *, calls: bool) -> None:
    """``count`` recorded steps of ``run`` (and one LLM call per step when ``calls``), written in bulk."""
    from django.utils import timezone

    from runner.models import LLMCall, Step

    now = timezone.now()
    plan = ["1. Understand train.py and the data.", "2. Measure the baseline."]
    steps = []
    for i in range(count):
        if i % 5 == 0:
            plan = plan[-9:] + [f"{i // 5 + 3}. **Try idea {i}: a wider hidden layer and a lower learning rate.**"]
        observation = (f"epoch {i}: loss 0.{i:04d} accuracy 0.9{i % 10}\n" * 40)[:1500]
        if i % 10 == 9:
            observation = ("a long listing line of an inspected script\n" * 200)[:8000]
        steps.append(
            Step(
                run=run,
                index=i,
                action="Execute Script",
                action_input={"script_name": "train.py"},
                entries={
                    "Reflection": "The last change helped a little; the loss still falls." * 3,
                    PLAN: "\n".join(plan),
                    "Fact Check": "The accuracy above was measured by running train.py.",
                    "Thought": f"Run the script again with idea {i}.",
                },
                observation=observation,
                started_at=now,
                duration_s=1.5,
                tokens_in=3000 if calls else 0,
                tokens_out=400 if calls else 0,
                snapshot=f"{i:064x}",
            )
        )
    steps = Step.objects.bulk_create(steps)
    if calls:
        system = "You are a helpful research assistant. " * 80
        LLMCall.objects.bulk_create(
            LLMCall(
                run=run,
                step=step,
                step_index=step.index,
                model="bench-model",
                purpose="next action",
                messages=[
                    {"role": "system", "content": system},
                    {"role": "user", "content": f"Here are the steps so far (step {step.index}).\n" * 230},
                ],
                completion=f"Reflection: ... Thought: try idea {step.index}.\n" * 30,
            )
            for step in steps
        )


def timed_gets(client, urls: list[str], *, repeats: int, before=None, headers: dict | None = None) -> list[tuple]:
    """Median milliseconds and bytes of a GET of each of ``urls``, the URLs taken in turn in each of ``repeats``
    rounds (so a busy moment of the machine falls on all of them); ``before`` runs before each request, untimed."""
    times: dict[str, list[float]] = {url: [] for url in urls}
    sizes = {}
    for _ in range(repeats):
        for url in urls:
            if before:
                before()
            started = time.perf_counter()
            response = client.get(url, headers=headers or {})
            times[url].append(time.perf_counter() - started)
            assert response.status_code == 200, (url, response.status_code)
            sizes[url] = len(response.content)
    return [(statistics.median(times[url]) * 1000, sizes[url]) for url in urls]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--database-url", default="", help="a scratch database to measure (default: throwaway SQLite)")
    args = parser.parse_args()
    django_scratch("tracebench-", args.database_url)
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.cache import cache
    from django.core.management import call_command
    from django.test import Client
    from django.urls import reverse

    from runner.agents.builtin import agents_builtin_ensure
    from runner.models import Run, Step
    from runner.services import run_create
    from runner.workspace.snapshots import BlobStore
    from task_bank.services import BUILTIN_DIR, task_import

    call_command("migrate", verbosity=0)
    version, _ = task_import(root=BUILTIN_DIR / "digits", slug=f"bench-trace-{os.getpid()}")
    agent = next(a for a in agents_builtin_ensure() if a.name == "baseline")

    def run_with(steps: int, *, calls: bool = False, live: bool = False) -> Run:
        run = run_create(task=version.task, agent=agent, enqueue=False)
        status = Run.Status.RUNNING if live else Run.Status.FINISHED
        Run.objects.filter(pk=run.pk).update(status=status, steps_count=steps, live_action="Execute Script")
        step_rows(run, steps, calls=calls)
        return run

    client = Client()
    engine = settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]
    cache_backend = settings.CACHES["default"]["BACKEND"].rsplit(".", 1)[-1]
    print(f"Run page, first paint ({engine}, cache {cache_backend}, median of {args.repeats} interleaved rounds):")
    print(f"{'steps':>6} {'LLM calls':>10} {'cards not cached':>18} {'cards cached':>14} {'bytes':>10}")
    cases = [(steps, calls) for calls in (False, True) for steps in (10, 500)]
    urls = [reverse("runner:run_detail", args=[run_with(steps, calls=calls).pk]) for steps, calls in cases]
    cold = timed_gets(client, urls, repeats=args.repeats, before=cache.clear)
    warm = timed_gets(client, urls, repeats=args.repeats)
    pages = {}
    for case, (cold_ms, size), (warm_ms, _) in zip(cases, cold, warm, strict=True):
        pages[case] = (cold_ms, warm_ms, size)
        steps, calls = case
        print(f"{steps:>6} {'yes' if calls else 'no':>10} {cold_ms:>15.1f} ms {warm_ms:>11.1f} ms {size:>10,}")
    for calls in (False, True):
        (cold10, warm10, size10), (cold500, warm500, size500) = pages[10, calls], pages[500, calls]
        print(
            f"500 / 10 steps{' with LLM calls' if calls else ''}: time {cold500 / cold10:.2f}x not cached, "
            f"{warm500 / warm10:.2f}x cached; bytes {size500 / size10:.2f}x"
        )
    staff = Client()
    staff.force_login(get_user_model().objects.create_user("bench-staff", is_staff=True))
    ((staff_ms, staff_size),) = timed_gets(staff, urls[-1:], repeats=args.repeats)
    print(f"500 steps with LLM calls, as staff (who fork and tag): {staff_ms:.1f} ms cached, {staff_size:,} bytes")

    print(f"\nLive poll finding one new step (median of {args.repeats}, cache cleared before each):")
    print(f"{'steps':>6} {'time':>10} {'bytes':>10}")
    lengths = (10, 500, 5000)
    urls = []
    for steps in lengths:
        run = run_with(steps, calls=True, live=True)
        urls.append(f"{reverse('runner:run_poll', args=[run.pk])}?after={steps - 2}")
    polls = timed_gets(client, urls, repeats=args.repeats, before=cache.clear, headers={"HX-Request": "true"})
    for steps, (took, size) in zip(lengths, polls, strict=True):
        print(f"{steps:>6} {took:>7.1f} ms {size:>10,}")

    files = 200_000
    print(f"\nA step's files and changes with {files:,} files in its workspace (median of {args.repeats}):")
    store = BlobStore()
    sha = store.put_bytes(b"line\n" * 1000)
    run = run_with(0)
    step = Step.objects.create(
        run=run,
        index=0,
        action="Execute Script",
        started_at=run.created_at,
        snapshot=store.manifest_save({f"dir{i // 1000}/file{i:06d}.txt": [sha, 5000] for i in range(files)}),
    )
    Run.objects.filter(pk=run.pk).update(initial_snapshot=store.manifest_save({}), steps_count=1)
    base = f"/runs/{run.pk}/steps/{step.index}"
    pages = [f"{base}/files/", f"{base}/files/?page=400", f"{base}/changes/", f"{base}/changes/?page=2000"]
    for url, (took, size) in zip(pages, timed_gets(client, pages, repeats=args.repeats), strict=True):
        print(f"{url.removeprefix(base):<24} {took:>7.1f} ms {size:>10,} bytes")


if __name__ == "__main__":
    main()
