"""Starter: a small character-level GRU language model, trained briefly on random windows of train.txt."""

import json
import math

import numpy as np
import pandas as pd
import torch
from torch import nn

SEED = 0
EMBEDDING_SIZE = 16
HIDDEN_SIZE = 64
NUM_LAYERS = 1
SEQUENCE_LENGTH = 64
BATCH_SIZE = 32
TRAIN_STEPS = 300
LEARNING_RATE = 0.003

torch.manual_seed(SEED)
np.random.seed(SEED)
torch.set_num_threads(2)

with open("vocab.json") as fh:
    vocabulary = json.load(fh)
char_to_index = {c: i for i, c in enumerate(vocabulary)}
with open("train.txt") as fh:
    text = fh.read()
data = torch.tensor([char_to_index[c] for c in text], dtype=torch.long)

# The last 5% of the training text is the validation split.
split = int(len(data) * 0.95)
train_data, valid_data = data[:split], data[split:]


class CharModel(nn.Module):
    def __init__(self, vocabulary_size):
        super().__init__()
        self.embedding = nn.Embedding(vocabulary_size, EMBEDDING_SIZE)
        self.rnn = nn.GRU(EMBEDDING_SIZE, HIDDEN_SIZE, num_layers=NUM_LAYERS, batch_first=True)
        self.output = nn.Linear(HIDDEN_SIZE, vocabulary_size)

    def forward(self, x):
        hidden, _ = self.rnn(self.embedding(x))
        return self.output(hidden)


def random_batch(source):
    starts = torch.randint(0, len(source) - SEQUENCE_LENGTH - 1, (BATCH_SIZE,))
    x = torch.stack([source[s : s + SEQUENCE_LENGTH] for s in starts])
    y = torch.stack([source[s + 1 : s + SEQUENCE_LENGTH + 1] for s in starts])
    return x, y


model = CharModel(len(vocabulary))
optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)
loss_fn = nn.CrossEntropyLoss()
for step in range(TRAIN_STEPS):
    model.train()
    x, y = random_batch(train_data)
    optimizer.zero_grad()
    loss = loss_fn(model(x).reshape(-1, len(vocabulary)), y.reshape(-1))
    loss.backward()
    optimizer.step()
    if step % 100 == 0:
        print(f"step {step}: training loss {loss.item() / math.log(2):.3f} bits per character")


@torch.no_grad()
def next_char_probabilities(contexts):
    """Probability of every next character after each context string (contexts are cut to the last characters)."""
    model.eval()
    rows = []
    for start in range(0, len(contexts), 256):
        batch = [c[-SEQUENCE_LENGTH:] for c in contexts[start : start + 256]]
        length = max(len(c) for c in batch)
        # Left-pad with newlines so that the last position of every row is the last character of its context.
        x = torch.tensor([[char_to_index["\n"]] * (length - len(c)) + [char_to_index[ch] for ch in c] for c in batch])
        rows.append(torch.softmax(model(x)[:, -1], dim=-1))
    return torch.cat(rows).numpy()


# Validation: predict the character after 2000 random contexts from the validation text.
generator = np.random.default_rng(SEED)
positions = generator.integers(SEQUENCE_LENGTH, len(valid_data) - 1, 2000)
valid_text = "".join(vocabulary[i] for i in valid_data.tolist())
probabilities = next_char_probabilities([valid_text[p - SEQUENCE_LENGTH : p] for p in positions])
targets = valid_data[positions].numpy()
valid_bits = -np.log2(np.maximum(probabilities[np.arange(len(targets)), targets], 1e-6)).mean()
print(f"validation bits per character: {valid_bits:.4f}")

with open("test.json") as fh:
    test = json.load(fh)
probabilities = next_char_probabilities([row["context"] for row in test])
submission = pd.DataFrame(probabilities, columns=[f"p{i}" for i in range(len(vocabulary))])
submission.insert(0, "id", [row["id"] for row in test])
submission.to_csv("submission.csv", index=False, float_format="%.6g")
print("wrote submission.csv")
