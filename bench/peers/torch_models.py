"""The models of lazyjit's main job and benchmarks in torch.nn, for the peer scripts: MNISTNet
as in examples/fashion_mnist.c and the 784-512-512-10 MLP of bench/workloads.c. Both return
log-probabilities."""
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
