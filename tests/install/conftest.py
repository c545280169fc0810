"""The host project is a user's own project, run by its own pytest inside fresh virtualenvs."""

collect_ignore = ["host_project"]
