"""The claims ledger. The claims as data: the records (``records.yaml``, read by ``records``), where their words are
checked (``quotes``), and what the CPU can reach (``reach``). The ledger itself (``ledger``: ``ledger()`` gives every
record's row from run folders alone, read through rrlib.results, never from a page's table), and the rows it is
built from, one module per study (``review``, ``gate``, ``mechanisms``, ``family``, ``conversion``, ``looped``,
``reach_rows``; ``board``, the rows the leaderboard answers; ``rows`` for what a record alone makes), what they read
besides the results (``sources``), and how page 07 lays the ledger out (``page``) and draws its figures
(``figures``). May import the layers beneath it (results, views, studies, runs, stats); compare stays apart from it,
and only the report's build imports it.
"""
