"""``python -m asyncsdk``: the command line (see ``python -m asyncsdk --help``)."""

import sys

if __name__ == "__main__":
    try:
        from asyncsdk.cli import main
    except KeyboardInterrupt:  # Ctrl-C while the command line imports: as during a command
        sys.stderr.write("error: interrupted\n")
        raise SystemExit(130) from None
    raise SystemExit(main())
