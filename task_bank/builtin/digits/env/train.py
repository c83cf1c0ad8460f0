import pandas as pd
from sklearn.ensemble import RandomForestClassifier
from sklearn.model_selection import train_test_split

train = pd.read_csv("train.csv")
test = pd.read_csv("test.csv")
features = [c for c in train.columns if c.startswith("p")]

X_train, X_valid, y_train, y_valid = train_test_split(train[features], train["label"], test_size=0.2, random_state=0)

model = RandomForestClassifier(n_estimators=5, max_depth=4, random_state=0)
model.fit(X_train, y_train)
print(f"validation accuracy: {model.score(X_valid, y_valid):.4f}")

model.fit(train[features], train["label"])
pd.DataFrame({"id": test["id"], "label": model.predict(test[features])}).to_csv("submission.csv", index=False)
print("wrote submission.csv")
