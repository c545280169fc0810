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

import types

import attrs

from asyncsdk._catalogue import (
    Catalogue,
    CatalogueCache,
    PreparedProcess,
    WidgetsArg,
    WidgetSelection,
)
from asyncsdk._catalogue.v1map import (
    V1_ENDPOINTS,
    V1Translation,
    translate_v1_submit,
    v1_service_to_tool,
    v1_space_to_item,
)
from asyncsdk._client import Client
from asyncsdk._errors import (
    APIConnectionError,
    APIDecodeError,
    APIError,
    APIStatusError,
    APITimeoutError,
    AsyncSDKError,
    AuthenticationError,
    BadRequestError,
    CatalogueError,
    ConfigurationError,
    InactiveError,
    InputError,
    JournalError,
    KeyReusedError,
    MaskError,
    MissingWidgetError,
    NotFoundError,
    PermissionDeniedError,
    ProcessFailedError,
    RateLimitError,
    ResultTooLargeError,
    SelectionError,
    ServerError,
    UnknownItemError,
    UnknownToolError,
    UnknownWidgetError,
    UnprocessableEntityError,
    UploadError,
    V1MappingError,
    ValidationError,
    WaitTimeoutError,
)
from asyncsdk._journal import (
    Claim,
    Journal,
    PostgresJournal,
    RedisJournal,
    RunEntry,
    RunStage,
    SQLiteJournal,
)
from asyncsdk._keyed import RunSteps
from asyncsdk._limits import GenerationLimit
from asyncsdk._masks import (
    REMOVE_BLUE,
    check_image_size,
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
    MaskReport,
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
from asyncsdk._protocol.convert import structure
from asyncsdk._protocol.retry import RetryPolicy
from asyncsdk._resources import V1, Orders, Processes, Projects, ResultWaiter, Tools
from asyncsdk._settings import ClientSettings, Timeout
from asyncsdk._telemetry import PROCESS_ID_ATTRIBUTE, ClientTelemetry
from asyncsdk._uploads import ACCEPTED_EXTENSIONS, MAX_UPLOAD_BYTES, Upload, UploadSource

__version__ = "0.1.0"

__all__ = [
    "ACCEPTED_EXTENSIONS",
    "MAX_UPLOAD_BYTES",
    "PROCESS_ID_ATTRIBUTE",
    "REMOVE_BLUE",
    "V1",
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
    "Claim",
    "Client",
    "ClientSettings",
    "ClientTelemetry",
    "ConfigurationError",
    "CreatedOrder",
    "CreatedProcesses",
    "Feedback",
    "GenerationLimit",
    "InactiveError",
    "InputError",
    "Journal",
    "JournalError",
    "KeyReusedError",
    "MaskError",
    "MaskReport",
    "MissingWidgetError",
    "NotFoundError",
    "Order",
    "OrderProcess",
    "OrderStatus",
    "Orders",
    "Page",
    "Pagination",
    "PermissionDeniedError",
    "PostgresJournal",
    "PreparedProcess",
    "Process",
    "ProcessCompleted",
    "ProcessFailedError",
    "ProcessStatus",
    "Processes",
    "Project",
    "Projects",
    "RateLimitError",
    "RedisJournal",
    "ResultAsset",
    "ResultTooLargeError",
    "ResultWaiter",
    "RetryPolicy",
    "RunEntry",
    "RunStage",
    "RunSteps",
    "SQLiteJournal",
    "SelectionError",
    "ServerError",
    "Timeout",
    "Tool",
    "ToolSlug",
    "Tools",
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
    "check_image_size",
    "check_mask",
    "convert_white_mask",
    "mask_from_shapes",
    "structure",
    "translate_v1_submit",
    "v1_service_to_tool",
    "v1_space_to_item",
]


def _show_public_names() -> None:
    """Give every exported class (and function) ``asyncsdk`` as its module, so that tracebacks,
    reprs and the reference show the name users import (``asyncsdk.NotFoundError``).

    An attrs class first resolves its annotations, which are read in the module that defines it.
    """
    for name in __all__:
        value = globals()[name]
        if isinstance(value, type) and attrs.has(value):
            attrs.resolve_types(value)
        if isinstance(value, type | types.FunctionType):
            value.__module__ = __name__


_show_public_names()
