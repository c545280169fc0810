"""Asyncio SDK for the real-estate AI image-processing service.

::

    import asyncsdk

    async with asyncsdk.Client() as client:   # ASYNCSDK_API_KEY / ASYNCSDK_BASE_URL
        process = await client.run(
            asyncsdk.ToolSlug.VIRTUAL_STAGING,
            "room.jpg",
            widgets={"space": "bedroom", "style": "modern"},
        )
"""

from asyncsdk._catalogue import (
    Catalogue,
    CatalogueCache,
    CatalogueError,
    InactiveError,
    InputError,
    MissingWidgetError,
    PreparedProcess,
    SelectionError,
    UnknownItemError,
    UnknownToolError,
    UnknownWidgetError,
    WidgetsArg,
    WidgetSelection,
)
from asyncsdk._client import Client, ClientSettings
from asyncsdk._convert import make_converter as _make_converter
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
from asyncsdk._masks import (
    REMOVE_BLUE,
    MaskError,
    MaskReport,
    check_mask,
    convert_white_mask,
    mask_from_shapes,
)
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
from asyncsdk._v1map import (
    V1_ENDPOINTS,
    V1MappingError,
    V1Translation,
    translate_v1_submit,
    v1_service_to_tool,
    v1_space_to_item,
)
from asyncsdk._waiter import ResultWaiter

__version__ = "0.1.0"

structure = _make_converter().structure
"""``structure(value, cls)``: build ``cls`` (a model such as :class:`ProcessCompleted`) from
decoded JSON with the converter the client uses (lenient on unknown keys)."""

__all__ = [
    "MAX_UPLOAD_BYTES",
    "REMOVE_BLUE",
    "V1_ENDPOINTS",
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
    "Catalogue",
    "CatalogueCache",
    "CatalogueError",
    "Client",
    "ClientSettings",
    "ConfigurationError",
    "CreatedOrder",
    "CreatedProcesses",
    "Feedback",
    "GenerationLimit",
    "InactiveError",
    "InputError",
    "MaskError",
    "MaskReport",
    "MissingWidgetError",
    "NotFoundError",
    "Order",
    "OrderProcess",
    "OrderStatus",
    "Page",
    "Pagination",
    "PermissionDeniedError",
    "PreparedProcess",
    "Process",
    "ProcessCompleted",
    "ProcessFailedError",
    "ProcessStatus",
    "Project",
    "RateLimitError",
    "ResultAsset",
    "ResultWaiter",
    "RetryPolicy",
    "SelectionError",
    "ServerError",
    "Timeout",
    "Tool",
    "ToolSlug",
    "UnknownItemError",
    "UnknownToolError",
    "UnknownWidgetError",
    "UnprocessableEntityError",
    "Upload",
    "UploadError",
    "UploadSource",
    "V1MappingError",
    "V1Submitted",
    "V1Translation",
    "V1Upload",
    "ValidationError",
    "WaitTimeoutError",
    "Widget",
    "WidgetItem",
    "WidgetSelection",
    "WidgetsArg",
    "__version__",
    "check_mask",
    "convert_white_mask",
    "mask_from_shapes",
    "structure",
    "translate_v1_submit",
    "v1_service_to_tool",
    "v1_space_to_item",
]
