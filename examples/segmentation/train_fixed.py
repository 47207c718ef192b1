# Generated from train.py by `perflint fix --unsafe-fixes` (examples/segmentation/regenerate.py); do not edit.
"""A small semantic-segmentation training loop, written the way such loops are often written.

It works, and it makes the GPU wait for the CPU several times per step: boolean-mask
indexing, `nonzero`, `unique`, `.item()` for logging and metrics, a NaN check in Python,
blocking copies from a DataLoader without workers or pinned memory. `train_fixed.py` is
this file after `perflint fix --unsafe-fixes` (regenerate it with `python
examples/segmentation/regenerate.py`); `perflint bench --e2e examples/segmentation`
checks that both compute the same losses and, on a GPU, times a step of each.

Run it: `python examples/segmentation/train.py [cpu|cuda] [steps]`.
"""

from __future__ import annotations

import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

NUM_CLASSES = 5
IGNORE = 255


class TinySegNet(nn.Module):
    def __init__(self, num_classes: int = NUM_CLASSES, width: int = 16) -> None:
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Conv2d(3, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU(),
            nn.Conv2d(width, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU(),
        )
        self.head = nn.Conv2d(width, num_classes, 1)

    def forward(self, images):
        return self.head(self.encoder(images))


def make_dataset(samples: int, image_size: int, seed: int) -> TensorDataset:
    generator = torch.Generator().manual_seed(seed)
    images = torch.randn(samples, 3, image_size, image_size, generator=generator)
    masks = torch.randint(0, NUM_CLASSES, (samples, image_size, image_size), generator=generator)
    unlabeled = torch.rand(samples, image_size, image_size, generator=generator) < 0.1
    masks[unlabeled] = IGNORE
    return TensorDataset(images, masks)


def train(device, steps: int = 8, seed: int = 0, batch_size: int = 4, image_size: int = 32, samples: int = 32,
          log_every: int = 0) -> dict:
    torch.manual_seed(seed)
    model = TinySegNet().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loader = DataLoader(make_dataset(samples, image_size, seed), batch_size=batch_size, shuffle=True,  # PFL104
                        generator=torch.Generator().manual_seed(seed), pin_memory=True)

    losses = []
    correct = 0
    labeled = 0
    foreground = 0
    classes_seen = set()
    step = 0
    while step < steps:
        for images, masks in loader:
            if step == steps:
                break
            step += 1
            images = images.to(device, non_blocking=True)
            masks = masks.to(device, non_blocking=True)

            logits = model(images)
            # per-pixel loss over labeled pixels only
            flat_logits = logits.permute(0, 2, 3, 1).reshape(-1, NUM_CLASSES)
            flat_masks = masks.reshape(-1)
            keep = flat_masks != IGNORE
            loss = F.cross_entropy(flat_logits, torch.where(keep, flat_masks, -100), ignore_index=-100)  # PFL214 PFL214
            if torch.isnan(loss):  # PFL206
                continue

            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

            # metrics, every step
            pred = flat_logits.argmax(1)
            correct += ((pred == flat_masks) & keep).sum()  # PFL201 PFL214 PFL214
            labeled += torch.count_nonzero(keep)  # PFL214
            foreground += torch.count_nonzero((flat_masks > 0) & keep)  # PFL211 PFL214
            classes_seen.update(torch.unique(flat_masks[keep]).tolist())  # PFL212 PFL214 (and .tolist() after it: one finding for the expression)
            losses.append(loss.item())  # PFL201
            if log_every and step % log_every == 0:
                print(f"step {step}: loss {loss.item():.4f}")

    return {
        "losses": losses,
        "pixel_accuracy": correct / labeled,
        "foreground_pixels": foreground,
        "classes_seen": sorted(classes_seen),
    }


if __name__ == "__main__":
    device = torch.device(sys.argv[1] if len(sys.argv) > 1 else ("cuda" if torch.cuda.is_available() else "cpu"))
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 8
    result = train(device, steps=steps, log_every=1)
    print(f"pixel accuracy {float(result['pixel_accuracy']):.4f}, classes {result['classes_seen']}")
