"""Starter: a tiny random forest on the 21 baseline voice features (jitter, shimmer, harmonicity, ...)."""

import pandas as pd
from sklearn.ensemble import RandomForestClassifier
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import train_test_split

train = pd.read_csv("train.csv")
test = pd.read_csv("test.csv")
target = "class"
# The "baseline features" of Sakar et al. (2019); the other 730 columns (MFCC, wavelet, TQWT ...) are unused.
features = [
    "gender", "PPE", "DFA", "RPDE", "meanPeriodPulses", "stdDevPeriodPulses", "locPctJitter", "locAbsJitter",
    "rapJitter", "ppq5Jitter", "ddpJitter", "locShimmer", "locDbShimmer", "apq3Shimmer", "apq5Shimmer",
    "apq11Shimmer", "ddaShimmer", "meanAutoCorrHarmonicity", "meanNoiseToHarmHarmonicity",
    "meanHarmToNoiseHarmonicity", "minIntensity",
]  # fmt: skip
y = (train[target] == "PD").astype(int)

X_train, X_valid, y_train, y_valid = train_test_split(train[features], y, test_size=0.25, random_state=0, stratify=y)


def make_model():
    return RandomForestClassifier(n_estimators=10, max_depth=2, random_state=0)


model = make_model().fit(X_train, y_train)
print(f"validation ROC AUC: {roc_auc_score(y_valid, model.predict_proba(X_valid)[:, 1]):.4f}")

model = make_model().fit(train[features], y)
pd.DataFrame({"id": test["id"], "PD": model.predict_proba(test[features])[:, 1]}).to_csv("submission.csv", index=False)
print("wrote submission.csv")
