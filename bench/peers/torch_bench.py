#!/usr/bin/python3
"""lj-bench's workloads in PyTorch eager, side by side with lazyjit's in one run.

Runs lj-bench (--lj, default build/bench/lj-bench) with --json, then the workloads of the
same names in PyTorch, and prints per workload the wall time of a step in each, the ratio
(PyTorch's time / lazyjit's: above 1 means lazyjit is faster) and both throughputs. The
workloads that are plain products (sgemm_*) also run in oneDNN's dnnl_sgemm, the SGEMM
reference, through lj-peer-onednn (--onednn; built where libdnnl-dev is installed).

PyTorch is tuned as fairly as this machine allows (fair_env.py says how): the script
re-executes itself in that environment before it imports torch. Run with Debian's python3-torch:

  /usr/bin/python3 bench/peers/torch_bench.py [--threads N] [--runs N] [--filter S] [--json F]
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

from fair_env import reexec_fairly

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


reexec_fairly()

import torch  # noqa: E402  (after the environment is set)
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch_models import LSTMClassifier, MNISTNet, ResNet18, conv_layer, mlp  # noqa: E402

M1, M16 = 1 << 20, 1 << 24


def rand(*shape, grad=False):
    return torch.rand(*shape).requires_grad_(grad)


def labels(b, classes=10):
    return torch.randint(0, classes, (b,))


def training_step(model, x, y):
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.5)

    def step():
        opt.zero_grad()
        F.nll_loss(model(x), y).backward()
        opt.step()
    return step


def conv_forward(b, cin, cout, h):
    x, conv = rand(b, cin, h, h), nn.Conv2d(cin, cout, 3, padding=1)
    return lambda: conv_layer(x, conv)


def conv_backward(b, cin, cout, h):
    x, g = rand(b, cin, h, h, grad=cin > 1), rand(b, cout, h // 2, h // 2)
    conv = nn.Conv2d(cin, cout, 3, padding=1)

    def step():
        conv.zero_grad(set_to_none=True)
        x.grad = None
        (conv_layer(x, conv) * g).sum().backward()
    return step


def attention(b, t, d):
    q, k, v = rand(b, t, d), rand(b, t, d), rand(b, t, d)
    return lambda: torch.softmax(q @ k.transpose(1, 2) / d ** 0.5, 2) @ v


def cross_entropy(b, classes, *positions):
    x, y = rand(b, classes, *positions, grad=True), torch.randint(0, classes, (b, *positions))

    def step():
        x.grad = None
        loss = F.cross_entropy(x, y)
        loss.backward()
        return loss
    return step


def layer_norm(rows, cols):
    x, g = rand(rows, cols, grad=True), rand(rows, cols)
    w, b = rand(cols, grad=True), rand(cols, grad=True)

    def step():
        x.grad = w.grad = b.grad = None
        (F.layer_norm(x, (cols,), w, b, 1e-5) * g).sum().backward()
    return step


def layer_norm_fwd(rows, cols):
    x, w, b = rand(rows, cols), rand(cols), rand(cols)
    return lambda: F.layer_norm(x, (cols,), w, b, 1e-5)


def rms_norm(rows, cols):
    x, w = rand(rows, cols), rand(cols)
    return lambda: x * torch.rsqrt(x.pow(2).mean(1, keepdim=True) + 1e-6) * w


def group_norm(b, c, h, groups):
    x, g = rand(b, c, h, h, grad=True), rand(b, c, h, h)
    w, bias = rand(c, grad=True), rand(c, grad=True)

    def step():
        x.grad = w.grad = bias.grad = None
        (F.group_norm(x, groups, w, bias, 1e-5) * g).sum().backward()
    return step


def resblock(b, c, h):
    x, g = rand(b, c, h, h, grad=True), rand(b, c, h, h)
    convs = [nn.Conv2d(c, c, 3, padding=1, bias=False) for _ in range(2)]
    norms = [nn.BatchNorm2d(c, track_running_stats=False) for _ in range(2)]
    params = [p for m in convs + norms for p in m.parameters()]

    def step():
        x.grad = None
        for p in params:
            p.grad = None
        y = torch.relu(norms[0](convs[0](x)))
        y = torch.relu(norms[1](convs[1](y)) + x)
        (y * g).sum().backward()
    return step


def resnext_block(b, c, width, h):
    x, g = rand(b, c, h, h, grad=True), rand(b, c, h, h)
    convs = [nn.Conv2d(c, width, 1, bias=False), nn.Conv2d(width, width, 3, padding=1, groups=width // 4, bias=False),
             nn.Conv2d(width, c, 1, bias=False)]
    norms = [nn.BatchNorm2d(n, track_running_stats=False) for n in (width, width, c)]
    params = [p for m in convs + norms for p in m.parameters()]

    def step():
        x.grad = None
        for p in params:
            p.grad = None
        y = x
        for i in range(3):
            y = norms[i](convs[i](y))
            y = torch.relu(y if i < 2 else y + x)
        (y * g).sum().backward()
    return step


def transformer(b, t, c, h):
    x, g = rand(b, t, c, grad=True), rand(b, t, c)
    norms = [nn.LayerNorm(c) for _ in range(2)]
    qkv, proj, fc, out = nn.Linear(c, 3 * c), nn.Linear(c, c), nn.Linear(c, 4 * c), nn.Linear(4 * c, c)
    params = [p for m in norms + [qkv, proj, fc, out] for p in m.parameters()]
    causal = torch.ones(t, t, dtype=torch.bool).tril()

    def step():
        x.grad = None
        for p in params:
            p.grad = None
        q, k, v = [y.reshape(b, t, h, c // h).permute(0, 2, 1, 3) for y in qkv(norms[0](x)).split(c, 2)]
        scores = (q @ k.transpose(2, 3) / math.sqrt(c // h)).masked_fill(~causal, float("-inf"))
        att = (torch.softmax(scores, 3) @ v).permute(0, 2, 1, 3).reshape(b, t, c)
        y = x + proj(att)
        y = y + out(F.gelu(fc(norms[1](y)), approximate="tanh"))
        (y * g).sum().backward()
    return step


def conv_relu_backward(b, cin, cout, h, x_grad=False, side=3, groups=1):
    x, g = rand(b, cin, h, h, grad=x_grad), rand(b, cout, h, h)
    conv = nn.Conv2d(cin, cout, side, padding=side // 2, groups=groups)

    def step():
        conv.zero_grad(set_to_none=True)
        x.grad = None
        (torch.relu(conv(x)) * g).sum().backward()
    return step


def conv_stride2(b, cin, cout, h):
    x, conv = rand(b, cin, h, h, grad=True), nn.Conv2d(cin, cout, 3, stride=2, padding=1)
    return lambda: conv(x)


def conv_stem(b, cin, cout, h):
    x, conv = rand(b, cin, h, h), nn.Conv2d(cin, cout, 7, stride=2, padding=3)

    def step():
        with torch.no_grad():
            return torch.relu(conv(x))
    return step


def conv_same(b, cin, cout, h, side):
    x, conv = rand(b, cin, h, h), nn.Conv2d(cin, cout, side, padding=side // 2)

    def step():
        with torch.no_grad():
            return conv(x)
    return step


def mbv2_block(b, c, e, h):
    x = rand(b, c, h, h)
    expand, dw, project = nn.Conv2d(c, e, 1), nn.Conv2d(e, e, 3, padding=1, groups=e), nn.Conv2d(e, c, 1)

    def step():
        with torch.no_grad():
            return x + project(F.relu6(dw(F.relu6(expand(x)))))
    return step


def conv_grouped(b, c, groups, h):
    x, w, bias = rand(b, c, h, h), rand(c, c // groups, 3, 3), rand(c)
    return lambda: F.conv2d(x, w, bias, padding=1, groups=groups)


def graph500():
    x = rand(16)

    def step():
        y = x
        for i in range(125):
            y = y * 0.999 if i % 2 else y + (0.5 + i)
        return y
    return step


def binary(f, n, k):
    xs = [rand(n) for _ in range(k)]
    return lambda: f(*xs)


def matmul(m, n, k, ta=False, tb=False):
    """An [m, k] x [k, n] product; an operand stored transposed is read through .t()."""
    a = rand(k, m).t() if ta else rand(m, k)
    b = rand(n, k).t() if tb else rand(k, n)
    return lambda: a @ b


def linear_relu(b, n, k, dtype=torch.float32):
    x, w, bias = rand(b, k).to(dtype), rand(n, k).to(dtype), rand(n).to(dtype)
    return lambda: torch.relu(F.linear(x, w, bias))


def bf16_matmul(m, n, k):
    a, b = rand(m, k).bfloat16(), rand(k, n).bfloat16()
    return lambda: a @ b


def bf16_conv(b, cin, cout, h):
    x = rand(b, cin, h, h).bfloat16()
    w, bias = rand(cout, cin, 3, 3).bfloat16(), rand(cout).bfloat16()
    return lambda: F.conv2d(x, w, bias, padding=1)


WORKLOADS = {
    "relu_chain_1M": lambda: binary(lambda x, w, b: torch.relu(x * w + b) * 0.5, M1, 3),
    "relu_chain_16M": lambda: binary(lambda x, w, b: torch.relu(x * w + b) * 0.5, M16, 3),
    "gelu_tanh_1M": lambda: binary(lambda x: F.gelu(x, approximate="tanh"), M1, 1),
    "gelu_tanh_16M": lambda: binary(lambda x: F.gelu(x, approximate="tanh"), M16, 1),
    "sigmoid_1M": lambda: binary(torch.sigmoid, M1, 1),
    "sigmoid_16M": lambda: binary(torch.sigmoid, M16, 1),
    "softmax_4096x1024": lambda: (lambda x: lambda: torch.softmax(x, 1))(rand(4096, 1024)),
    "log_softmax_4096x1024": lambda: (lambda x: lambda: torch.log_softmax(x, 1))(rand(4096, 1024)),
    "softmax_channels_32x64x56x56": lambda: (lambda x: lambda: torch.softmax(x, 1))(rand(32, 64, 56, 56)),
    "row_sum_4096x1024": lambda: (lambda x: lambda: x.sum(1))(rand(4096, 1024)),
    "softmax_1048576x16": lambda: (lambda x: lambda: torch.softmax(x, 1))(rand(1048576, 16)),
    "softmax_1048576x10": lambda: (lambda x: lambda: torch.softmax(x, 1))(rand(1048576, 10)),
    # out= keeps the result contiguous, as lazyjit's is (without it, x.t() * 2 keeps x's
    # transposed layout and transposes nothing)
    "transpose_4096x1024": lambda: (lambda x, out: lambda: torch.mul(x.t(), 2, out=out))(rand(4096, 1024),
                                                                                        torch.empty(1024, 4096)),
    "sgemm_64": lambda: matmul(64, 64, 64),
    "sgemm_256": lambda: matmul(256, 256, 256),
    "sgemm_512": lambda: matmul(512, 512, 512),
    "sgemm_1024": lambda: matmul(1024, 1024, 1024),
    "sgemm_2048": lambda: matmul(2048, 2048, 2048),
    "pairwise_4096x3": lambda: matmul(4096, 4096, 3, tb=True),
    "sgemm_b32_4096": lambda: matmul(32, 4096, 4096, tb=True),
    "sgemm_mlp_fwd1": lambda: matmul(128, 512, 784, tb=True),
    "sgemm_mlp_fwd2": lambda: matmul(128, 512, 512, tb=True),
    "sgemm_mlp_dx2": lambda: matmul(128, 512, 512),
    "sgemm_mlp_dw1": lambda: matmul(512, 784, 128, ta=True),
    "sgemm_mlp_dw2": lambda: matmul(512, 512, 128, ta=True),
    "mlp_layer1_b128": lambda: linear_relu(128, 512, 784),
    "linear_b1_4096": lambda: linear_relu(1, 4096, 4096),
    "linear_b4_1024": lambda: linear_relu(4, 1024, 1024),
    "gemv_xw_4096": lambda: matmul(1, 4096, 4096),
    "gemv_wx_4096": lambda: matmul(4096, 1, 4096),
    "mlp_layer2_b128": lambda: linear_relu(128, 512, 512),
    "bf16_gemm_1024": lambda: bf16_matmul(1024, 1024, 1024),
    "bf16_linear_b1_4096": lambda: linear_relu(1, 4096, 4096, torch.bfloat16),
    "bf16_conv3x3_b32": lambda: bf16_conv(32, 64, 64, 28),
    "attention_32x256x64": lambda: attention(32, 256, 64),
    "cross_entropy_512x32000": lambda: cross_entropy(512, 32000),
    "cross_entropy_pixels_8x21x128x128": lambda: cross_entropy(8, 21, 128, 128),
    "layer_norm_4096x1024": lambda: layer_norm(4096, 1024),
    "layer_norm_512x1024": lambda: layer_norm(512, 1024),
    "layer_norm_fwd_4096x1024": lambda: layer_norm_fwd(4096, 1024),
    "rms_norm_4096x1024": lambda: rms_norm(4096, 1024),
    "group_norm_32x64x28": lambda: group_norm(32, 64, 28, 8),
    "transformer_b4x256": lambda: transformer(4, 256, 768, 12),
    "lstm_step_b32": lambda: training_step(LSTMClassifier(64, 256), rand(32, 32, 64), labels(32)),
    "conv3x3_s2_b32": lambda: conv_stride2(32, 64, 128, 56),
    "conv7x7_s2_b8": lambda: conv_stem(8, 3, 64, 224),
    "conv_grouped_b32": lambda: conv_grouped(32, 128, 32, 28),
    "conv_grouped_bwd_b32": lambda: conv_relu_backward(32, 128, 128, 28, x_grad=True, groups=32),
    "conv_dw3x3_b32": lambda: conv_grouped(32, 128, 128, 56),
    "conv5x5_b32": lambda: conv_same(32, 32, 64, 28, 5),
    "conv1x1_7x7_b32": lambda: conv_same(32, 512, 2048, 7, 1),
    "mbv2_block_b32": lambda: mbv2_block(32, 160, 960, 7),
    "conv5x5_bwd_b32": lambda: conv_relu_backward(32, 32, 64, 28, x_grad=True, side=5),
    "conv_dw3x3_bwd_b32": lambda: conv_relu_backward(32, 128, 128, 56, x_grad=True, groups=128),
    "resblock_b32": lambda: resblock(32, 64, 56),
    "resnext_block_b16": lambda: resnext_block(16, 256, 128, 28),
    "conv1_fwd_b64": lambda: conv_forward(64, 1, 32, 28),
    "conv1_bwd_b64": lambda: conv_backward(64, 1, 32, 28),
    "conv_c3_bwd_b64": lambda: conv_relu_backward(64, 3, 64, 32),
    "conv_c512_bwd_b32": lambda: conv_relu_backward(32, 512, 512, 7, x_grad=True),
    "conv2_fwd_b64": lambda: conv_forward(64, 32, 64, 14),
    "conv2_bwd_b64": lambda: conv_backward(64, 32, 64, 14),
    "mlp_step_b64": lambda: training_step(mlp(), rand(64, 784), labels(64)),
    "mlp_step_b128": lambda: training_step(mlp(), rand(128, 784), labels(128)),
    "cnn_step_b64": lambda: training_step(MNISTNet(), rand(64, 1, 28, 28), labels(64)),
    "cnn_step_b128": lambda: training_step(MNISTNet(), rand(128, 1, 28, 28), labels(128)),
    "resnet18_step_b8": lambda: training_step(ResNet18(), rand(8, 3, 224, 224), labels(8, 1000)),
    "graph500": graph500,
}


WARMUP_S = 0.2  # as lj-bench: untimed steps after the first, at least two


def time_torch(make, runs):
    """Median and minimum wall time of a step in ms, after WARMUP_S of warm-up steps."""
    step = make()
    step()
    t0, n = time.perf_counter(), 0
    while n < 2 or time.perf_counter() - t0 < WARMUP_S:
        step()
        n += 1
    t = []
    for _ in range(runs):
        t0 = time.perf_counter()
        step()
        t.append(time.perf_counter() - t0)
    t.sort()
    return 1e3 * t[len(t) // 2], 1e3 * t[0]


def first_step_child(name):
    """A fresh process's side of time_first_step: one step, then the moment it ended."""
    WORKLOADS[name]()()
    print(f"{time.monotonic():.9f}", flush=True)
    os._exit(0)


def time_first_step(name, threads):
    """Median of three: ms from spawning a Python process to the end of its first step of name
    (interpreter start, import torch, model, step) -- what lj-bench's first-step table measures."""
    t = []
    for _ in range(3):
        t0 = time.monotonic()
        out = subprocess.run([sys.executable, os.path.abspath(__file__), "--first-step-child", name,
                              "--threads", str(threads)], check=True, capture_output=True, text=True).stdout
        t.append(float(out.split()[-1]) - t0)
    t.sort()
    return 1e3 * t[1]


def time_onednn(peer, gemm, threads, runs):
    """Median and minimum ms of lj-peer-onednn's dnnl_sgemm on lj-bench's product gemm. Its
    OpenMP threads wait as they do by default (spinning a while): PyTorch's passive waiting
    would cost oneDNN a thread wake-up per call (0.05 ms on these machines)."""
    args = [str(gemm[x]) for x in ("m", "n", "k", "ta", "tb")]
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    out = subprocess.run([peer, "--threads", str(threads), "--runs", str(runs)] + args,
                         check=True, capture_output=True, text=True, env=env).stdout
    med, best = (float(x) for x in out.split())
    return med, best


def markdown(doc):
    """The side-by-side table of a --json result, in Markdown (docs/benchmarks.md)."""
    rows = ["| workload | compile ms | kernels | trace µs | sync µs | lazyjit ms | op by op ms | rate | "
            "PyTorch ms | PyTorch / lazyjit |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in doc["results"]:
        o = r["lazyjit"]
        rate = f"{o['rate']:.1f} {o['unit']}" if o["unit"] else ""
        rows.append(f"| {r['name']} | {o['compile_ms']:.1f} | {o['kernels']} | {o['trace_us']:.1f} | "
                    f"{o['sync_us']:.1f} | {o['step_ms']:.3f} | {o['opbyop_ms']:.3f} | {rate} | "
                    f"{r['torch_ms']:.3f} | {r['ratio']:.2f}× |")
    dnnl = [r for r in doc["results"] if r.get("onednn_ms")]
    if dnnl:
        rows += ["", "| product | M×N×K | lazyjit ms | oneDNN ms | oneDNN / lazyjit | lazyjit rate | oneDNN rate |",
                 "|---|---|---:|---:|---:|---:|---:|"]
        for r in dnnl:
            o, g = r["lazyjit"], r["lazyjit"]["gemm"]
            shape = f"{g['m']}×{g['n']}×{g['k']}" + (" Aᵀ" if g["ta"] else "") + (" Bᵀ" if g["tb"] else "")
            flop = o["rate"] * o["run_min_ms"]
            rows.append(f"| {r['name']} | {shape} | {o['step_ms']:.3f} | {r['onednn_ms']:.3f} | "
                        f"{r['onednn_ms'] / o['step_ms']:.2f}× | {o['rate']:.1f} | {flop / r['onednn_min_ms']:.1f} |")
    first = [r for r in doc["results"] if r.get("torch_first_step_ms")]
    if first:
        rows += ["", "| time to the first step of a fresh process | lazyjit cold ms | lazyjit warm ms | PyTorch ms "
                 "| lazyjit cold compile ms | lazyjit cold, routines compiled: ms / compile ms |",
                 "|---|---:|---:|---:|---:|---:|"]
        for r in first:
            o = r["lazyjit"]
            rows.append(f"| {r['name']} | {o['first_step_cold_ms']:.1f} | {o['first_step_warm_ms']:.1f} | "
                        f"{r['torch_first_step_ms']:.1f} | {o['first_step_compile_ms']:.1f} | "
                        f"{o['first_step_routines_ms']:.1f} / {o['first_step_routines_compile_ms']:.1f} |")
    return "\n".join(rows) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--filter", default="")
    ap.add_argument("--lj", default=os.path.join(ROOT, "build", "bench", "lj-bench"), help="the lj-bench program")
    ap.add_argument("--onednn", default=os.path.join(ROOT, "build", "bench", "lj-peer-onednn"),
                    help="the oneDNN SGEMM peer (skipped where it was not built)")
    ap.add_argument("--no-opbyop", action="store_true", help="passed to lj-bench")
    ap.add_argument("--no-first-step", action="store_true", help="passed to lj-bench")
    ap.add_argument("--json", help="write both sides' results here")
    ap.add_argument("--markdown", help="write the side-by-side table here, in Markdown")
    ap.add_argument("--table-from", metavar="JSON", help="print the Markdown table of an earlier --json and exit")
    ap.add_argument("--first-step-child", metavar="NAME", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.first_step_child:
        first_step_child(a.first_step_child)
    if a.table_from:
        print(markdown(json.load(open(a.table_from))), end="")
        return
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        cmd = [a.lj, "--threads", str(a.threads), "--runs", str(a.runs), "--json", f.name]
        cmd += ["--filter", a.filter] if a.filter else []
        cmd += ["--no-opbyop"] if a.no_opbyop else []
        cmd += ["--no-first-step"] if a.no_first_step else []
        subprocess.run(cmd, check=True)
        ours = json.load(open(f.name))["results"]
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    print(f"\nPyTorch {torch.__version__}, {torch.get_num_threads()} thread(s), "
          f"ATEN_CPU_CAPABILITY={os.environ['ATEN_CPU_CAPABILITY']}, {a.runs} steps after {WARMUP_S} s of warm-up")
    head = f"{'workload':24} {'lazyjit ms':>11} {'PyTorch ms':>11} {'ratio':>7} {'lazyjit rate':>15} {'PyTorch rate':>15}"
    print(head)
    both = []
    for r in ours:
        if r["name"] not in WORKLOADS:
            continue
        med, best = time_torch(WORKLOADS[r["name"]], a.runs)
        # lazyjit's rate is at its fastest kernels' time; PyTorch's at its fastest step
        scale = r["rate"] * r["run_min_ms"]
        their_rate = f"{scale / best:.1f} {r['unit']}" if r["unit"] else ""
        ours_rate = f"{r['rate']:.1f} {r['unit']}" if r["unit"] else ""
        print(f"{r['name']:24} {r['step_ms']:11.3f} {med:11.3f} {med / r['step_ms']:6.2f}x {ours_rate:>15} "
              f"{their_rate:>15}", flush=True)
        both.append({"name": r["name"], "lazyjit": r, "torch_ms": med, "torch_min_ms": best,
                     "ratio": med / r["step_ms"]})
    gemms = [b for b in both if b["lazyjit"].get("gemm")]
    if gemms and os.access(a.onednn, os.X_OK):
        print(f"\noneDNN dnnl_sgemm, {a.threads} thread(s), {a.runs} calls after {WARMUP_S} s of warm-up "
              f"(rates at the fastest call)\n{'workload':24} {'lazyjit ms':>11} {'oneDNN ms':>11} {'ratio':>7} "
              f"{'lazyjit rate':>15} {'oneDNN rate':>15}")
        for b in gemms:
            o = b["lazyjit"]
            b["onednn_ms"], b["onednn_min_ms"] = time_onednn(a.onednn, o["gemm"], a.threads, a.runs)
            print(f"{b['name']:24} {o['step_ms']:11.3f} {b['onednn_ms']:11.3f} {b['onednn_ms'] / o['step_ms']:6.2f}x "
                  f"{o['rate']:10.1f} {o['unit']} {o['rate'] * o['run_min_ms'] / b['onednn_min_ms']:10.1f} {o['unit']}",
                  flush=True)
    elif gemms:
        print(f"\n(no {a.onednn}: oneDNN is not installed; LJ_WITH_TORCH=1 tools/install-deps.sh adds it)")
    first = [b for b in both if b["lazyjit"].get("first_step_cold_ms")]
    if first:
        print(f"\ntime to the first step of a fresh process\n{'workload':24} {'lazyjit cold':>13} "
              f"{'lazyjit warm':>13} {'PyTorch':>9}")
    for b in first:
        b["torch_first_step_ms"] = time_first_step(b["name"], a.threads)
        o = b["lazyjit"]
        print(f"{b['name']:24} {o['first_step_cold_ms']:10.1f} ms {o['first_step_warm_ms']:10.1f} ms "
              f"{b['torch_first_step_ms']:6.1f} ms", flush=True)
    doc = {"threads": a.threads, "runs": a.runs, "torch": torch.__version__, "results": both}
    if a.json:
        with open(a.json, "w") as f:
            json.dump(doc, f, indent=1)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(markdown(doc))


if __name__ == "__main__":
    main()
