"""The environment PyTorch runs fairly in on this machine, for the peer scripts; call
reexec_fairly() before importing torch.

- ATEN_CPU_CAPABILITY=avx512 where the CPU has AVX-512F, else avx2;
- OMP_WAIT_POLICY=PASSIVE, OPENBLAS_NUM_THREADS=the script's --threads (default: the CPUs);
- OPENBLAS_CORETYPE unset (a preset Haswell core type halves OpenBLAS matmuls on AVX-512
  machines), except where OpenBLAS does not know the CPU and would fall back to its generic
  x86-64 kernels (~30 GFLOP/s instead of ~135 on one core of a 5th-generation Xeon with
  Debian 12's OpenBLAS 0.3.21): there the AVX-512 core that matches the CPU's features
  (Cooperlake with AVX512-BF16, SkylakeX without).

Debian's PyTorch calls whatever libblas.so.3 points to: install libopenblas0-pthread, or its
matmuls run the reference BLAS at a few GFLOP/s (`LJ_WITH_TORCH=1 tools/install-deps.sh`
installs both)."""
import os
import subprocess
import sys

AVX512_CORES = ("skylakex", "cooperlake", "sapphirerapids")  # OpenBLAS's cores with AVX-512 kernels


def cpu_flags():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


PROBE = """import ctypes
blas = ctypes.CDLL("libblas.so.3")
blas.openblas_get_corename.restype = ctypes.c_char_p
print(blas.openblas_get_corename().decode().lower())"""


def openblas_core(env):
    """The core OpenBLAS picks for this CPU by itself, lower case; "" without OpenBLAS. Asked in
    a child process: OpenBLAS reads its core type once, when it loads."""
    r = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else ""


def fair_env(threads):
    """The environment PyTorch should run in with `threads` threads (a dict)."""
    flags = cpu_flags()
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
    env.update({"ATEN_CPU_CAPABILITY": "avx512" if "avx512f" in flags else "avx2",
                "OMP_WAIT_POLICY": "PASSIVE", "OPENBLAS_NUM_THREADS": str(threads)})
    if "avx512f" in flags:
        core = openblas_core(env)
        if core and not core.startswith(AVX512_CORES):
            env["OPENBLAS_CORETYPE"] = "Cooperlake" if "avx512_bf16" in flags else "SkylakeX"
    return env


def threads_arg():
    """--threads N from the command line, as a string; the online CPUs without it."""
    for i, a in enumerate(sys.argv[:-1]):
        if a == "--threads" and sys.argv[i + 1] != "0":
            return sys.argv[i + 1]
    return str(os.cpu_count())


def reexec_fairly():
    """Re-executes this script in fair_env(--threads) unless it already runs in it."""
    want = fair_env(threads_arg())
    if os.environ == want:
        return
    os.execve(sys.executable, [sys.executable] + sys.argv, want)
