"""``rrlib compare``: is rule A better than rule B at size S? The verdict engine the report's ledger shares.

It plans what a comparison needs (variants × baselines × seeds at one size), says what it will train and about
how long that takes here, trains only what is missing (reusing every finished run whose fingerprint matches),
optionally adds seeds until the design can detect a stated gap, tests each pair with
rrlib.stats.verdict.compare_pairs, times each rule's training step against the standard residual's in one
process, and writes ``verdict.csv``, ``verdict.json`` and ``verdict.html``. It may import rrlib.runs,
rrlib.views (its figure) and rrlib.speed (it sits above them), never the report's build, and nothing imports it but the command line.
"""
