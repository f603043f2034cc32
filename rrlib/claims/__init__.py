"""The claims ledger's claims as data: the records (``records.yaml``, read by ``records``), where their words are
checked (``quotes``), and what the CPU can reach (``reach``). May import every other subpackage; none imports it.
"""
