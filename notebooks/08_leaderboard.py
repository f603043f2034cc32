# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% tags=["colab"]
# On Colab: clone rrlib and install it beside Colab's own torch; anywhere else rrlib is installed already.
# (Made from pyproject.toml's [project.urls] Repository by rrlib.report.colab: edit that, not this cell.)
import sys

REPO_URL = "https://github.com/rrlib-project/rrlib"
if "google.colab" in sys.modules:
    import os
    import re
    import subprocess
    import tomllib

    class SetupError(Exception):
        def _render_traceback_(self):  # IPython shows the sentence alone, without a traceback
            return [str(self)]

    def why(done):  # git's or pip's own line saying what failed
        lines = done.stderr.strip().splitlines() or [f"exit status {done.returncode}"]
        return next((line for line in lines if line.startswith(("fatal: ", "ERROR: "))), lines[-1]).split(": ", 1)[-1]

    if not os.path.isdir("rrlib"):
        done = subprocess.run(["git", "clone", "-q", "--depth", "1", REPO_URL, "rrlib"], capture_output=True, text=True)
        if done.returncode:
            raise SetupError(f"rrlib could not be fetched from {REPO_URL} ({why(done)}); check that the "
                             f"repository is reachable from here, or upload a copy of it as the folder rrlib/")
    with open("rrlib/pyproject.toml", "rb") as f:
        project = tomllib.load(f)["project"]
    needs = [d for d in project["dependencies"] + project["optional-dependencies"]["report"]
             if not re.match(r"torch\b", d)]
    for args in (["--no-deps", "-e", "rrlib"], needs):  # rrlib without torch, then what it needs besides
        done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", *args], capture_output=True, text=True)
        if done.returncode:
            raise SetupError(f"pip could not install {' '.join(args)} ({why(done)})")
    os.chdir("rrlib")
    sys.path.insert(0, os.getcwd())

# %% [markdown]
# # 8 · The leaderboard: every residual rule against standard
#
# **Question.** Which residual rules of the family, the older ones and those of the last two years, lower the
# held-out loss against the standard pre-norm residual when trained the same way, and at what cost per step?
#
# Every rule is trained at the powered CPU size `family_power` over the same seeds as the standard residual, and each
# pair is judged by the compare engine (`rrlib compare`): the paired gap on the fixed held-out set, its interval,
# Holm's correction over the board's comparisons, and the verdict word. The runs are made by the leaderboard study
# (`rrlib study run leaderboard`); this page reads what has finished, and a rule still without a
# verdict says where it stands and what it costs.

# %% tags=["parameters"]
budget_cpu_hours = 20.0  # the study's budget: the plan of the seeds each rule stands at (its --budget)
bench_files = ["outputs/bench/cpu-family.json",  # `rrlib bench` at `family`: the step times of every older rule,
               "outputs/bench/cpu-family-new-rules.json"]  # then of the new ones (the first file naming a rule wins)
bench_size = "family"  # the benchmark's size: the board size's model and batch, fewer steps
figures_dir = None  # the report's figure folder; None shows figures without writing them

# %%
from IPython.display import HTML, display

from rrlib.results import leaderboard
from rrlib.views import leaderboard as board_view, plots, tables
from rrlib.studies import leaderboard_study as study

plots.use_style()

# %%
board = leaderboard.study_board(budget_cpu_hours, bench_files, bench_size)

# %% [markdown]
# ## The board
#
# One row per rule, sorted by the gap against standard (baseline − rule on `fixed_loss`, in nats: positive means a
# lower loss than standard), best first; the rules without a verdict yet follow in the order the study trains them.

# %%
tables.reader_table(board_view.shown(board), "08_leaderboard", figures_dir, index=False,
                    formats=board_view.SHOWN_FORMATS, full=board.reset_index())

# %%
stage = board["stage"].value_counts()
left = board[board["stage"].isin(["in progress", "planned"])]
display(HTML(
    f"<p>{stage.get('judged', 0)} of {len(board) - 1} rules are judged at <code>{study.SIZE}</code>"
    + (", from the board call's verdict file" if (board["source"] == "board file").any() else
       ", from their finished runs (the board call's verdict file is not written yet)")
    + f"; {stage.get('in progress', 0)} are in progress and {stage.get('planned', 0)} have no runs yet. "
    f"The study's plan trains {int(left['runs_to_train'].sum())} more runs, about {left['cpu_hours'].sum():.1f} "
    f"CPU-hours within its budget of {budget_cpu_hours:g}"
    + (f"; {stage.get('beyond the budget', 0)} rules lie beyond it" if stage.get("beyond the budget") else "")
    + ".</p>"))

# %%
if stage.get("judged", 0):
    plots.show_figure(board_view.gaps_figure(board, study.SIZE, board["margin"].dropna().iloc[0]),
                      "08_leaderboard_gaps", figures_dir)

# %% [markdown]
# ## How a row is judged
#
# - **Design.** Each rule is trained at `family_power` (the `family` preset's model, parameter-matched to Review by
#   widening, 1,200 steps of 16 × 128 byte tokens) at the same seeds as standard. A seed fixes the batch order and
#   the held-out windows for every rule, so the design is paired: the test reads each seed's difference.
# - **Gap and interval.** The mean of standard − rule on `fixed_loss` over the seeds both have, with its 95 %
#   paired-t interval (`rrlib.stats.verdict.compare_pairs`, the function `rrlib compare` calls). A pair where
#   either rule diverged on a seed is *diverged*, with no test, as `rrlib compare` marks it.
# - **Correction.** Holm over the board's comparisons: every rule judged at all the study's seeds, as the study's
#   last compare call judges them in one call. Until that call has run the page makes the same call on the
#   finished runs, so the family grows as rules finish and a Holm p can rise while its rule's gap stays put. A rule
#   the budget holds below all seeds is judged alone, as its own design call judges it.
# - **Verdict.** *better* or *worse*: Holm p below 0.05, the gap's sign decides. *equivalent*: the TOST p, Holm over
#   the same comparisons, below 0.05 at a margin of ±0.01 nats, about the smallest gain the Review paper reports
#   (0.009–0.016 nats at 590M–1B), so "equivalent" means no gain as large as the paper's. *inconclusive*: neither;
#   the **detectable** gap beside it is the smallest true gap the design finds with 80 % power at the paired SD it
#   met, to read against that 0.01.
# - **Stage.** A rule is judged only once every seed of its design has finished: reading a verdict from a design
#   still filling in is optional stopping. Until then its row says how many seeds have finished, or, with no runs
#   yet, the seeds the study's plan gives it within the budget and their cost.
# - **Cost.** Parameters and training FLOPs per token are counted from each rule's model. Step time per FLOP is the
#   rule's training-step time over its FLOPs per token, divided by standard's: the board call's, measured in one
#   process in interleaved rounds, for the rules its file judges; otherwise the committed benchmark's at `family`
#   (the same model and batch; column `timed_by` of the CSV says which). The plan prices runs by the same
#   benchmark's step-time ratios against the median minutes of the finished standard runs.

# %% [markdown]
# ## What the study still runs

# %%
todo = board[board["runs_to_train"] > 0][["stage", "finished", "planned_seeds", "runs_to_train", "cpu_hours"]]
if len(todo):  # once every design has finished there is no plan left to show, and no table of it is written
    display(tables.reader_table(todo, "08_plan", figures_dir,
                                rename={"finished": "seeds finished", "planned_seeds": "seeds planned",
                                        "runs_to_train": "runs to train", "cpu_hours": "CPU-hours"},
                                formats={"cpu_hours": "{:.1f}"}))
else:
    display(HTML(f"<p>Every rule's design has finished at <code>{study.SIZE}</code>: nothing is left to train.</p>"))

# %% [markdown]
# ## Recap
#
# The board sets every rule of the family against the standard residual in one design: the same model size,
# recipe, data and seeds, one test, one correction over the comparisons, and a verdict that says how strong it is.
# Rows fill in as the study's runs finish; a rebuild of this page reads them.

# %%
judged = board[board["stage"] == "judged"].drop(index=study.BASELINE, errors="ignore")
print(f"{len(judged)} of {len(board) - 1} rules judged against {study.BASELINE} at {study.SIZE}: "
      + ", ".join(f"{rule} {row.verdict}" for rule, row in judged.iterrows())
      + f"; {int(left['runs_to_train'].sum())} runs to go.")
