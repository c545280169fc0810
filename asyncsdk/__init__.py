"""Asyncio SDK for the real-estate AI image-processing service.

::

    import asyncsdk

    async with asyncsdk.Client() as client:   # ASYNCSDK_API_KEY / ASYNCSDK_BASE_URL
        process = await client.run(asyncsdk.ToolSlug.IMAGE_ENHANCEMENT, "room.jpg", widgets=[...])
"""

from asyncsdk._client import Client, ClientSettings
from asyncsdk._errors import (
    APIConnectionError,
    APIDecodeError,
    APIError,
    APIStatusError,
    APITimeoutError,
    AsyncSDKError,
    AuthenticationError,
    BadRequestError,
    ConfigurationError,
    NotFoundError,
    PermissionDeniedError,
    ProcessFailedError,
    RateLimitError,
    ServerError,
    UnprocessableEntityError,
    UploadError,
    ValidationError,
    WaitTimeoutError,
)
from asyncsdk._limits import GenerationLimit
from asyncsdk._models import (
    Asset,
    AssetRole,
    CreatedOrder,
    CreatedProcesses,
    Feedback,
    Order,
    OrderProcess,
    OrderStatus,
    Page,
    Pagination,
    Process,
    ProcessCompleted,
    ProcessStatus,
    Project,
    ResultAsset,
    Tool,
    ToolSlug,
    V1Submitted,
    V1Upload,
    Widget,
    WidgetItem,
)
from asyncsdk._sansio import RetryPolicy, Timeout
from asyncsdk._uploads import MAX_UPLOAD_BYTES, Upload, UploadSource
from asyncsdk._waiter import ResultWaiter

__version__ = "0.1.0"

__all__ = [
    "MAX_UPLOAD_BYTES",
    "APIConnectionError",
    "APIDecodeError",
    "APIError",
    "APIStatusError",
    "APITimeoutError",
    "Asset",
    "AssetRole",
    "AsyncSDKError",
    "AuthenticationError",
    "BadRequestError",
    "Client",
    "ClientSettings",
    "ConfigurationError",
    "CreatedOrder",
    "CreatedProcesses",
    "Feedback",
    "GenerationLimit",
    "NotFoundError",
    "Order",
    "OrderProcess",
    "OrderStatus",
    "Page",
    "Pagination",
    "PermissionDeniedError",
    "Process",
    "ProcessCompleted",
    "ProcessFailedError",
    "ProcessStatus",
    "Project",
    "RateLimitError",
    "ResultAsset",
    "ResultWaiter",
    "RetryPolicy",
    "ServerError",
    "Timeout",
    "Tool",
    "ToolSlug",
    "UnprocessableEntityError",
    "Upload",
    "UploadError",
    "UploadSource",
    "V1Submitted",
    "V1Upload",
    "ValidationError",
    "WaitTimeoutError",
    "Widget",
    "WidgetItem",
    "__version__",
]
