"""Starter: multinomial naive Bayes on the counts of the most frequent words."""

import pandas as pd
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.model_selection import train_test_split
from sklearn.naive_bayes import MultinomialNB
from sklearn.pipeline import make_pipeline

train = pd.read_csv("train.csv")
test = pd.read_csv("test.csv")


def make_model():
    return make_pipeline(CountVectorizer(max_features=20, lowercase=True), MultinomialNB(alpha=1.0))


X_train, X_valid, y_train, y_valid = train_test_split(
    train["review"], train["label"], test_size=0.2, random_state=0, stratify=train["label"]
)
model = make_model().fit(X_train, y_train)
print(f"validation accuracy: {model.score(X_valid, y_valid):.4f}")

model = make_model().fit(train["review"], train["label"])
pd.DataFrame({"id": test["id"], "label": model.predict(test["review"])}).to_csv("submission.csv", index=False)
print("wrote submission.csv")
