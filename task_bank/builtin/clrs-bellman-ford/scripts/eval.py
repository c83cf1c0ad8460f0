import os

import numpy as np
import pandas as pd


def get_score(submission_folder="../env"):
    """Pointer accuracy: the fraction of (graph, node) pairs of the test graphs whose predicted shortest-path
    predecessor is right. submission.csv has the columns graph, node, pointer; missing rows count as wrong."""
    submission_path = os.path.join(submission_folder, "submission.csv")
    if not os.path.exists(submission_path):
        raise FileNotFoundError("submission.csv was not found in the workspace; expected columns graph, node, pointer")
    submission = pd.read_csv(submission_path)
    for column in ("graph", "node", "pointer"):
        if column not in submission.columns:
            raise ValueError(f"submission.csv has no '{column}' column; expected columns graph, node, pointer")
    pointers = np.load(os.path.join(os.path.dirname(os.path.abspath(__file__)), "answer.npz"))["pointer"]
    n_graphs, n_nodes = pointers.shape
    answer = pd.DataFrame(
        {
            "graph": np.repeat(np.arange(n_graphs), n_nodes),
            "node": np.tile(np.arange(n_nodes), n_graphs),
            "pointer": pointers.reshape(-1),
        }
    )
    submission = submission.drop_duplicates(["graph", "node"])
    merged = answer.merge(submission, on=["graph", "node"], how="left", suffixes=("", "_pred"))
    predicted = pd.to_numeric(merged["pointer_pred"], errors="coerce")
    return float((merged["pointer"] == predicted).mean())


if __name__ == "__main__":
    print(get_score())
