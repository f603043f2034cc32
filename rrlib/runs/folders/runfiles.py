"""What a run folder claims, checked before it is trusted: the run's fingerprint and one guarded read per file.

Identity. A run's *fingerprint* hashes every setting that can change its numbers: the model (rule and its
options included), the data (the file by name, not the folder it sits in on one machine; tokenizer, stories,
held-out split), the recipe (steps, batch, optimiser, schedule with ``warmup_steps`` as resolved, clip,
evaluation sizes, and ``init_from``, the run folder whose weights it starts from, as written), the seed, the
resolved precision, the device type (cpu or cuda) and ``compile``; for a rule from outside the package, the hash of its
whole code (``model.rule_source``: its file and the modules of its folder it imports, rrlib.rules.rule_code), so
that an edited rule is another run. Left out, because they cannot change a number the run reports: how often it
logs, evaluates and checkpoints, what a finished run keeps on disk, where its folders and caches live, and
``micro_batch_size`` (the same batch in smaller pieces: only float rounding moves, and it is how a run that no
longer fits in memory goes on). ``warmup_frac``, ``tokens_per_param`` and the raw ``device``/``precision`` strings count through what they
resolve to (``warmup_steps``, ``steps``, the device type and precision).

The data's content is recorded beside the fingerprint, not in it: ``data_hash``, the SHA-256 of its tokens
(rrlib.runs.data.token_cache). The fingerprints of the committed runs were computed with the data named by its file,
and a run recorded without a hash is matched by that name alone (rrlib.runs.folders), so they still answer.

The fingerprint is stored in ``config.json``, ``ckpt.pt`` and ``result.json``. A folder's identity is always
recomputed from the settings its ``config.json`` records (a run written before fingerprints existed, or before
a setting was added, reads with that setting's value of the time), so an older folder is compared, never
rewritten.

Reading. Each state file is read through one function here; a file that is there but cannot be read, or does
not hold what rrlib writes (``RESULT_KEYS``, ``CONFIG_KEYS``: the keys and the kind of each), ends in one
``StateError`` sentence naming it and the way out, never in a parser's traceback or a formatting error later.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import sys
from pathlib import Path

import torch

from ..config import ConfigError, RunConfig
from .disk import write_bytes_atomic
from ..validate import typed

# (section, setting) pairs that cannot change a run's numbers; see the module docstring
NOT_FINGERPRINTED = {"train": {"log_every", "eval_every", "ckpt_every", "keep_weights", "micro_batch_size",
                               "device", "precision", "warmup_frac", "tokens_per_param",
                               "bf16_width_multiple"},
                     "data": {"cache_dir", "gpt2_dir"}, "model": {"rule_origin"}}
# Settings added after runs were fingerprinted, left out of the identity while at their default: every run
# before them keeps its fingerprint (and a checkpoint written before them still resumes).
OMITTED_AT_DEFAULT = {"train": {"init_from": None, "rule_lr_scale": 1.0}, "model": {"rule_source": None}}
FILE_SETTINGS = ("data_path", "val_path")  # compared by file name: the same file on another machine is the same
METRICS_FILE = "metrics.jsonl"
DATA_HASH = "data_hash"  # the data's content (rrlib.runs.data.token_cache), recorded beside the fingerprint
MOVE_ASIDE = "pass --move-aside to move the folder aside and start the run afresh (nothing is deleted)"


class StateError(ConfigError):
    """A file of a run folder is there but cannot be read; the message names it and the way out."""


class RunConflict(ConfigError):
    """A run folder holds a run whose settings differ from the one asked for."""


# ---------------------------------------------------------------- identity

def run_identity(run: RunConfig, device_type: str, precision: str) -> dict:
    """Every setting of ``run`` that can change its numbers, resolved, in JSON form: what the fingerprint hashes."""
    config = run.to_dict()
    omitted = lambda section, k, v: k in OMITTED_AT_DEFAULT.get(section, {}) and v == OMITTED_AT_DEFAULT[section][k]
    identity = {section: {k: v for k, v in config[section].items()
                          if k not in NOT_FINGERPRINTED[section] and not omitted(section, k, v)}
                for section in ("model", "data", "train")}
    for key in FILE_SETTINGS:
        if identity["data"][key]:
            identity["data"][key] = Path(identity["data"][key]).name
    identity["run"] = {"seed": run.seed, "device_type": device_type, "precision": precision}
    return json.loads(json.dumps(identity))  # tuples as lists, as they read back from a file


def fingerprint(identity: dict) -> str:
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]


def recorded_identity(header: dict) -> dict:
    """The identity of the run a ``config.json`` describes, by today's definition of the fingerprint."""
    device_type = header.get("device_type") or ("cpu" if str(header["device"]).startswith("cpu") else "cuda")
    return run_identity(RunConfig.from_dict(header["config"]), device_type, header["precision"])


def differences(recorded: dict, asked: dict, most: int = 4) -> str:
    """'train.lr 0.002 there, 0.003 asked; ...' for the settings where two identities differ."""
    flat = lambda ident: {f"{s}.{k}": v for s, values in ident.items() for k, v in values.items()}
    there, here = flat(recorded), flat(asked)
    keys = sorted(k for k in there.keys() | here.keys() if there.get(k) != here.get(k))
    text = "; ".join(f"{k} {json.dumps(there.get(k))} there, {json.dumps(here.get(k))} asked" for k in keys[:most])
    return text + (f"; and {len(keys) - most} more" if len(keys) > most else "")


# ---------------------------------------------------------------- guarded reads

def read_guarded(path: Path, load, fix: str):
    """``load(path)``, or None if the file is missing; a file that cannot be read is one StateError sentence."""
    path = Path(path)
    if not path.exists():
        return None
    try:
        return load(path)
    except Exception as err:  # noqa: BLE001 - JSON, zip, pickle and OS errors alike mean "this file is damaged"
        reason = (str(err).strip().splitlines() or [type(err).__name__])[0][:120]
        raise StateError(f"{path} cannot be read ({reason}); {fix}") from None


def _json_object(path: Path, *keys) -> dict:
    obj = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(obj, dict) or any(k not in obj for k in keys):
        raise ValueError(f"not a JSON object with {', '.join(keys)}")
    return obj


NUMBER, WHOLE, TEXT, NONE = (int, float), (int,), (str,), (type(None),)
# What every result.json written by rrlib holds, and the kinds each value may be: a table, the report and skip-done
# read them as these, so a file that breaks one is refused when it is read, naming the key.
RESULT_KEYS = {
    "size": TEXT, "variant": TEXT, "seed": WHOLE, "status": TEXT, "steps": WHOLE, "params_M": NUMBER, "params": WHOLE,
    "minutes": NUMBER, "tokens": WHOLE, "tokens_per_s": NUMBER, "tokens_per_param": NUMBER, "train_flops": NUMBER,
    "flops_per_token": NUMBER, "non_embedding_params": WHOLE, "d_model": WHOLE, "n_layers": WHOLE, "n_heads": WHOLE,
    "n_loops": WHOLE, "lr": NUMBER, "precision": TEXT, "device": TEXT, "world_size": WHOLE, "git_commit": TEXT,
    "data_source": TEXT, "torch_version": TEXT, "rrlib_version": TEXT, "eval_seconds": NUMBER,
    "val_loss": NUMBER + NONE, "ece": NUMBER + NONE, "fixed_loss": NUMBER + NONE, "fixed_ece": NUMBER + NONE,
    "paper_eval_tokens": WHOLE + NONE, "fixed_eval_tokens": WHOLE + NONE, "diverged_step": WHOLE + NONE,
}
RESULT_OPTIONAL = {"fingerprint": TEXT, "data_hash": TEXT, "peak_memory_MB": NUMBER + NONE,  # added since the first
                   "diverged_because": TEXT}
# The range of each number (low, high; None: no bound), both ends included; NaN and inf are never in range. Counts
# of things a run has are at least 1, amounts it spent at least 0; ECE is a share of confidence.
POSITIVE, AT_LEAST_0, SHARE = (1, None), (0, None), (0, 1)
RESULT_RANGES = {
    "seed": (0, 2**64 - 1), "steps": AT_LEAST_0, "params_M": AT_LEAST_0, "params": POSITIVE, "minutes": AT_LEAST_0,
    "tokens": AT_LEAST_0, "tokens_per_s": AT_LEAST_0, "tokens_per_param": AT_LEAST_0, "train_flops": AT_LEAST_0,
    "flops_per_token": AT_LEAST_0, "non_embedding_params": AT_LEAST_0, "d_model": POSITIVE, "n_layers": POSITIVE,
    "n_heads": POSITIVE, "n_loops": POSITIVE, "lr": AT_LEAST_0, "world_size": POSITIVE, "eval_seconds": AT_LEAST_0,
    "val_loss": AT_LEAST_0, "ece": SHARE, "fixed_loss": AT_LEAST_0, "fixed_ece": SHARE, "paper_eval_tokens": POSITIVE,
    "fixed_eval_tokens": POSITIVE, "diverged_step": AT_LEAST_0, "peak_memory_MB": AT_LEAST_0,
}
STATUSES = ("finished", "diverged")
CONFIG_KEYS = {"config": (dict,), "device": TEXT, "precision": TEXT}
CONFIG_OPTIONAL = {"fingerprint": TEXT, "device_type": TEXT, "data_hash": TEXT}
KINDS = {NUMBER: "a number", WHOLE: "a whole number", TEXT: "text", NUMBER + NONE: "a number or null",
         WHOLE + NONE: "a whole number or null", (dict,): "a mapping"}


def _check_keys(obj: dict, required: dict, optional: dict) -> None:
    for key, kinds in {**required, **optional}.items():
        if key not in obj:
            if key in required:
                raise ValueError(f"it has no {key!r}")
            continue
        value = obj[key]
        if isinstance(value, bool) or not isinstance(value, kinds):
            raise ValueError(f"{key} must be {KINDS[kinds]}, got {value!r}")
        if isinstance(value, float) and not math.isfinite(value):  # JSON as Python writes it holds NaN and Infinity
            raise ValueError(f"{key} must be a finite number, got {value!r}")


def _check_ranges(obj: dict, ranges: dict) -> None:
    for key, (low, high) in ranges.items():
        value = obj.get(key)
        if value is not None and ((low is not None and value < low) or (high is not None and value > high)):
            bounds = f"from {low} to {high}" if high is not None else f"at least {low}"
            raise ValueError(f"{key} must be {bounds}, got {value!r}")


def _result(path: Path) -> dict:
    result = _json_object(path)
    _check_keys(result, RESULT_KEYS, RESULT_OPTIONAL)
    _check_ranges(result, RESULT_RANGES)
    if result["status"] not in STATUSES:
        raise ValueError(f"status must be one of {', '.join(STATUSES)}, got {result['status']!r}")
    if result["status"] == "finished":
        missing = [k for k in ("val_loss", "ece", "fixed_loss", "fixed_ece") if result[k] is None]
        if missing:
            raise ValueError(f"a finished run's {', '.join(missing)} must be numbers, got null")
    folder = path.parent
    if folder.name.startswith("seed"):  # a result copied into another run's folder does not answer for that run
        where = (folder.parent.parent.name, folder.parent.name, folder.name)
        said = (result["size"], result["variant"], f"seed{result['seed']}")
        if said != where:
            raise ValueError(f"it is the result of {'/'.join(said)}, not of the folder {'/'.join(where)} it lies in")
    return result


def _config(path: Path) -> dict:
    header = _json_object(path)
    _check_keys(header, CONFIG_KEYS, CONFIG_OPTIONAL)
    config = header["config"]
    for key in ("model", "data", "train"):
        if not isinstance(config.get(key), dict):
            raise ValueError(f"config.{key} must be a mapping of settings, got {config.get(key)!r}")
    run = RunConfig.from_dict(config)
    for section in ("model", "data", "train"):
        for f in dataclasses.fields(getattr(run, section)):
            typed(f"config.{section}.{f.name}", getattr(getattr(run, section), f.name), f.type)
    recorded_identity(header)  # settings this version cannot read are as damaged as torn JSON
    return header


RESTORE = "restore it from a copy, or " + MOVE_ASIDE


def read_result(run_dir: Path, fix: str = RESTORE) -> dict | None:
    """A run folder's result.json checked against what every result holds (RESULT_KEYS), or None if it has none."""
    return read_guarded(Path(run_dir) / "result.json", _result, fix)


def read_config(run_dir: Path, fix: str = RESTORE) -> dict | None:
    """A run folder's config.json, checked as it will be read: its keys, and every setting by its type."""
    return read_guarded(Path(run_dir) / "config.json", _config, fix)


def _log(path: Path) -> list[dict]:
    records = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            raise ValueError(f"line {number} is not a JSON record") from None
        step = record.get("step") if isinstance(record, dict) else None
        if isinstance(step, bool) or not isinstance(step, int):
            raise ValueError(f"line {number} is not a record with a whole-number step")
        for key, value in record.items():
            if isinstance(value, bool) or not isinstance(value, (int, float, type(None))):
                raise ValueError(f"line {number}: {key} must be a number, got {value!r}"[:120])
        records.append(record)
    return records


def read_log(run_dir: Path, fix: str = RESTORE) -> list[dict]:
    """A run folder's metrics.jsonl, every line a record rrlib writes (a whole-number step, numbers beside it; a
    diverged run's NaN is a number); [] where there is none. A line that is not is one StateError naming the file
    and the line, never a type error where the log is drawn."""
    return read_guarded(Path(run_dir) / METRICS_FILE, _log, fix) or []


def read_checkpoint(path: Path, map_location="cpu", mmap: bool = False) -> dict | None:
    def load(p):
        ckpt = torch.load(p, map_location=map_location, weights_only=True, mmap=mmap)
        if not isinstance(ckpt, dict) or not {"model", "optimizer", "step"} <= ckpt.keys():
            raise ValueError("not a checkpoint (no model, optimizer and step)")
        return ckpt
    # one checkpoint is kept while a run goes (rrlib.runs.folders.checkpoints), so there is no older one to fall back to
    return read_guarded(path, load, "delete it to start the run again from step 0, or " + MOVE_ASIDE)


def truncate_metrics(path: Path, step: int) -> None:
    """On resume, keep the log up to the checkpoint's step, so that it reads as one uninterrupted run.

    A line that is not a whole record (what a crash in mid-write leaves) ends the log there; that is said once.
    """
    if not path.exists():
        return
    keep = []
    for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            record_step = json.loads(line)["step"]
            if isinstance(record_step, bool) or not isinstance(record_step, int):
                raise TypeError("a step that is not a whole number")
        except (ValueError, KeyError, TypeError):
            print(f"[rrlib] {path}: line {number} is not a whole record (a write cut short); the log is cut "
                  f"there and goes on from the checkpoint", file=sys.stderr, flush=True)
            break
        if record_step <= step:
            keep.append(line)
    write_bytes_atomic(path, "".join(line + "\n" for line in keep).encode("utf-8"))


def log_intact(metrics, path) -> None:
    """Refuse to record a run whose log was removed or replaced while it trained: the result would stand for steps
    whose log no longer exists. One sentence naming the file; the last checkpoint stays, so nothing more is lost."""
    opened = os.fstat(metrics.fileno())
    try:
        there = os.stat(path)
    except OSError:
        there = None
    if opened.st_nlink == 0 or there is None or (there.st_dev, there.st_ino) != (opened.st_dev, opened.st_ino):
        raise StateError(f"{path} was removed or replaced while the run trained, so its log is lost and the run is "
                         f"not recorded as finished; {MOVE_ASIDE}")


def append_log(fh, record: dict) -> None:
    """One line appended whole, or not at all: a write that fails (a full disk) is cut back off."""
    if fh is not None:
        line, start = (json.dumps(record) + "\n").encode(), fh.tell()
        try:
            view = memoryview(line)
            while view:
                view = view[fh.write(view):]
        except OSError:
            fh.truncate(start)
            raise
