import os

import numpy as np
import pandas as pd
from sklearn.metrics import roc_auc_score

GENRES = ["Drama", "Comedy", "Action", "Thriller", "Adventure", "Romance", "Crime", "Sci-Fi"]


def get_score(submission_folder="../env"):
    """Mean over the 8 genres of the ROC AUC of submission.csv (columns node + one score column per genre).

    A test node without a finite score for a genre counts as wrong: it gets the worst possible score for its label.
    """
    submission_path = os.path.join(submission_folder, "submission.csv")
    if not os.path.exists(submission_path):
        raise FileNotFoundError(f"submission.csv was not found in the workspace; expected columns node, {GENRES}")
    submission = pd.read_csv(submission_path)
    missing = [c for c in ["node", *GENRES] if c not in submission.columns]
    if missing:
        raise ValueError(f"submission.csv lacks the columns {missing}; expected node and one column per genre")
    answer = pd.read_csv(os.path.join(os.path.dirname(os.path.abspath(__file__)), "answer.csv"))
    merged = answer.merge(
        submission.drop_duplicates("node")[["node", *GENRES]], on="node", how="left", suffixes=("", "_pred")
    )
    aucs = []
    for genre in GENRES:
        truth = merged[genre].values
        scores = pd.to_numeric(merged[f"{genre}_pred"], errors="coerce").values.astype(float)
        finite = np.isfinite(scores)
        if not finite.any():
            raise ValueError(f"submission.csv has no numeric '{genre}' score for any test node")
        low, high = scores[finite].min(), scores[finite].max()
        scores[~finite] = np.where(truth[~finite] == 1, low - 1.0, high + 1.0)
        aucs.append(roc_auc_score(truth, scores))
    return float(np.mean(aucs))


if __name__ == "__main__":
    print(get_score())
