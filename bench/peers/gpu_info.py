"""The GPU the benchmarks run on and its measured fp32 matrix-product rate, as one line of JSON.

Prints {"gpu", "driver", "cuda", "torch", "fp32_tflops", "mps"}: the first visible CUDA device's name, the driver
(from nvidia-smi), the CUDA version torch was built with, torch's version, the TFLOP/s of 8192 x 8192 float32 matrix
products (TF32 off, as dltune and the peer train), timed over 20 products after 3 warm-up ones, and whether NVIDIA's
Multi-Process Service runs (without it, processes sharing a GPU take turns on it: their kernels never overlap). Exits
1 without a CUDA device. Used by `dltune_bench_runner --device cuda`.
"""
import json
import pathlib
import subprocess
import sys
import time

import torch


def driver_version():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, check=True, timeout=30).stdout
        return out.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return "-"


def mps_running():
    """Whether an MPS control daemon or server runs on this machine (/proc/PID/comm keeps 15 characters of a name:
    nvidia-cuda-mps-control and -server are both nvidia-cuda-mps there)."""
    for comm in pathlib.Path("/proc").glob("[0-9]*/comm"):
        try:
            if comm.read_text().strip().startswith("nvidia-cuda-mps"):
                return True
        except OSError:
            pass
    return False


def main():
    if not torch.cuda.is_available():
        print(json.dumps({"error": "no CUDA device is visible to torch"}))
        return 1
    torch.backends.cuda.matmul.allow_tf32 = False
    n, reps = 8192, 20
    a = torch.randn(n, n, device="cuda")
    b = torch.randn(n, n, device="cuda")
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(reps):
        a @ b
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    print(json.dumps({"gpu": torch.cuda.get_device_name(0), "driver": driver_version(), "cuda": torch.version.cuda,
                      "torch": torch.__version__, "fp32_tflops": 2 * n ** 3 * reps / seconds / 1e12,
                      "mps": mps_running()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
