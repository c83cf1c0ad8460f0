import os

import pandas as pd


def get_score(submission_folder="../env"):
    path = os.path.join(submission_folder, "submission.csv")
    if not os.path.exists(path):
        raise FileNotFoundError("submission.csv was not found; expected columns id and progression")
    submission = pd.read_csv(path)
    answer = pd.read_csv(os.path.join(os.path.dirname(os.path.abspath(__file__)), "answer.csv"))
    merged = answer.merge(submission, on="id", how="left", suffixes=("", "_predicted"))
    if merged["progression_predicted"].isna().any():
        raise ValueError(f"{int(merged['progression_predicted'].isna().sum())} test rows have no prediction")
    return float((merged["progression"] - merged["progression_predicted"]).abs().mean())
