"""The models of lazyjit's main job and benchmarks in torch.nn, for the peer scripts: MNISTNet
as in examples/fashion_mnist.c, and the 784-512-512-10 MLP, the LSTM classifier and ResNet-18
of bench/workloads.c.
All return log-probabilities."""
import torch.nn as nn
import torch.nn.functional as F


def conv_layer(x, conv):
    """relu(max_pool2d(conv(x), 2)): one of MNISTNet's conv layers."""
    return F.relu(F.max_pool2d(conv(x), 2))


class MNISTNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, padding=1)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1)
        self.fc1 = nn.Linear(3136, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = conv_layer(conv_layer(x, self.conv1), self.conv2)
        x = F.relu(self.fc1(x.view(-1, 3136)))
        return F.log_softmax(self.fc2(x), 1)


def mlp():
    return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10),
                         nn.LogSoftmax(1))


class LSTMClassifier(nn.Module):
    """torch.nn.LSTM over [T, B, I] from zero states, a linear classifier on the last hidden state."""

    def __init__(self, i, h, classes=10):
        super().__init__()
        self.lstm = nn.LSTM(i, h)
        self.head = nn.Linear(h, classes)

    def forward(self, x):
        _, (h, _) = self.lstm(x)
        return F.log_softmax(self.head(h[0]), 1)


class BasicBlock(nn.Module):
    """ResNet's basic block; of stride 2, its shortcut is a 1x1 projection of stride 2."""

    def __init__(self, cin, c, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, c, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)
        self.down = nn.Sequential(nn.Conv2d(cin, c, 1, stride, bias=False), nn.BatchNorm2d(c)) if stride > 1 else None

    def forward(self, x):
        y = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
        return F.relu(y + (self.down(x) if self.down else x))


class ResNet18(nn.Module):
    """torchvision's resnet18 (its average pool a mean over the positions)."""

    def __init__(self, classes=1000):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        blocks, cin = [], 64
        for c, stride in [(64, 1), (64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2), (512, 1)]:
            blocks.append(BasicBlock(cin, c, stride))
            cin = c
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(512, classes)

    def forward(self, x):
        return F.log_softmax(self.fc(self.blocks(self.stem(x)).mean((2, 3))), 1)
