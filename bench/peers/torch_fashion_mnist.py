#!/usr/bin/python3
"""The main job in PyTorch eager, for comparison with examples/fashion_mnist.c: the same
MNISTNet, default initialization, normalization, SGD (lr 0.01, momentum 0.5), batch 64, a
fresh shuffle per epoch, 2 epochs; prints training time, images per second and test accuracy.

Run with Debian's python3-torch (the script re-executes itself in fair_env.py's environment
before it imports torch):
  /usr/bin/python3 bench/peers/torch_fashion_mnist.py [--threads N] [--data DIR]
"""
import argparse
import gzip
import time

from fair_env import reexec_fairly

reexec_fairly()

import numpy as np  # noqa: E402  (after the environment is set)
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch_models import MNISTNet  # noqa: E402

MEAN, STD = 0.2860, 0.3530


def load(data, split):
    with gzip.open(f"{data}/{split}-images-idx3-ubyte.gz") as f:
        x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 1, 28, 28)
    with gzip.open(f"{data}/{split}-labels-idx1-ubyte.gz") as f:
        y = np.frombuffer(f.read(), np.uint8, offset=8)
    return (torch.tensor(x, dtype=torch.float32) / 255 - MEAN) / STD, torch.tensor(y, dtype=torch.int64)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    a = ap.parse_args()
    torch.manual_seed(a.seed)
    if a.threads:
        torch.set_num_threads(a.threads)
    xtr, ytr = load(a.data, "train")
    xte, yte = load(a.data, "t10k")
    model = MNISTNet()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.5)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    total = 0.0
    for epoch in range(1, a.epochs + 1):
        t0 = time.time()
        perm = torch.randperm(len(xtr))
        model.train()
        for i in range(0, len(xtr), 64):
            idx = perm[i:i + 64]
            opt.zero_grad()
            F.nll_loss(model(xtr[idx]), ytr[idx]).backward()
            opt.step()
        t = time.time() - t0
        total += t
        model.eval()
        with torch.no_grad():
            acc = (model(xte).argmax(1) == yte).float().mean().item()
        print(f"epoch {epoch}: {t:.1f} s, {len(xtr) / t:.0f} img/s; test accuracy {100 * acc:.2f}%", flush=True)
    print(f"trained {a.epochs} epochs in {total:.1f} s ({a.epochs * len(xtr) / total:.0f} img/s)")


if __name__ == "__main__":
    main()
