#!/usr/bin/python3
"""Writes tests/data/nn_fixtures.txt: inputs and PyTorch's outputs of the neural-network ops
(torch.nn.functional): convolution with stride, padding, dilation and groups, max and
average pooling with padding, softmax and log_softmax, the losses with every reduction,
linear, embedding, index_select, gather, scatter_add, one_hot, layer_norm, batch_norm in
training (with the updated running statistics) and evaluation, and constant padding.
tests/test_nn_torch.c replays every case. The format is fixture_format.py's; the scalars
after the op name are the op's integer and float arguments in the order the test reads them.

Run with Debian's python3-torch:  /usr/bin/python3 tests/data/gen_nn_fixtures.py
"""
import os

import torch
import torch.nn.functional as F

from fixture_format import Fixtures

torch.manual_seed(0)
fixtures = Fixtures()
case = fixtures.case
REDUCTIONS = ["mean", "sum", "none"]  # lj_reduction's order


def randn(*shape, dtype=torch.float32):
    return torch.randn(*shape, dtype=torch.float64).to(dtype)


# convolution: scalars stride(2) padding(2) dilation(2) groups
for name, x, w, b, s, p, d, g in [
    ("conv_plain", randn(2, 3, 7, 6), randn(4, 3, 3, 3), None, (1, 1), (0, 0), (1, 1), 1),
    ("conv_bias_pad", randn(2, 3, 7, 6), randn(4, 3, 3, 3), randn(4), (1, 1), (1, 1), (1, 1), 1),
    ("conv_stride_dilation", randn(1, 2, 9, 8), randn(3, 2, 3, 2), randn(3), (2, 3), (1, 0), (2, 1), 1),
    ("conv_groups", randn(2, 4, 6, 6), randn(6, 2, 3, 3), randn(6), (1, 2), (2, 1), (1, 1), 2),
    ("conv_depthwise", randn(1, 3, 5, 5), randn(3, 1, 3, 3), None, (1, 1), (1, 1), (1, 1), 3),
    ("conv_1x1", randn(2, 5, 4, 3), randn(7, 5, 1, 1), randn(7), (1, 1), (0, 0), (1, 1), 1),
    ("conv_mnist_shape", randn(1, 1, 28, 28), randn(8, 1, 3, 3), randn(8), (1, 1), (1, 1), (1, 1), 1),
]:
    ins = [x, w] + ([b] if b is not None else [])
    case(name, "conv2d", lambda x, w, b=None: F.conv2d(x, w, b, s, p, d, g), ins, scalars=(*s, *p, *d, g),
         tol=1e-5, atol=1e-5)
case("conv_f64", "conv2d", lambda x, w, b: F.conv2d(x, w, b, (1, 2), (1, 1)),
     [randn(2, 3, 6, 7, dtype=torch.float64), randn(4, 3, 3, 2, dtype=torch.float64), randn(4, dtype=torch.float64)],
     scalars=(1, 2, 1, 1, 1, 1, 1), tol=1e-12, atol=1e-12)

# pooling: scalars kernel(2) stride(2) padding(2)
for name, x, k, s, p in [
    ("pool_2x2", randn(2, 3, 8, 6), (2, 2), (2, 2), (0, 0)),
    ("pool_3x3_s2_p1", randn(1, 2, 7, 9), (3, 3), (2, 2), (1, 1)),
    ("pool_overlap", randn(1, 1, 6, 5), (3, 2), (1, 1), (1, 0)),
    ("pool_odd_floor", randn(2, 2, 7, 7), (2, 2), (2, 2), (0, 0)),
]:
    case(f"max_{name}", "max_pool2d", lambda x: F.max_pool2d(x, k, s, p), [x], scalars=(*k, *s, *p))
    case(f"avg_{name}", "avg_pool2d", lambda x: F.avg_pool2d(x, k, s, p), [x], scalars=(*k, *s, *p), tol=1e-6,
         atol=1e-6)
ties = torch.tensor([[[[1.0, 1.0, 0.0], [1.0, -5.0, 2.0], [2.0, 2.0, 2.0]]]])
case("max_pool_ties", "max_pool2d", lambda x: F.max_pool2d(x, 2, 1), [ties], scalars=(2, 2, 1, 1, 0, 0))
tiles = torch.tensor([[[[1.0, 1.0, 0.0, 2.0, 3.0], [0.0, 1.0, 2.0, 0.0, 9.0],
                        [float("nan"), 4.0, -1.0, -1.0, 9.0], [5.0, float("nan"), -1.0, -2.0, 9.0]]]])
case("max_pool_tiles_ties_nan", "max_pool2d", lambda x: F.max_pool2d(x, 2, 2), [tiles], scalars=(2, 2, 2, 2, 0, 0))
case("avg_pool_tiles_nan", "avg_pool2d", lambda x: F.avg_pool2d(x, 2, 2), [tiles], scalars=(2, 2, 2, 2, 0, 0))

# softmax family: scalar dim
sx = randn(3, 5) * 4
sx[1, 2] = 80.0  # large values must not overflow
for dim in [0, 1, -1]:
    case(f"softmax_dim{dim}", "softmax", lambda x: F.softmax(x, dim), [sx], scalars=(dim,), tol=2e-6, atol=1e-7)
    case(f"log_softmax_dim{dim}", "log_softmax", lambda x: F.log_softmax(x, dim), [sx], scalars=(dim,), tol=2e-6,
         atol=2e-6)
case("softmax_3d", "softmax", lambda x: F.softmax(x, 1), [randn(2, 4, 3)], scalars=(1,), tol=2e-6, atol=1e-7)
case("softmax_f64", "softmax", lambda x: F.softmax(x, 1), [randn(4, 6, dtype=torch.float64)], scalars=(1,), tol=1e-14,
     atol=1e-15)

# losses: scalar reduction
logits = randn(5, 4)
target = torch.tensor([3, 0, 1, 3, 2])
logits3 = randn(2, 4, 3)
target3 = torch.tensor([[1, 0, 3], [2, 2, 1]])
for r, red in enumerate(REDUCTIONS):
    case(f"nll_{red}", "nll_loss", lambda lp, t: F.nll_loss(lp, t, reduction=red), [F.log_softmax(logits, 1), target],
         scalars=(r,), tol=1e-6, atol=1e-6)
    case(f"cross_entropy_{red}", "cross_entropy", lambda x, t: F.cross_entropy(x, t, reduction=red), [logits, target],
         scalars=(r,), tol=2e-6, atol=2e-6)
    case(f"cross_entropy_3d_{red}", "cross_entropy", lambda x, t: F.cross_entropy(x, t, reduction=red),
         [logits3, target3], scalars=(r,), tol=2e-6, atol=2e-6)
    case(f"mse_{red}", "mse_loss", lambda a, b: F.mse_loss(a, b, reduction=red), [randn(3, 4), randn(3, 4)],
         scalars=(r,), tol=1e-6, atol=1e-6)
case("nll_1d", "nll_loss", lambda lp, t: F.nll_loss(lp, t), [F.log_softmax(randn(6), 0), torch.tensor(4)],
     scalars=(0,), tol=1e-6)
case("mse_broadcast", "mse_loss", lambda a, b: F.mse_loss(a, b.expand(3, 4)), [randn(3, 4), randn(1, 4)], scalars=(0,),
     tol=1e-6)

# linear
case("linear", "linear", F.linear, [randn(3, 5), randn(4, 5), randn(4)], tol=1e-5, atol=1e-6)
case("linear_nobias_3d", "linear", F.linear, [randn(2, 3, 5), randn(4, 5)], tol=1e-5, atol=1e-6)

# indexing: embedding, index_select (scalar dim), gather / scatter_add (scalar dim), one_hot
emb = randn(7, 3)
case("embedding", "embedding", lambda w, i: F.embedding(i, w), [emb, torch.tensor([[0, 6, 2], [2, 2, 5]])])
x34 = randn(3, 4)
case("index_select_0", "index_select", lambda x, i: torch.index_select(x, 0, i), [x34, torch.tensor([2, 0, 2])],
     scalars=(0,))
case("index_select_1", "index_select", lambda x, i: torch.index_select(x, 1, i), [x34, torch.tensor([3, 1])],
     scalars=(1,))
case("gather_0", "gather", lambda x, i: torch.gather(x, 0, i), [x34, torch.tensor([[2, 0, 1, 1], [0, 0, 2, 1]])],
     scalars=(0,))
case("gather_1", "gather", lambda x, i: torch.gather(x, 1, i), [x34, torch.tensor([[3], [0], [1]])], scalars=(1,))
case("scatter_add_0", "scatter_add", lambda x, i, s: x.scatter_add(0, i, s),
     [x34, torch.tensor([[2, 0, 1, 1], [2, 0, 2, 1]]), randn(2, 4)], scalars=(0,), tol=1e-6)
case("scatter_add_1", "scatter_add", lambda x, i, s: x.scatter_add(1, i, s),
     [x34, torch.tensor([[3, 3], [0, 1], [1, 1]]), randn(3, 2)], scalars=(1,), tol=1e-6)
case("one_hot", "one_hot", lambda i: F.one_hot(i, 5), [torch.tensor([[0, 4], [2, 2]])], scalars=(5,))

# normalization: layer_norm scalars (ndims, eps); batch_norm scalars (momentum, eps)
xl = randn(2, 3, 4) * 3 + 1
case("layer_norm_1", "layer_norm", lambda x: F.layer_norm(x, (4,)), [xl], scalars=(1, 1e-5), tol=1e-5, atol=1e-5)
case("layer_norm_2_affine", "layer_norm", lambda x, w, b: F.layer_norm(x, (3, 4), w, b, 1e-3),
     [xl, randn(3, 4), randn(3, 4)], scalars=(2, 1e-3), tol=1e-5, atol=1e-5)
xb = randn(4, 3, 2, 2) * 2 + 0.5
rm, rv = randn(3), randn(3).abs() + 0.5
wb, bb = randn(3), randn(3)


def bn_train(x, m, v, w, b):
    m, v = m.clone(), v.clone()
    y = F.batch_norm(x, m, v, w, b, training=True, momentum=0.3, eps=1e-5)
    return y, m, v


case("batch_norm_train", "batch_norm_train", bn_train, [xb, rm, rv, wb, bb], scalars=(0.3, 1e-5), tol=1e-5, atol=1e-5)
case("batch_norm_eval", "batch_norm_eval", lambda x, m, v, w, b: F.batch_norm(x, m, v, w, b, False, 0.1, 1e-5),
     [xb, rm, rv, wb, bb], scalars=(0.1, 1e-5), tol=1e-5, atol=1e-5)
case("batch_norm_2d_train", "batch_norm_train", bn_train, [randn(6, 3), rm, rv, wb, bb], scalars=(0.3, 1e-5),
     tol=1e-5, atol=1e-5)

# constant padding: scalars (value, pads...)
xp = randn(2, 3, 4)
case("pad_last", "pad", lambda x: F.pad(x, (1, 2)), [xp], scalars=(0.0, 1, 2))
case("pad_two_dims_value", "pad", lambda x: F.pad(x, (0, 1, 2, 0), value=-1.5), [xp], scalars=(-1.5, 0, 1, 2, 0))
case("pad_crop", "pad", lambda x: F.pad(x, (-1, 1, 0, 0, 1, -1)), [xp], scalars=(0.0, -1, 1, 0, 0, 1, -1))

# windows of more than 9 positions (im2col loops over them at run time, smaller ones unrolled);
# last, so that the cases above keep their random inputs
case("conv_5x5_pad", "conv2d", lambda x, w, b: F.conv2d(x, w, b, 1, 2), [randn(2, 3, 9, 8), randn(4, 3, 5, 5), randn(4)],
     scalars=(1, 1, 2, 2, 1, 1, 1), tol=1e-5, atol=1e-5)
case("max_pool_4x3", "max_pool2d", lambda x: F.max_pool2d(x, (4, 3), (2, 1), (1, 1)), [randn(2, 2, 9, 7)],
     scalars=(4, 3, 2, 1, 1, 1))

fixtures.write(os.path.join(os.path.dirname(os.path.abspath(__file__)), "nn_fixtures.txt"), "gen_nn_fixtures.py")
