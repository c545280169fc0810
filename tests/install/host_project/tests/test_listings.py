"""The host's own tests: they know nothing of the SDK's pytest plugin."""

import asyncsdk


def test_staging_settings_are_ready() -> None:
    widgets = {"space": "bedroom", "style": "modern"}
    assert asyncsdk.ToolSlug.VIRTUAL_STAGING == "tool-virtual-staging"
    assert sorted(widgets) == ["space", "style"]
