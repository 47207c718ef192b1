"""A small training script written the way many are: it works, and it makes the GPU wait for
the CPU at almost every step.

Every line perflint reports is marked with a `# PFLxxx` comment naming the rule. Try:

    perflint check examples/
    perflint fix --unsafe-fixes --diff examples/train.py

`examples/fixed/train.py` is this file after `perflint fix --unsafe-fixes`; a test runs both on
the CPU and checks that they compute the same results. `python examples/train.py` runs it
(on a GPU when there is one) and prints the metrics as JSON.
"""

from __future__ import annotations

import json

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

IGNORE = -1
NUM_CLASSES = 5
FEATURES = 16
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class Classifier(nn.Module):
    def __init__(self, hidden: int = 32) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(FEATURES, hidden), nn.ReLU(), nn.Linear(hidden, NUM_CLASSES))
        self.temperature = torch.ones(1).item()  # once, at construction: fine

    def forward(self, x):
        if torch.isnan(x).any():  # PFL206
            x = torch.nan_to_num(x)
        logits = self.body(x) / self.temperature
        bias = torch.tensor([0.0, 0.1, 0.0, -0.1, 0.0])  # PFL106
        return logits + bias.to(x.device)


def masked_loss(logits, labels):
    """Cross-entropy over the labeled samples only."""
    labeled = labels != IGNORE
    return F.cross_entropy(logits, torch.where(labeled, labels, -100), ignore_index=-100)  # PFL214 PFL214


def make_loader(num_samples: int = 96, batch_size: int = 16) -> DataLoader:
    generator = torch.Generator().manual_seed(0)
    features = torch.randn(num_samples, FEATURES, generator=generator)
    labels = torch.randint(-1, NUM_CLASSES, (num_samples,), generator=generator)
    return DataLoader(TensorDataset(features, labels), batch_size=batch_size, pin_memory=True)  # PFL104 (rows already in memory: workers would not help)


def train(model: nn.Module, loader: DataLoader, epochs: int = 2) -> dict[str, float]:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    rng = np.random.default_rng(0)
    running_loss = 0.0
    correct = 0
    labeled_total = 0
    seen_classes = 0
    for epoch in range(epochs):
        for step, (x, y) in enumerate(loader):
            model.to(device)  # PFL107
            x = x.to(device, non_blocking=True)
            y = y.to(device, non_blocking=True)
            noise = torch.as_tensor(rng.normal(0.0, 0.01, size=tuple(x.shape)).astype(np.float32))  # PFL102
            x = x + noise.to(device)
            optimizer.zero_grad()  # PFL301
            logits = model(x)
            loss = masked_loss(logits, y)
            loss.backward()
            optimizer.step()

            running_loss += loss.item()  # PFL201
            correct += (logits.argmax(1) == y).sum()  # PFL201
            labeled_total += torch.count_nonzero(y != IGNORE)  # PFL211
            seen_classes = max(seen_classes, torch.unique(y).numel())  # PFL212
            if step % 4 == 0:
                print(f"epoch {epoch} step {step} loss {loss.item():.4f}")  # every 4 steps: fine
            zeros = torch.zeros(len(y), NUM_CLASSES, device=device)  # PFL101
            logits_clean = logits.detach().clone()
            logits_clean.masked_fill_(torch.isnan(logits_clean), 0.0)  # PFL211
            torch._assert_async(torch.isfinite(logits_clean + zeros).all())  # PFL207
    print(f"final loss {loss}")  # once, after training: fine
    return {
        "loss": float(running_loss),
        "correct": float(correct),
        "labeled": float(labeled_total),
        "classes": float(seen_classes),
    }


def main() -> None:
    torch.manual_seed(0)
    model = Classifier().to(device)
    metrics = train(model, make_loader())
    print(json.dumps(metrics, sort_keys=True))


if __name__ == "__main__":
    main()
