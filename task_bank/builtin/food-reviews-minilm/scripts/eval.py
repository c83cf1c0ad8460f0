import os

import pandas as pd

LABELS = {"great", "other"}


def get_score(submission_folder="../env"):
    """Accuracy of submission.csv (columns id, label) against the hidden labels; missing rows count as wrong."""
    submission_path = os.path.join(submission_folder, "submission.csv")
    if not os.path.exists(submission_path):
        raise FileNotFoundError("submission.csv was not found in the workspace; expected columns id, label")
    submission = pd.read_csv(submission_path)
    for column in ("id", "label"):
        if column not in submission.columns:
            raise ValueError(f"submission.csv has no '{column}' column; expected columns id, label")
    unknown = set(submission["label"].astype(str)) - LABELS
    if unknown:
        raise ValueError(f"submission.csv has labels {sorted(unknown)[:5]}; expected 'great' or 'other'")
    answer = pd.read_csv(os.path.join(os.path.dirname(os.path.abspath(__file__)), "answer.csv"))
    submission = submission.drop_duplicates("id").assign(label=lambda d: d["label"].astype(str))
    merged = answer.merge(submission, on="id", how="left", suffixes=("", "_pred"))
    return float((merged["label"] == merged["label_pred"]).mean())


if __name__ == "__main__":
    print(get_score())
