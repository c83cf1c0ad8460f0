"""The evaluation harness. Runs inside the sandbox: imports the task's hidden ``scripts/eval.py`` the way
MLAgentBench does and calls ``get_score`` on the submission.

    python /opt/mlab/harness/score.py SCRIPTS SUBMISSION OUT

OUT is the descriptor of an inherited pipe (digits), or a folder to write ``result.json`` into for backends
that cannot pass a descriptor. The result is JSON, at most 60000 bytes: ``{"score": <finite number>}`` or
``{"error": "<what went wrong>"}``. Whatever eval.py raises, a result is written.

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


def submission_score(scripts: str, submission: str) -> dict:
    """Import scripts/eval.py as the module ``eval`` and score the submission folder with its get_score."""
    try:
        sys.path.insert(0, scripts)
        spec = importlib.util.spec_from_file_location("eval", os.path.join(scripts, "eval.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules["eval"] = module
        spec.loader.exec_module(module)
        if not callable(getattr(module, "get_score", None)):
            return {"error": "eval.py has no get_score(submission_folder) function"}
        return score_check(module.get_score(submission))
    except BaseException as exc:  # noqa: BLE001 - eval.py may raise anything, SystemExit too: it is the result
        return {"error": "get_score raised:\n" + "".join(traceback.format_exception(exc))[-TRACEBACK_LIMIT:]}


def result_write(out: str, result: dict) -> None:
    data = json.dumps(result).encode()[:RESULT_LIMIT]
    if out.isdigit():
        os.write(int(out), data)
    else:
        with open(os.path.join(out, "result.json"), "wb") as fh:
            fh.write(data)


def main(argv: list[str]) -> None:
    scripts, submission, out = argv[1:4]
    make_undumpable()
    if out.isdigit():
        # Not passed on to what eval.py starts: only the harness can write the result.
        os.set_inheritable(int(out), False)
    result_write(out, submission_score(scripts, submission))


if __name__ == "__main__":
    if not sys.flags.safe_path:
        # Python put this file's folder first on the import path. eval.py gets the path it would have under
        # `python -c`: the working directory there, and the scripts folder in front of it.
        sys.path[0] = ""
    main(sys.argv)
