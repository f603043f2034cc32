"""The peak FLOP/s that MFU divides by, always named: a CUDA device's dense bf16/tf32 peak from its vendor's data
sheet, or one measured on the spot; and MFU itself."""
from __future__ import annotations

import torch

from ..runs.provenance import device_name


# Dense (no structured sparsity) tensor-core peaks in TFLOP/s, from NVIDIA's data sheets, whose headline
# numbers are with sparsity (2x these). Matched in order against the lower-cased CUDA device name: the first
# substring found wins, so the more specific names come first ("gh200" contains "h200", "h100 pcie" "h100").
PEAK_TFLOPS = [
    # substring,  label,              bf16,   tf32
    ("gh200", "GH200", 989.5, 494.5),
    ("h200 nvl", "H200 NVL", 835.5, 417.5),
    ("h200", "H200 SXM", 989.5, 494.5),
    ("h100 nvl", "H100 NVL", 835.5, 417.5),
    ("h100 pcie", "H100 PCIe", 756.5, 378.0),
    ("h100", "H100 SXM", 989.5, 494.5),
    ("a100", "A100", 312.0, 156.0),
    ("b200", "B200", 2250.0, 1100.0),
    ("l40s", "L40S", 362.0, 183.0),
]


def table_peak(device_name: str, precision: str) -> tuple[float, str] | None:
    """(FLOP/s, where it comes from) for a CUDA device name and precision, or None if the table lacks it."""
    for substring, label, bf16, tf32 in PEAK_TFLOPS:
        if substring in device_name.lower():
            tflops = {"bf16": bf16, "tf32": tf32}.get(precision)
            return None if tflops is None else (tflops * 1e12, f"{label} {precision} dense, vendor data sheet")
    return None


def measure_peak(device: torch.device, precision: str, n: int = 8192, iters: int = 20) -> tuple[float, str]:
    """The FLOP/s of an n×n×n matmul in the run's precision, timed with CUDA events after a warmup."""
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32  # tf32 is the flag autocast_factory set
    a, b = (torch.randn(n, n, device=device, dtype=dtype) for _ in range(2))
    for _ in range(3):
        a @ b
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        a @ b
    end.record()
    torch.cuda.synchronize()
    flops = 2 * n ** 3 * iters / (start.elapsed_time(end) / 1e3)
    return flops, f"measured: {n}x{n} {precision} matmul"


def resolve_peak(device: torch.device, precision: str, measure: bool) -> tuple[float | None, str]:
    """The peak FLOP/s that MFU divides by, and a sentence saying where it came from (printed, stored)."""
    if device.type != "cuda":
        return None, f"none: MFU is reported on CUDA only (this is {device.type})"
    if measure:
        return measure_peak(device, precision)
    found = table_peak(device_name(device), precision)
    if found is None:
        return None, f"none: no {precision} peak for {device_name(device)!r} in the table; pass --measure-peak"
    return found


def mfu(flops_per_token: float, tokens_per_s: float, peak_flops: float | None) -> float | None:
    """Model FLOPs utilisation: the model's training FLOPs per second over the device's peak."""
    return None if peak_flops is None else flops_per_token * tokens_per_s / peak_flops
