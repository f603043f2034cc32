"""The command line of ``python -m rrlib bench`` (rrlib.speed.bench runs it): its own module, importing nothing
that loads torch, so that ``--help`` and a usage mistake answer at once."""
from __future__ import annotations

from ..home import PROJECT_ROOT, REFERENCE_CSV
from ..parsing import OneLineParser, add_rules_option, path_text

DESCRIPTION = "Speed: throughput, MFU, memory and the overhead of each residual rule against the parameter-matched standard."
GPT2_DIR = PROJECT_ROOT.parent / "shared" / "data" / "gpt2"
PAPER_CSV = REFERENCE_CSV  # rrlib.speed.pricing's default


def parse_args(argv):
    p = OneLineParser(prog="python -m rrlib bench", description=DESCRIPTION)
    p.add_argument("--size", action="append", default=[], help="a preset; repeat for several")
    add_rules_option(p)
    p.add_argument("--variants", default="review,highway,standard", help="comma-separated residual rules")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:<index>")
    p.add_argument("--precision", default="auto", help="auto (bf16 on CUDA, fp32 on CPU), fp32, tf32, bf16")
    p.add_argument("--compile", action="store_true", help="torch.compile each residual step, as a run does")
    p.add_argument("--compile-ratio", action="store_true",
                   help="measure every variant eager and compiled in the same rounds; report compiled/eager")
    p.add_argument("--recompute", action="store_true",
                   help="also measure each cross-depth rule with recompute=True (its depth mixing checkpointed)")
    p.add_argument("--compile-backend", default="inductor",
                   help="torch.compile backend; 'eager' traces without code generation (a fast dry run)")
    p.add_argument("--plain", action="store_true",
                   help="also measure each variant with the plain head (unpadded matmul, full fp32 logits)")
    p.add_argument("--steps", type=int, default=10, help="timed steps per variant and round")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first (compilation happens here)")
    p.add_argument("--repeats", type=int, default=1, help="interleaved rounds of timed steps over the variants")
    p.add_argument("--batch-size", type=int, default=None, help="sequences per step; default: the preset's")
    p.add_argument("--threads", type=int, default=None,
                   help="CPU threads (torch.set_num_threads); 1 is steadier on a machine shared with other jobs")
    p.add_argument("--measure-peak", action="store_true", help="time a matmul for the peak FLOP/s (CUDA)")
    p.add_argument("--paper-csv", default=str(PAPER_CSV), help="the paper's runs, for the sweep's device-hours (default: the committed copy); '' prices nothing "
                        "(scripts/gpu_bench.sh prices once from all its files, rrlib.speed.pricing)")
    p.add_argument("--tokenize", metavar="PATH", type=path_text, help="also time tokenising this text file and reloading it")
    p.add_argument("--gpt2-dir", default=str(GPT2_DIR), help="folder with GPT-2's encoder.json and vocab.bpe")
    p.add_argument("--out", default=None, type=path_text, help="result JSON; default outputs/bench/<device>-<sizes>.json")
    args = p.parse_args(argv)
    from ..runs.config import ConfigError  # after parsing: --help loads no torch

    for name in ("steps", "repeats", "threads"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise ConfigError(f"--{name} must be a positive whole number, got {value}")
    if args.warmup < 0:
        raise ConfigError(f"--warmup must be zero or more, got {args.warmup}")
    if not args.size and not args.tokenize:
        raise ConfigError("nothing to measure: pass --size (one or more) and/or --tokenize PATH")
    return args
