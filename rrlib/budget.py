"""``python -m rrlib.budget ...``: the command's address, kept; the code lives in rrlib.speed.budget."""
import sys

from .speed.budget import main

if __name__ == "__main__":
    sys.exit(main())
