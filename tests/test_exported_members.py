"""``asyncsdk.__all__`` is exactly the public surface: every listed name exists, none is missing."""

from __future__ import annotations

from types import ModuleType

import asyncsdk

PUBLIC = {
    # the client
    "Client",
    "ClientSettings",
    "Timeout",
    "RetryPolicy",
    "GenerationLimit",
    "ResultWaiter",
    # uploads
    "Upload",
    "UploadSource",
    "MAX_UPLOAD_BYTES",
    # models and constants
    "Asset",
    "AssetRole",
    "CreatedOrder",
    "CreatedProcesses",
    "Feedback",
    "Order",
    "OrderProcess",
    "OrderStatus",
    "Page",
    "Pagination",
    "Process",
    "ProcessCompleted",
    "ProcessStatus",
    "Project",
    "ResultAsset",
    "Tool",
    "ToolSlug",
    "V1Submitted",
    "V1Upload",
    "Widget",
    "WidgetItem",
    # errors
    "AsyncSDKError",
    "ConfigurationError",
    "ValidationError",
    "UploadError",
    "APIError",
    "APIStatusError",
    "BadRequestError",
    "AuthenticationError",
    "PermissionDeniedError",
    "NotFoundError",
    "UnprocessableEntityError",
    "RateLimitError",
    "ServerError",
    "APIConnectionError",
    "APITimeoutError",
    "APIDecodeError",
    "ProcessFailedError",
    "WaitTimeoutError",
    # metadata
    "__version__",
}


def test_all_is_exactly_the_public_names() -> None:
    assert set(asyncsdk.__all__) == PUBLIC
    assert len(asyncsdk.__all__) == len(PUBLIC)


def test_every_public_attribute_is_exported() -> None:
    public = {
        name
        for name, value in vars(asyncsdk).items()
        if not name.startswith("_") and not isinstance(value, ModuleType)
    }
    assert public | {"__version__"} == set(asyncsdk.__all__)


def test_every_exported_name_exists() -> None:
    for name in asyncsdk.__all__:
        assert getattr(asyncsdk, name) is not None, name
