"""pytest fixtures that run the sandbox in-process on an ephemeral port."""
