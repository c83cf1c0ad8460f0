import os

import numpy as np
import pandas as pd
from sklearn.metrics import roc_auc_score


def get_score(submission_folder="../env"):
    """ROC AUC of submission.csv (columns id, PD = predicted probability or score of Parkinson's disease).

    A test subject without a finite prediction counts as wrong: it gets the worst possible score for its class.
    """
    submission_path = os.path.join(submission_folder, "submission.csv")
    if not os.path.exists(submission_path):
        raise FileNotFoundError("submission.csv was not found in the workspace; expected columns id, PD")
    submission = pd.read_csv(submission_path)
    for column in ("id", "PD"):
        if column not in submission.columns:
            raise ValueError(
                f"submission.csv has no '{column}' column; expected columns id, PD (the probability of Parkinson's)"
            )
    answer = pd.read_csv(os.path.join(os.path.dirname(os.path.abspath(__file__)), "answer.csv"))
    merged = answer.merge(submission.drop_duplicates("id"), on="id", how="left")
    truth = (merged["class"] == "PD").astype(int).values
    scores = pd.to_numeric(merged["PD"], errors="coerce").values.astype(float)
    finite = np.isfinite(scores)
    if not finite.any():
        raise ValueError("submission.csv has no numeric PD value for any test subject")
    low, high = scores[finite].min(), scores[finite].max()
    scores[~finite] = np.where(truth[~finite] == 1, low - 1.0, high + 1.0)
    return float(roc_auc_score(truth, scores))


if __name__ == "__main__":
    print(get_score())
