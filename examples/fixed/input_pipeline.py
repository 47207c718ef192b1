"""A small training script with the data-movement anti-patterns perflint finds.

Run it as is, or after `perflint fix --unsafe-fixes` (see `examples/fixed/`): both print
the same numbers on the CPU. On a GPU the fixed one avoids a host round trip per step for
every pattern below.

    python examples/input_pipeline.py
"""

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

features = torch.randn(256, 16)
targets = (features[:, :4].sum(1) > 0).long()
class_weights = np.array([1.0, 2.0])


class Jittered(Dataset):
    """Each row with its own noise, drawn when it is loaded: host work for every item, as
    decoding and augmentation are. (A plain `TensorDataset` of rows already in memory is
    not reported: worker processes would have nothing to do.)"""

    def __init__(self, features, targets):
        self.features, self.targets = features, targets

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, index):
        generator = torch.Generator().manual_seed(index)
        return self.features[index] + 0.01 * torch.randn(16, generator=generator), self.targets[index]


class Classifier(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 2))

    def forward(self, x):
        bias = torch.zeros(x.shape[0], 2, device=x.device, dtype=x.dtype)  # PFL101: built on the CPU, then copied
        scale = torch.tensor([1.0, 1.0], device=x.device)  # PFL106: the same constant every step
        return self.body(x) * scale + bias


model = Classifier().to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
loader = DataLoader(  # PFL103: no worker processes; PFL104: batches are not pinned
    Jittered(features, targets),
    batch_size=32,
    shuffle=True,
    generator=torch.Generator().manual_seed(0),
    pin_memory=True,
)

for epoch in range(3):
    for inputs, labels in loader:
        model.to(device)  # PFL107: moves the whole model every step
        inputs = inputs.to(device, non_blocking=True)
        labels = labels.to(device, non_blocking=True)
        optimizer.zero_grad()  # PFL301: a memset per parameter
        noise = torch.randn(inputs.shape, device=device) * 0.01  # PFL101: CPU generator, then a copy
        weights = torch.tensor(class_weights, device=device).to(torch.float32)  # PFL102: copies the array; PFL101: then moves it
        logits = model(inputs + noise)
        loss = torch.nn.functional.cross_entropy(logits, labels, weight=weights)
        loss.backward()
        optimizer.step()

with torch.no_grad():
    accuracy = (model(features.to(device)).argmax(1).cpu() == targets).float().mean()
checksum = sum(p.detach().double().sum() for p in model.parameters())
print(f"loss={loss.item():.6f} accuracy={accuracy.item():.4f} checksum={checksum.item():.10f}")
