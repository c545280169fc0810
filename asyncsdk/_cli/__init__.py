"""The subcommands of the ``asyncsdk`` command line (see :mod:`asyncsdk.cli`)."""
