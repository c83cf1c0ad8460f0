"""How long an agent upload's smoke test takes: the example agent started in the configured sandbox (bwrap by
default) until its first answer, and a package that crashes on import until it is refused: what a worker's smoke-
test job (runner.smoke_test) takes for an upload, never its request. No database is touched.

    .venv/bin/python benchmarks/agent_smoke.py [--repeats 10]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def summary(name: str, seconds: list[float]) -> str:
    ms = sorted(s * 1000 for s in seconds)
    return f"{name:<44} median {statistics.median(ms):7.1f} ms   min {ms[0]:7.1f} ms   max {ms[-1]:7.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")
    import django

    django.setup()
    from django.conf import settings

    from runner.agents.smoke import AgentSmokeError, agent_smoke_test

    crasher = Path(tempfile.mkdtemp(prefix="smokebench-"))
    (crasher / "crasher.py").write_text("import mlab_agents.sdk\nraise RuntimeError('missing weights')\n")
    for path in (crasher, crasher / "crasher.py"):
        path.chmod(0o755 if path.is_dir() else 0o644)  # readable by the sandbox user

    good, refused = [], []
    for _ in range(args.repeats):
        start = time.perf_counter()
        answer = agent_smoke_test(package=ROOT / "docs" / "example-agent", entrypoint="example_agent", config={})
        good.append(time.perf_counter() - start)
        assert answer["type"] == "act", answer
        start = time.perf_counter()
        try:
            agent_smoke_test(package=crasher, entrypoint="crasher", config={})
        except AgentSmokeError:
            refused.append(time.perf_counter() - start)
        else:
            raise AssertionError("the crashing package passed")
    shutil.rmtree(crasher)
    print(f"sandbox: {settings.BENCH_SANDBOX}, {args.repeats} repeats")
    print(summary("example agent: first answer", good))
    print(summary("crashing package: refused", refused))


if __name__ == "__main__":
    main()
