"""The evaluation harness (``score.py``): a standalone program, mounted read-only into the evaluation sandbox.
Standard library only; nothing here imports Django or the rest of the project."""
