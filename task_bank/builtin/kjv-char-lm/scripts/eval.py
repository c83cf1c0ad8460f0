import json
import os

import numpy as np
import pandas as pd

HERE = os.path.dirname(os.path.abspath(__file__))
MIN_PROBABILITY = 1e-6  # a probability below this (or a missing row) costs log2(1e6) = 19.9 bits


def get_score(submission_folder="../env"):
    """Bits per character: mean of -log2 p(hidden next character) over the test contexts (lower is better).

    submission.csv has a column "id" and one column p0 ... p{V-1} per vocabulary character (the order of vocab.json)
    holding the predicted probability of each next character; each row is normalised to sum to 1 here.
    """
    with open(os.path.join(submission_folder, "vocab.json")) as fh:
        vocabulary = json.load(fh)
    columns = [f"p{i}" for i in range(len(vocabulary))]
    submission_path = os.path.join(submission_folder, "submission.csv")
    if not os.path.exists(submission_path):
        raise FileNotFoundError(
            f"submission.csv was not found in the workspace; expected columns id, p0 ... p{len(vocabulary) - 1}"
        )
    submission = pd.read_csv(submission_path)
    missing_columns = [c for c in ["id", *columns] if c not in submission.columns]
    if missing_columns:
        raise ValueError(
            f"submission.csv lacks the columns {missing_columns[:5]}; expected id and one probability column "
            f"p0 ... p{len(vocabulary) - 1} per character of vocab.json"
        )
    answer = pd.read_csv(os.path.join(HERE, "answer.csv"))
    merged = answer.merge(submission.drop_duplicates("id")[["id", *columns]], on="id", how="left")
    probabilities = merged[columns].apply(pd.to_numeric, errors="coerce").values.astype(float)
    present = ~np.isnan(probabilities).all(axis=1)
    rows = probabilities[present]
    if np.isnan(rows).any() or (rows < 0).any() or not np.isfinite(rows).all():
        raise ValueError("submission.csv has missing, negative or non-finite probabilities in some rows")
    totals = rows.sum(axis=1)
    if (totals <= 0).any():
        raise ValueError("some rows of submission.csv have probabilities that sum to 0")
    target = merged["index"].values[present]
    p_target = rows[np.arange(len(rows)), target] / totals
    bits = np.full(len(answer), -np.log2(MIN_PROBABILITY))
    bits[present] = -np.log2(np.maximum(p_target, MIN_PROBABILITY))
    return float(bits.mean())


if __name__ == "__main__":
    print(get_score())
