"""``python -m tools.mutation``: see tools/mutation/run.py."""

from tools.mutation.run import main

main()
