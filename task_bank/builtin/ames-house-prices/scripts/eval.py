import os

import numpy as np
import pandas as pd


def get_score(submission_folder="../env"):
    """Mean absolute error (in dollars) of submission.csv (columns id, Sale_Price) against the hidden prices.

    Lower is better. Every test house must have a finite predicted price; missing rows make the submission invalid.
    """
    submission_path = os.path.join(submission_folder, "submission.csv")
    if not os.path.exists(submission_path):
        raise FileNotFoundError("submission.csv was not found in the workspace; expected columns id, Sale_Price")
    submission = pd.read_csv(submission_path)
    for column in ("id", "Sale_Price"):
        if column not in submission.columns:
            raise ValueError(f"submission.csv has no '{column}' column; expected columns id, Sale_Price")
    answer = pd.read_csv(os.path.join(os.path.dirname(os.path.abspath(__file__)), "answer.csv"))
    merged = answer.merge(submission.drop_duplicates("id"), on="id", how="left", suffixes=("", "_pred"))
    predicted = pd.to_numeric(merged["Sale_Price_pred"], errors="coerce")
    missing = int((~np.isfinite(predicted)).sum())
    if missing:
        raise ValueError(
            f"submission.csv has no finite Sale_Price for {missing} of the {len(answer)} test houses; "
            "expected one numeric prediction for every id in test.csv"
        )
    return float(np.mean(np.abs(merged["Sale_Price"] - predicted)))


if __name__ == "__main__":
    print(get_score())
