"""The report's build, at the top: executing the notebooks (papermill), rendering them (nbconvert), the index and
its abstract, the README's and docs' generated blocks, the Colab cell, and what each page was built from. It
renders what the layers beneath compute (the claims' ledger, rrlib.results) and draw (rrlib.views), and may import
every subpackage; none imports it but the command line.
"""
