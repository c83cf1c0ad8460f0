"""The leaderboard, a task and a trace at a phone's width (390 px, an iPhone 12-15's CSS width): nothing wider than
the screen (a wide table scrolls inside its own box), every link of the header on the screen (none hidden in a
sideways scroll), a step's texts as wide as its card, the chart's toolbar clear of its title."""

from decimal import Decimal

import pytest

from runner.execution import run_execute
from runner.services import run_create
from tests.factories import AgentFactory, RunFactory

pytestmark = pytest.mark.e2e

WIDTH = 390


@pytest.fixture
def phone(browser):
    context = browser.new_context(viewport={"width": WIDTH, "height": 844}, device_scale_factor=3, is_mobile=True)
    page = context.new_page()
    yield page
    context.close()


def overflow(page) -> list[str]:
    """The elements that reach past the screen's right edge, outside any box that scrolls them."""
    return page.evaluate(
        """(width) => {
            const boxed = (el) => {
                for (let p = el.parentElement; p && p !== document.body; p = p.parentElement) {
                    if (['auto', 'scroll', 'hidden'].includes(getComputedStyle(p).overflowX)) return true;
                }
                return false;
            };
            const out = [];
            for (const el of document.querySelectorAll('body *')) {
                const r = el.getBoundingClientRect();
                if (r.width && r.right > width + 1 && !boxed(el)) {
                    out.push(`${el.tagName.toLowerCase()}.${el.className} ${Math.round(r.right)}`);
                }
            }
            return out.slice(0, 10);
        }""",
        WIDTH,
    )


def check(page, url: str) -> None:
    page.goto(url)
    page.wait_for_load_state("networkidle")
    assert page.evaluate("document.documentElement.scrollWidth") <= WIDTH, (url, overflow(page))
    # Every link of the header is on the screen: none hidden past its edge in a box that scrolls with no sign.
    links = page.evaluate(
        "[...document.querySelectorAll('body > header a')].map(a => {"
        " const r = a.getBoundingClientRect(); return [a.textContent.trim(), r.left, r.right]; })"
    )
    assert links and all(left >= 0 and right <= WIDTH + 1 for _, left, right in links), (url, links)


def test_the_pages_fit_a_phone(phone, live_server, tiny_task):
    solver = AgentFactory(name="a-solver-with-a-long-name")
    for succeeded in (True, False, True):
        RunFactory(task_version=tiny_task, agent=solver, succeeded=succeeded, improvement=0.2, final_score=2.4,
                   cost=Decimal("0.02"), model="a-model-name-that-is-long")  # fmt: skip
    script = [
        {
            "type": "act",
            "action": "Write File",
            "input": {"file_name": "value.txt", "content": "8\n" * 50},
            "entries": {
                "Research Plan and Status": "1. Write a larger value. 2. Submit it. " * 3,
                "Thought": "Writing the file is all it takes.",
            },
        },
        {"type": "act", "action": "Final Answer", "input": {"final_answer": "done"}},
    ]
    run = run_execute(run_create(task=tiny_task.task, agent=AgentFactory(config={"script": script}), enqueue=False).pk)

    check(phone, f"{live_server.url}/leaderboard/")
    phone.wait_for_selector("#chart-success-by-task .main-svg")
    assert phone.locator(".modebar-container .modebar").count() == 0  # no toolbar over a chart's title
    check(phone, f"{live_server.url}/tasks/tiny/")
    check(phone, f"{live_server.url}/runs/{run.pk}/")
    # A step's reflection, plan and thought take the card's width, their labels above them (not a narrow column).
    phone.goto(f"{live_server.url}/runs/{run.pk}/#step-0")  # the step opened
    entry = phone.locator("#step-0 dl.entries dd").first
    card = phone.locator("#step-0 dl.entries").first
    assert entry.bounding_box()["width"] > 0.9 * card.bounding_box()["width"]
    check(phone, f"{live_server.url}/")
