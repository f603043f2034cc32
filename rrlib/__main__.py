"""Train, sweep, compare, benchmark, run a study and report: rrlib train|sweep|compare|bench|study|report ... (also
python -m rrlib ...; each command has its own --help).

Every error a user can cause (unknown size or variant, bad numbers, missing data) ends in one sentence and
exit status 2; nothing already written is touched. A relative path typed here (--out, --data-path, --val-path,
--size FILE.yaml, --set data.cache_dir=...) is read against the current folder; paths in presets are the
project's (rrlib.runs.config, rrlib.home).

``--help`` at every level and a usage mistake answer without loading torch or pandas: the parsers are built from
torch-free modules (rrlib.home, the report's and the benchmark's ``arguments``) and from the valid choices spelled
below, which tests/test_cli_help.py checks against the library's own lists.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

from .home import PARAMS_DIR, given_path
from .parsing import MOST_SEEDS, OneLineParser, add_rules_option, path_text, yaml_value

# The valid choices --help names, as the library defines them (rrlib.rules.RULES, rrlib.runs.config.PRECISIONS,
# rrlib.runs.data.TOKENIZERS and HELDOUT), spelled here so that --help loads no torch.
RULE_NAMES = ("standard", "review", "review_state_only", "review_update_only", "review_convex", "highway",
              "highway_convex", "rezero", "layerscale", "scaled", "scaled_loops", "attnres_block", "attnres",
              "delta_attnres", "delta_attnres_block", "mgr", "hc", "mhc", "denseformer", "dynamic_dense", "laurel_rw",
              "laurel_lr", "value_residual")
PRECISIONS = ("auto", "fp32", "tf32", "bf16")
TOKENIZERS = ("gpt2", "bytes")
HELDOUT = ("tail", "validation")

# flag → (section, field): the overrides every training command accepts
OVERRIDE_FLAGS = {
    "steps": ("train", "steps", int), "batch_size": ("train", "batch_size", int),
    "micro_batch_size": ("train", "micro_batch_size", int), "lr": ("train", "lr", float),
    "device": ("train", "device", str), "precision": ("train", "precision", str),
    "eval_every": ("train", "eval_every", int), "ckpt_every": ("train", "ckpt_every", int),
    "data_path": ("data", "data_path", path_text), "val_path": ("data", "val_path", path_text),
    "heldout": ("data", "heldout", str), "tokenizer": ("data", "tokenizer", str),
    "max_stories": ("data", "max_stories", int),
}


def override_help() -> dict[str, str]:
    """One line per override flag, naming the valid choices where there is a fixed set."""
    return {
        "steps": "training steps (default: the preset's)",
        "batch_size": "sequences per optimiser step (default: the preset's)",
        "micro_batch_size": "sequences per forward pass; the step accumulates batch-size / micro-batch-size of them",
        "lr": "peak learning rate (default: the preset's)",
        "device": "auto, cpu, cuda or cuda:<index> (default: the preset's, usually auto)",
        "precision": f"{', '.join(PRECISIONS)} (auto: bf16 on CUDA, fp32 on CPU)",
        "eval_every": "steps between held-out evaluations",
        "ckpt_every": "steps between checkpoints (a killed run resumes from the last one)",
        "data_path": "a local training text (.txt with <|endoftext|> lines, .jsonl, .parquet) instead of the preset's",
        "val_path": "a local validation file, used with --heldout validation",
        "heldout": f"{' or '.join(HELDOUT)}: the paper's last 3 %% of the train stream, or the validation file",
        "tokenizer": f"{' or '.join(TOKENIZERS)}",
        "max_stories": "read at most this many stories of the training text",
    }


def add_overrides(p: argparse.ArgumentParser, out_flag: str | None = "--out") -> None:
    helps = override_help()
    for flag, (_, _, kind) in OVERRIDE_FLAGS.items():
        p.add_argument("--" + flag.replace("_", "-"), dest=flag, type=kind, default=None, help=helps.get(flag))
    p.add_argument("--compile", action="store_true", default=None, help="torch.compile the model")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="any other setting, e.g. --set model.n_loops=4 --set train.warmup_steps=100")
    if out_flag:
        p.add_argument(out_flag, dest="out", default=None, type=path_text,
                       help="root of the run folders, relative to the current folder (default: the project's "
                            "outputs/runs)")
    p.add_argument("--move-aside", action="store_true",
                   help="a run folder that holds another run (other settings) or an unreadable file is renamed "
                        "to moved-seed<k>-<fingerprint> beside it and the run starts afresh; nothing is deleted")
    p.add_argument("--allow-slow", action="store_true",
                   help="start even when the estimate says the run is far beyond this CPU's reach")


# Settings that are paths: typed on the command line, a relative one is read against the current folder
PATH_SETTINGS = {("data", "data_path"), ("data", "val_path"), ("data", "cache_dir"), ("data", "gpt2_dir")}


def overrides_from(args) -> dict:
    from .runs.config import ConfigError, given_path

    out: dict = {}
    flagged = {}  # (section, field) → the flag that set it: a --set of the same setting would disagree silently
    for flag, (section, field, _) in OVERRIDE_FLAGS.items():
        if getattr(args, flag) is not None:
            out.setdefault(section, {})[field] = getattr(args, flag)
            flagged[section, field] = flag
    if args.compile:
        out.setdefault("train", {})["compile"] = True
        flagged["train", "compile"] = "compile"
    for item in args.set:
        key, sep, value = item.partition("=")
        section, dot, field = key.partition(".")
        if not sep or not dot:
            raise ConfigError(f"bad --set {item!r}; write SECTION.KEY=VALUE with SECTION one of model, data, train")
        try:
            parsed = yaml_value(value)
        except yaml.YAMLError:
            raise ConfigError(f"bad --set value in {item!r}; write a number, true/false, null, a word or a "
                              f"[list]") from None
        if (section, field) in flagged:
            flag = "--" + flagged[section, field].replace("_", "-")
            raise ConfigError(f"--set {key} and {flag} both set {key}; give it once, with {flag}")
        if field in out.get(section, {}):  # the second would win silently
            raise ConfigError(f"--set {key} is given twice; give it once")
        out.setdefault(section, {})[field] = parsed
    for section, field in PATH_SETTINGS:
        value = out.get(section, {}).get(field)
        if isinstance(value, str) and value:
            out[section][field] = given_path(value)
    return out


def csv_list(kind):
    return lambda text: [kind(x) for x in text.split(",") if x]


def seed_number(text: str) -> int:
    """A seed as the command line takes it: the run folder is seed<k>, and batches are drawn from k."""
    from .runs.config import ConfigError
    from .runs.validate import check_seed

    try:
        return check_seed(int(text))
    except (ValueError, ConfigError):
        raise argparse.ArgumentTypeError(f"a seed must be a whole number from 0 to 2**64 - 1, got {text!r}") from None


def seed_count(text: str) -> list[int]:
    """compare's --seeds: a count (5 means seeds 0-4) or a comma-separated list of seeds."""
    if "," not in text:
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"--seeds takes a count or a comma-separated list of seeds, got "
                                             f"{text!r}") from None
        if not 1 <= n <= MOST_SEEDS:
            raise argparse.ArgumentTypeError(f"--seeds takes a count from 1 to {MOST_SEEDS:,}, got {n:,}")
        return list(range(n))
    return csv_list(seed_number)(text)


def size_names(params_dir: Path | None = None) -> list[str]:
    """rrlib.runs.presets.available_sizes() read without loading torch: one name per preset file, or
    ``<name><value>`` per value of its ``expand:``; a file that does not parse or cannot be read (a folder named
    *.yaml) is left out, as there, and so is an ``expand:`` that is not a list of values (the library names that
    file's fault when its size is asked for): --help never fails on one preset."""
    names = []
    for path in sorted((PARAMS_DIR if params_dir is None else params_dir).glob("*.yaml")):
        try:
            raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (yaml.YAMLError, UnicodeDecodeError, OSError):
            continue
        expand = raw.get("expand") if isinstance(raw, dict) else None
        values = next(iter(expand.values()), None) if isinstance(expand, dict) else None
        if expand and not (isinstance(values, list) and len(expand) == 1):
            continue
        names += [f"{path.stem}{v}" for v in values] if expand else [path.stem]
    return names


def preset(text: str) -> str:
    """--size: a preset's name, or a preset file typed relative to the current folder (in the library's form)."""
    return given_path(text) if text.endswith((".yaml", ".yml")) else text


def choices() -> tuple[str, str]:
    """The valid sizes and variants, as --help lists them (with the rules --rules loaded, when it loaded any)."""
    loaded = sys.modules.get("rrlib.rules")
    extra = [name for name in (loaded.RULES if loaded else ()) if name not in RULE_NAMES]
    return ", ".join(size_names()), ", ".join([*RULE_NAMES, *extra])


def prog() -> str:
    """How the command was typed: the console script ``rrlib``, or ``python -m rrlib``."""
    return "rrlib" if Path(sys.argv[0]).name == "rrlib" else "python -m rrlib"


USER_ERRORS = {("rrlib.rules.protocol", "ConfigError"), ("rrlib.runs.data", "DataError"),
               ("rrlib.claims.records", "RecordError")}


def reported(command) -> int:
    """``command()``'s exit status; an error the user caused is one line on stderr and status 2. These error classes
    are ValueErrors, told apart by name rather than imported: importing them loads ``rrlib.rules``, which loads the
    rules ``$RRLIB_RULES`` names, and an error there would be raised again inside this handler."""
    try:
        return command()
    except ValueError as err:
        if not any((cls.__module__, cls.__name__) in USER_ERRORS for cls in type(err).__mro__):
            raise
        print(f"error: {err}", file=sys.stderr)
        return 2


# Subcommands that own their arguments: rrlib <name> ... → <parser module>.parse_args(argv) answers --help and
# usage mistakes without torch, then <module>.main(argv) runs the command.
DELEGATED = {"bench": ("rrlib.speed.arguments", "rrlib.speed.bench"),
             "report": ("rrlib.report.arguments", "rrlib.report.build"),
             "study": ("rrlib.studies.command", "rrlib.studies.command")}


def rules_given(argv: list[str]) -> list[str]:
    """The --rules values in ``argv`` (``--rules X`` or ``--rules=X``), read before the parsers run."""
    found = []
    for k, word in enumerate(argv):
        if word == "--rules":
            if k + 1 >= len(argv) or argv[k + 1].startswith("--"):
                from .runs.config import ConfigError

                raise ConfigError("--rules needs a value: a rule file (my_rules.py) or a module name (mypkg.rules)")
            found.append(argv[k + 1])
        elif word.startswith("--rules="):
            found.append(word.partition("=")[2])
    return found


def load_given_rules(argv: list[str]) -> int:
    """Load the rules --rules names (before any parser, so --help lists them), and pass them on to child processes
    (notebook kernels, torchrun workers) through $RRLIB_RULES; 0."""
    specs = rules_given(argv)
    if specs:
        from .rules.external import export, load_rules

        for spec in specs:
            load_rules(spec)
        export(specs)
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The parser of train, sweep and compare (bench and report have their own: DELEGATED)."""
    parser = OneLineParser(prog=prog(), description=" ".join(__doc__.split("\n\n")[0].split()))
    sub = parser.add_subparsers(dest="command", required=True)
    for name, text in (("bench", "throughput, MFU and memory per variant"),
                       ("report", "execute the notebooks and render the report into paper/"),
                       ("study", "list, plan, run and follow the report's studies (rrlib study list)")):
        sub.add_parser(name, help=text, add_help=False)

    sizes, variants = choices()
    p = sub.add_parser("train", help="train one run (size × variant × seed)",
                       description="Train one run into <out>/<size>/<variant>/seed<k>/ (resumes a stopped one).")
    p.add_argument("--size", required=True, type=preset, help=f"a preset in params/ ({sizes}) or a .yaml preset file")
    p.add_argument("--variant", required=True, help=f"a residual rule: {variants}")
    p.add_argument("--seed", type=seed_number, default=0, help="fixes init, batch order and eval windows (default: 0)")
    add_overrides(p)
    add_rules_option(p)

    p = sub.add_parser("sweep", help="train a size's grid of variants × seeds, skipping what is done",
                       description="Train every (variant, seed) of a size that has no result yet.")
    p.add_argument("--size", required=True, type=preset, help=f"a preset in params/ ({sizes}) or a .yaml preset file")
    p.add_argument("--variants", type=csv_list(str), default=None,
                   help=f"comma-separated rules (default: the preset's): {variants}")
    p.add_argument("--seeds", type=csv_list(seed_number), default=None,
                   help="comma-separated seeds, e.g. 0,1,2 (default: the preset's)")
    p.add_argument("--shard", default="0/1",
                   help="k/n: this machine's share, every n-th cell from the k-th (0 <= k < n; default: all)")
    add_overrides(p)
    add_rules_option(p)

    p = sub.add_parser("compare", help="is a rule better than its baselines at a size? trains what is missing, "
                                       "then writes the verdict",
                       description="Train what a paired comparison needs (reusing finished runs), test each variant "
                                   "against each baseline on fixed_loss, and write verdict.csv, verdict.json and "
                                   "verdict.html into --out (docs/compare.md).")
    p.add_argument("--size", required=True, type=preset, help=f"a preset in params/ ({sizes}) or a .yaml preset file")
    p.add_argument("--variants", type=csv_list(str), required=True, help=f"the rules judged, comma-separated: {variants}")
    p.add_argument("--against", type=csv_list(str), required=True,
                   help="the baselines, comma-separated (e.g. standard,review)")
    p.add_argument("--seeds", type=seed_count, default=None,
                   help="how many seeds (5 means 0-4), or a comma-separated list; or --detect instead")
    p.add_argument("--detect", type=float, default=None, metavar="EFFECT",
                   help="size the design: add seeds until it detects EFFECT nats (80%% power, paired, at Holm's "
                        "alpha over the call's comparisons, from the upper 80%% bound of the pilot's SD), from a "
                        "pilot of --pilot-seeds, up to --max-seeds")
    p.add_argument("--pilot-seeds", type=int, default=4, help="seeds of the pilot with --detect (default: 4)")
    p.add_argument("--max-seeds", type=int, default=16, help="the most seeds --detect may add up to (default: 16)")
    p.add_argument("--margin", type=float, default=None,
                   help="equivalence margin in nats (default: rrlib.stats.verdict.DEFAULT_MARGIN, 0.01, about the "
                        "smallest gain the Review paper reports)")
    p.add_argument("--alpha", type=float, default=0.05, help="test level (default: 0.05)")
    p.add_argument("--no-timing", action="store_true", help="skip the step-time-per-FLOP measurement")
    p.add_argument("--shard", default="0/1", help="k/n: train only this machine's share of the missing runs")
    p.add_argument("--runs", default=None, type=path_text,
                   help="where the runs it trains go, relative to the current folder (default: <--out>/runs); the "
                        "project's finished runs in outputs/runs are reused where they match, never written")
    add_overrides(p, out_flag=None)
    add_rules_option(p)
    p.add_argument("--out", required=True, type=path_text,
                   help="the folder for verdict.csv, verdict.json and verdict.html, and for the runs it trains "
                        "(<--out>/runs) unless --runs names another")
    return parser


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    loaded = reported(lambda: load_given_rules(argv))
    if loaded:
        return loaded
    if argv and argv[0] in DELEGATED:
        import importlib

        arguments, command = DELEGATED[argv[0]]

        def delegate() -> int:
            importlib.import_module(arguments).parse_args(argv[1:])  # --help and usage mistakes, without torch
            if argv[0] == "report":  # page 07 publishes the records' words: a bad record is named before any page
                importlib.import_module("rrlib.claims.records").load()
            return importlib.import_module(command).main(argv[1:])

        return reported(delegate)
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return reported(lambda: run_command(args, argv))
    except KeyboardInterrupt as err:
        print(f"interrupted: {err}" if str(err) else "interrupted", file=sys.stderr)
        return 130
    finally:
        leave_process_group()


def leave_process_group() -> None:
    """Tear down the process group a run joined (rrlib.runs.device), if any, before the interpreter exits.

    One group serves every run of a process (a sweep under torchrun trains several), so it is left once, at the
    command's end. Left to the interpreter's exit instead, gloo's threads may still be running when their objects
    are destroyed, and the rank dies by SIGABRT ("terminate called without an active exception") after it had
    saved and stopped cleanly, which the launcher then reports as the run's failure. Nothing is imported here: a
    command that never loaded torch has no group, and one refused while loading rrlib must not be loaded again.
    """
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def out_root(given: str | None) -> str:
    """The runs' root typed on the command line (train's and sweep's --out, compare's --runs) as the library takes
    it (rrlib.home: relative to the project where it lies inside it); the project's outputs/runs if none."""
    return "outputs/runs" if given is None else given_path(given)


def run_command(args, argv: list[str]) -> int:
    from .runs.config import ConfigError

    if args.command == "train":
        from .runs.presets import resolve_run
        from .runs.folders import RunBusy
        from .runs.train import train_run

        run = resolve_run(args.size, args.variant, args.seed, overrides_from(args), out_root(args.out))
        try:
            result = train_run(run, move_aside=args.move_aside, allow_slow=args.allow_slow or None, skip_done=True)
        except RunBusy as err:
            raise ConfigError(f"{err}; wait for it or stop it first") from None
        if result is None:  # finished before this call: said as the sweep says it, a diverged run included
            from .runs.folders import claimed

            _, result = claimed(run)
            print(f"[rrlib] {run.size}/{run.variant}/seed{run.seed}: done already"
                  + ("" if result["status"] == "finished" else f" ({result['status']})"), file=sys.stderr)
        print({k: result[k] for k in ("size", "variant", "seed", "status", "steps", "val_loss", "fixed_loss",
                                      "ece", "minutes")})
        return 0
    if args.command == "sweep":
        from .runs.sweep import SweepIncomplete, parse_shard, run_sweep

        try:
            table, incomplete = run_sweep(args.size, args.variants, args.seeds, overrides_from(args),
                                          out_root(args.out),
                                          parse_shard(args.shard), move_aside=args.move_aside,
                                          allow_slow=args.allow_slow or None), None
        except SweepIncomplete as err:
            table, incomplete = err.table, err
        if len(table):
            print(table[["size", "variant", "seed", "params_M", "steps", "val_loss", "fixed_loss", "ece",
                         "status"]].to_string(index=False))
        if incomplete is not None:
            print(f"error: {incomplete}", file=sys.stderr)
            return 1
        return 0
    if args.command == "compare":
        return compare_command(args, argv)
    raise AssertionError(args.command)


def compare_command(args, argv: list[str]) -> int:
    from .compare.engine import Request, run
    from .runs.sweep import parse_shard

    out = Path(args.out).expanduser().absolute()
    request = Request(size=args.size, variants=args.variants, baselines=args.against, seeds=args.seeds,
                      detect=args.detect, pilot_seeds=args.pilot_seeds, max_seeds=args.max_seeds,
                      **({} if args.margin is None else {"margin": args.margin}), alpha=args.alpha,
                      overrides=overrides_from(args),
                      runs_root=out_root(args.runs) if args.runs is not None else given_path(out / "runs"),
                      shard=parse_shard(args.shard), timing=not args.no_timing, move_aside=args.move_aside,
                      allow_slow=args.allow_slow or None)
    run(request, out, typed(argv), log=print)  # None: other shards' runs
    return 0


def typed(argv: list[str]) -> str:
    """The command as the user typed it, paths as given: the verdict's "Reproduce" line is for the user who ran it,
    on the machine that holds the rule files it names."""
    import shlex

    return " ".join([prog(), *map(shlex.quote, argv)])


if __name__ == "__main__":
    sys.exit(main())
