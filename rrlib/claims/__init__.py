"""The claims ledger's claims as data: the records (``records.yaml``, read by ``records``), where their words are
checked (``quotes``), and what the CPU can reach (``reach``); and the rows page 07 builds from them, one module per
study (``review``, ``gate``, ``mechanisms``, ``family``, ``conversion``, ``looped``; ``rows`` for what a record
alone makes), what the page reads (``sources``), its figures (``figures``) and its ledger (``page``). May import
every other subpackage; none imports it.
"""
