"""``python -m asyncsdk``: the command line (see ``python -m asyncsdk --help``)."""

from asyncsdk.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
