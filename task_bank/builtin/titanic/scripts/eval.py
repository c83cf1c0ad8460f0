import os

import pandas as pd

LABELS = {"died", "survived"}


def get_score(submission_folder="../env"):
    """Accuracy of submission.csv (columns id, survived) against the hidden outcomes; missing rows count as wrong."""
    submission_path = os.path.join(submission_folder, "submission.csv")
    if not os.path.exists(submission_path):
        raise FileNotFoundError("submission.csv was not found in the workspace; expected columns id, survived")
    submission = pd.read_csv(submission_path)
    for column in ("id", "survived"):
        if column not in submission.columns:
            raise ValueError(f"submission.csv has no '{column}' column; expected columns id, survived")
    submission["survived"] = submission["survived"].astype(str)
    unknown = set(submission["survived"]) - LABELS
    if unknown:
        raise ValueError(f"submission.csv has 'survived' values {sorted(unknown)[:5]}; expected 'died' or 'survived'")
    answer = pd.read_csv(os.path.join(os.path.dirname(os.path.abspath(__file__)), "answer.csv"))
    merged = answer.merge(submission.drop_duplicates("id"), on="id", how="left", suffixes=("", "_pred"))
    return float((merged["survived"] == merged["survived_pred"]).mean())


if __name__ == "__main__":
    print(get_score())
