"""A test agent driven by its configuration: it writes the lines listed in config["script"] one by one.

Each entry is either a protocol message (an object, sent as JSON), a raw string (sent as is, to test
garbage), {"probe": "python expression"} to print its value to stderr, {"long_line": n} to write one line of n bytes,
or {"exit": code, "stderr": text} to stop. After each line it reads the answer and prints it to
stderr, so tests can see what the agent received. A resumed or forked run starts with earlier steps in its
history: the agent skips as many step-making entries of its script.
"""

import json
import sys

start = json.loads(sys.stdin.readline())
already = len(start["history"])
print(f"started with {already} earlier steps; actions:", [a["name"] for a in start["actions"]], file=sys.stderr)
sys.stderr.flush()
for item in start["config"].get("script", []):
    # "<NUL>" in the script stands for a NUL character (the database that holds the script cannot store one).
    item = json.loads(json.dumps(item).replace("<NUL>", "\\u0000"))
    makes_step = isinstance(item, str) or item.get("type") == "act" or "long_line" in item
    if makes_step and already:
        already -= 1
        continue
    if isinstance(item, dict) and "flood" in item:
        # Write requests without reading the answers, then wait: an agent that never reads its stdin.
        for _ in range(item["flood"]):
            sys.stdout.write(json.dumps(item["message"]) + "\n")
        sys.stdout.flush()
        __import__("time").sleep(3600)
    if isinstance(item, dict) and "probe" in item:
        # Run a line of Python in the agent's own sandbox and report the value (tests of what an agent can see).
        print("probe:", repr(eval(item["probe"])), file=sys.stderr, flush=True)
        continue
    if isinstance(item, dict) and "exit" in item:
        print(item.get("stderr", ""), file=sys.stderr, flush=True)
        sys.exit(item["exit"])
    if isinstance(item, dict) and "long_line" in item:
        item = "x" * item["long_line"]  # one line of that many bytes (too long to be a message)
    line = item if isinstance(item, str) else json.dumps(item)
    sys.stdout.write(line + "\n")
    sys.stdout.flush()
    answer = sys.stdin.readline()
    if not answer:
        break
    print("answer:", answer.strip()[:300], file=sys.stderr, flush=True)
    if json.loads(answer).get("type") == "end":
        break
