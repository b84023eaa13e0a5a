#!/usr/bin/env bash
# Installs what lazyjit needs to build, test and run its main job from Debian 12's archive:
# the toolchain, LLVM 19, Check, zlib, elfutils' libdw (call sites for LJ_IR_DEBUG), gdb (the
# LJ_HLO_DEBUG test) and Fashion-MNIST (the training test and the demo use it). LJ_WITH_TORCH=1
# adds PyTorch with OpenBLAS, for regenerating the test fixtures and for the PyTorch
# comparisons in bench/peers, and oneDNN, whose SGEMM bench/peers times as the reference.
# Idempotent: installs only the packages that are missing. Needs root (or sudo).
set -euo pipefail

pkgs=(build-essential cmake pkg-config llvm-19-dev check zlib1g-dev libffi-dev libdw-dev gdb dataset-fashion-mnist)
if [ "${LJ_WITH_TORCH:-0}" = 1 ]; then
  pkgs+=(python3-torch python3-numpy libopenblas0-pthread libdnnl-dev)
fi

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root to install: ${missing[*]}" >&2; exit 1; }
  sudo=sudo
fi
echo "install-deps: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
