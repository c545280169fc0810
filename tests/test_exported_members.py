"""``asyncsdk.__all__`` is exactly the public surface: every listed name exists, none is missing."""

from __future__ import annotations

import subprocess
import sys
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
    # the resources: client.processes, .orders, .projects, .tools, .v1
    "Processes",
    "Orders",
    "Projects",
    "Tools",
    "V1",
    # keyed runs and their journal
    "Journal",
    "RunEntry",
    "RunStage",
    "RunSteps",
    "Claim",
    "SQLiteJournal",
    "PostgresJournal",
    "RedisJournal",
    # observability
    "ClientTelemetry",
    "PROCESS_ID_ATTRIBUTE",
    # uploads
    "Upload",
    "UploadSource",
    "MAX_UPLOAD_BYTES",
    "ACCEPTED_EXTENSIONS",
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
    "ResultTooLargeError",
    "WaitTimeoutError",
    "KeyReusedError",
    "JournalError",
    # the catalogue: checked process requests
    "Catalogue",
    "CatalogueCache",
    "CatalogueError",
    "UnknownToolError",
    "InactiveError",
    "UnknownWidgetError",
    "MissingWidgetError",
    "UnknownItemError",
    "SelectionError",
    "InputError",
    "PreparedProcess",
    "WidgetSelection",
    "WidgetsArg",
    # masks
    "check_image_size",
    "check_mask",
    "convert_white_mask",
    "mask_from_shapes",
    "MaskError",
    "MaskReport",
    "REMOVE_BLUE",
    # from V1 to V3
    "translate_v1_submit",
    "v1_service_to_tool",
    "v1_space_to_item",
    "V1MappingError",
    "V1Translation",
    "V1_ENDPOINTS",
    # decoding stored JSON into the models
    "structure",
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


def test_importing_the_package_does_not_import_pillow() -> None:
    """Pillow is optional (``asyncsdk[images]``): the mask helpers import it on first use."""
    code = "import sys, asyncsdk; assert 'PIL' not in sys.modules, sorted(sys.modules)"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
