"""Starter: a message-passing neural network that learns Bellman-Ford's shortest-path predecessor pointers.

Each graph is a dense weight matrix (0 = no edge). Node input: whether the node is the source. The network runs
PROCESSING_STEPS rounds of message passing with shared weights, then scores every candidate predecessor j of each
node i (a neighbour of i, or i itself) and picks the best one, as in the CLRS benchmark's pointer outputs.
"""

import numpy as np
import pandas as pd
import torch
from torch import nn

SEED = 0
HIDDEN_SIZE = 32
PROCESSING_STEPS = 2
EPOCHS = 3
BATCH_SIZE = 64
LEARNING_RATE = 0.001
AGGREGATION = "sum"  # "sum" or "max"

torch.manual_seed(SEED)
np.random.seed(SEED)
torch.set_num_threads(2)

train = np.load("train.npz")
test = np.load("test.npz")


def to_tensors(data):
    weights = torch.tensor(data["weights"])
    source = torch.nn.functional.one_hot(torch.tensor(data["source"]), weights.shape[1]).float()
    return weights, source


class MPNN(nn.Module):
    def __init__(self, hidden_size):
        super().__init__()
        self.encode = nn.Linear(1, hidden_size)
        self.message = nn.Sequential(nn.Linear(2 * hidden_size + 1, hidden_size), nn.ReLU())
        self.update = nn.Linear(2 * hidden_size, hidden_size)
        self.query = nn.Linear(hidden_size, hidden_size)
        self.key = nn.Linear(hidden_size, hidden_size)
        self.edge_score = nn.Linear(1, 1)

    def forward(self, weights, source):
        batch, n, _ = weights.shape
        edges = weights > 0
        h = self.encode(source.unsqueeze(-1))
        for _ in range(PROCESSING_STEPS):
            # message from sender j to receiver i uses (h_i, h_j, w_ij)
            pair = torch.cat(
                [h.unsqueeze(2).expand(-1, -1, n, -1), h.unsqueeze(1).expand(-1, n, -1, -1), weights.unsqueeze(-1)],
                dim=-1,
            )
            messages = self.message(pair)
            if AGGREGATION == "max":
                messages = messages.masked_fill(~edges.unsqueeze(-1), -1e9)
                aggregated = messages.max(dim=2).values.clamp(min=0)
            else:
                aggregated = (messages * edges.unsqueeze(-1)).sum(dim=2)
            h = torch.relu(self.update(torch.cat([h, aggregated], dim=-1)))
        scores = self.query(h) @ self.key(h).transpose(1, 2) + self.edge_score(weights.unsqueeze(-1)).squeeze(-1)
        allowed = edges | torch.eye(n, dtype=torch.bool).unsqueeze(0)
        return scores.masked_fill(~allowed, -1e9)  # (batch, node i, candidate predecessor j)


def fit(weights, source, pointer):
    torch.manual_seed(SEED)
    model = MPNN(HIDDEN_SIZE)
    optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)
    for epoch in range(EPOCHS):
        model.train()
        order = torch.randperm(len(weights))
        for start in range(0, len(weights), BATCH_SIZE):
            batch = order[start : start + BATCH_SIZE]
            logits = model(weights[batch], source[batch])
            loss = nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), pointer[batch].reshape(-1))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return model


@torch.no_grad()
def predict(model, weights, source):
    model.eval()
    return torch.cat([model(weights[i : i + 64], source[i : i + 64]).argmax(-1) for i in range(0, len(weights), 64)])


weights, source = to_tensors(train)
pointer = torch.tensor(train["pointer"])
n_valid = len(weights) // 5
model = fit(weights[n_valid:], source[n_valid:], pointer[n_valid:])
valid_accuracy = (predict(model, weights[:n_valid], source[:n_valid]) == pointer[:n_valid]).float().mean().item()
print(f"validation pointer accuracy: {valid_accuracy:.4f}  (16-node graphs; the test graphs have 32 nodes)")

model = fit(weights, source, pointer)
test_weights, test_source = to_tensors(test)
predicted = predict(model, test_weights, test_source).numpy()
n_graphs, n_nodes = predicted.shape
pd.DataFrame(
    {
        "graph": np.repeat(np.arange(n_graphs), n_nodes),
        "node": np.tile(np.arange(n_nodes), n_graphs),
        "pointer": predicted.reshape(-1),
    }
).to_csv("submission.csv", index=False)
print("wrote submission.csv")
