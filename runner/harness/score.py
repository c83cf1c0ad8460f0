"""The evaluation harness. Runs inside the sandbox, beside the task's hidden ``scripts/`` and never beside code of
the workspace: imports ``scripts/eval.py`` the way MLAgentBench does and calls it.

    python /opt/mlab/harness/score.py SCRIPTS SUBMISSION OUT
        get_score(SUBMISSION): the workspace's files, read as data
    python /opt/mlab/harness/score.py --requests SCRIPTS PRIVATE REQUESTS OUT
        a served task's first step: make_requests(PRIVATE) -> list of bytes, written to REQUESTS/000000, ...
    python /opt/mlab/harness/score.py --answers SCRIPTS SUBMISSION PRIVATE ANSWERS OUT
        its last: score_answers(answers, seconds, PRIVATE, SUBMISSION), with the answers the submission gave
        (ANSWERS/000000, ...) and the seconds the platform measured for each (ANSWERS/seconds.json)

OUT is the descriptor of an inherited pipe (digits), or a folder to write ``result.json`` into for backends
that cannot pass a descriptor. The result is JSON, at most 60000 bytes: ``{"score": <finite number>}`` (or
``{"requests": <count>}``) or ``{"error": "<what went wrong>"}``. Whatever eval.py raises, a result is written.

Standard library only: it runs with the sandbox's interpreter and sees nothing of the platform.
"""

import ctypes
import importlib.util
import json
import math
import os
import sys
import traceback

PR_SET_DUMPABLE = 4
RESULT_LIMIT = 60000
TRACEBACK_LIMIT = 6000


def make_undumpable() -> None:
    """Processes that eval.py starts to run the submission run as the same user; once the harness is
    undumpable they can neither read its memory nor open its descriptors through /proc."""
    ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)


def score_check(score: object) -> dict:
    """A finite number is a score; text, booleans, anything float() refuses and NaN or infinity are errors."""
    try:
        if isinstance(score, str | bytes | bool):
            raise TypeError("text and booleans are not scores")
        value = float(score)
    except (TypeError, ValueError):
        return {"error": f"get_score returned {type(score).__name__} {score!r:.200}; expected a number"}
    if math.isfinite(value):
        return {"score": value}
    return {"error": f"get_score returned {value!r}; expected a finite number"}


def eval_call(scripts: str, name: str, signature: str, call) -> dict:
    """Import scripts/eval.py as the module ``eval`` and ``call`` its function ``name``; its result, or the error."""
    try:
        sys.path.insert(0, scripts)
        spec = importlib.util.spec_from_file_location("eval", os.path.join(scripts, "eval.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules["eval"] = module
        spec.loader.exec_module(module)
        function = getattr(module, name, None)
        if not callable(function):
            return {"error": f"eval.py has no {name}({signature}) function"}
        return call(function)
    except BaseException as exc:  # noqa: BLE001 - eval.py may raise anything, SystemExit too: it is the result
        return {"error": f"{name} raised:\n" + "".join(traceback.format_exception(exc))[-TRACEBACK_LIMIT:]}


def submission_score(scripts: str, submission: str) -> dict:
    """Score the submission folder with eval.py's get_score."""
    return eval_call(scripts, "get_score", "submission_folder", lambda get_score: score_check(get_score(submission)))


def requests_make(scripts: str, private: str, requests: str) -> dict:
    """A served task's requests, from eval.py's make_requests, one file each in the requests folder."""

    def call(make_requests) -> dict:
        made = list(make_requests(private))
        for index, request in enumerate(made):
            if not isinstance(request, bytes | bytearray | memoryview):
                return {"error": f"make_requests gave {type(request).__name__} as request {index}; expected bytes"}
            with open(os.path.join(requests, f"{index:06d}"), "wb") as fh:
                fh.write(request)
        if not made:
            return {"error": "make_requests gave no request; expected at least one"}
        return {"requests": len(made)}

    return eval_call(scripts, "make_requests", "private_folder", call)


def answers_score(scripts: str, submission: str, private: str, answers: str) -> dict:
    """A served task's score, from eval.py's score_answers on what the submission answered and how long it took."""
    with open(os.path.join(answers, "seconds.json")) as fh:
        seconds = json.load(fh)
    given = []
    for index in range(len(seconds)):
        with open(os.path.join(answers, f"{index:06d}"), "rb") as fh:
            given.append(fh.read())
    return eval_call(
        scripts,
        "score_answers",
        "answers, seconds, private_folder, submission_folder",
        lambda score_answers: score_check(score_answers(given, list(seconds), private, submission)),
    )


def result_write(out: str, result: dict) -> None:
    data = json.dumps(result).encode()[:RESULT_LIMIT]
    if out.isdigit():
        os.write(int(out), data)
    else:
        with open(os.path.join(out, "result.json"), "wb") as fh:
            fh.write(data)


def main(argv: list[str]) -> None:
    mode = argv[1] if argv[1].startswith("--") else ""
    args = argv[2:] if mode else argv[1:]
    out = args[-1]
    make_undumpable()
    if out.isdigit():
        # Not passed on to what eval.py starts: only the harness can write the result.
        os.set_inheritable(int(out), False)
    if mode == "--requests":
        result = requests_make(*args[:3])
    elif mode == "--answers":
        result = answers_score(*args[:4])
    else:
        result = submission_score(*args[:2])
    result_write(out, result)


if __name__ == "__main__":
    if not sys.flags.safe_path:
        # Python put this file's folder first on the import path. eval.py gets the path it would have under
        # `python -c`: the working directory there, and the scripts folder in front of it.
        sys.path[0] = ""
    main(sys.argv)
