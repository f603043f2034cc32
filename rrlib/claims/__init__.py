"""The claims ledger. The claims as data: the records (``records.yaml``, read by ``records``), where their words are
checked (``quotes``), and what the CPU can reach (``reach``). The ledger itself: ``rrlib.claims.ledger()`` gives every
record's row from run folders alone (``assemble``: the rows in the records' order, with what they were made from),
each made by the reader its record names (``readers``, sharing what they read through ``context``) from
rrlib.results, never from a page's table; the functions the readers call, one module per study (``review``,
``gate``, ``mechanisms``, ``family``, ``conversion``, ``looped``, ``reach_rows``; ``board``, the rows the leaderboard
answers; ``rows`` for what a record alone makes), what they read besides the results (``sources``), and how page 07
lays the ledger out (``page``) and draws its figures (``figures``). May import the layers beneath it (results, views,
studies, runs, stats); compare stays apart from it, and only the report's build imports it.
"""


def ledger(**settings):
    """The whole ledger from run folders: one row per record, judged by the one rule; ``settings`` are
    rrlib.claims.assemble.Inputs' (where it reads, its seeds and alpha), the committed study's by default."""
    from .assemble import ledger as assembled

    return assembled(**settings)
