"""One photo through one tool, step by step: upload, create the process, wait, download.

The steps are separate methods: the ``process`` command hands ``upload``, ``prepared`` and
``fetch`` to the library's journalled-run steps (``Client.run_steps``), which create, wait and
record each step in its state file, so that a second run resumes where the first stopped and
never pays twice for one photo; ``run`` takes every step in a row (``demo``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path

import attrs

from asyncsdk import (
    Asset,
    AssetRole,
    Catalogue,
    CatalogueCache,
    Client,
    PreparedProcess,
    Process,
    ProcessStatus,
    ResultWaiter,
    Upload,
    ValidationError,
    WidgetsArg,
    mask_from_shapes,
)
from asyncsdk.cli._results import download, result_name

__all__ = ["JobResult", "JobSpec", "Runner", "Steps"]

Rectangle = tuple[float, float, float, float]


@attrs.frozen(kw_only=True)
class JobSpec:
    """What to do: a photo, a tool, its widgets (short names welcome), and for the mask tool the
    rectangles to remove.  ``widgets_digest``, when set, goes into the result names."""

    photo: Path
    tool: str
    widgets: WidgetsArg | None = None
    label: str = ""
    mask_rectangles: tuple[Rectangle, ...] = ()
    output_stem: str = ""
    widgets_digest: str = ""

    @property
    def title(self) -> str:
        return self.label or self.photo.name

    @property
    def stem(self) -> str:
        """The start of the result file names (the photo's name unless told otherwise)."""
        return self.output_stem or self.photo.stem


@attrs.define(kw_only=True)
class JobResult:
    """How a job ended: ``status`` is the process status (``done``/``failed``), ``error`` when the
    job stopped before the process finished, or ``skipped`` when an earlier run did it."""

    spec: JobSpec
    status: str
    seconds: float = 0.0
    process_id: str = ""
    outputs: list[Path] = attrs.Factory(list)
    error: str = ""
    exit_code: int = 0


@attrs.define(kw_only=True)
class Steps:
    """The ids a job has collected so far."""

    order_id: str = ""
    assets: tuple[Asset, ...] = ()
    process_id: str = ""
    more_process_ids: tuple[str, ...] = ()
    """The others the creation made (one request may make several, each paid for)."""

    @property
    def process_ids(self) -> tuple[str, ...]:
        return (self.process_id, *self.more_process_ids) if self.process_id else ()


@attrs.define(kw_only=True)
class Runner:
    """Runs the steps of jobs with one client (its catalogue cache and its downloads)."""

    client: Client
    out_dir: Path
    registry: ResultWaiter | None = None
    timeout: float = 600.0
    project_id: str | None = None

    @property
    def cache(self) -> CatalogueCache:
        """The client's own catalogue cache, so the catalogue is fetched once per run."""
        return self.client.catalogue

    async def check(self, spec: JobSpec) -> tuple[str, list[dict[str, object]]]:
        """Check a job's tool and widgets against the catalogue before anything is paid for;
        returns the tool's slug and the widgets in wire form (full slugs)."""
        tool, _, widgets = await self._prepare(spec, None)
        return tool, widgets

    async def tool_slug(self, name: str) -> str:
        """The catalogue's slug of the active tool ``name`` (a slug, a short slug or a name)."""
        return Catalogue(tools=await self.cache.tools()).active_tool(name).slug

    async def _prepare(
        self, spec: JobSpec, assets: Sequence[Asset] | None
    ) -> tuple[str, dict[str, str], list[dict[str, object]]]:
        placeholder = None
        if assets is None:
            # Only the tool and widgets are checked here: stand-in asset ids fill the slots.
            placeholder = {"image": "check"}
            if spec.mask_rectangles:
                placeholder["mask"] = "check-mask"
        prepared = await self.client.processes.prepare(
            spec.tool, None, spec.widgets, inputs=placeholder, order_assets=assets
        )
        return prepared.tool, dict(prepared.asset_map), list(prepared.widgets_json())

    async def upload(self, spec: JobSpec, steps: Steps) -> None:
        """Upload the photo (and its mask) as a new order."""
        order = await self.client.orders.create(
            Upload(spec.photo, role=AssetRole.PRIMARY_ANGLE), project_id=self.project_id
        )
        assets = list(order.assets)
        if spec.mask_rectangles:
            mask = await asyncio.to_thread(
                mask_from_shapes, str(spec.photo), rectangles=spec.mask_rectangles
            )
            appended = await self.client.orders.append_mask(
                order.order_id,
                Upload(mask, role=AssetRole.MASK, filename=f"{spec.photo.stem}-mask.png"),
                project_id=self.project_id,
            )
            assets.extend(a for a in appended.assets if a.id not in {b.id for b in assets})
        steps.order_id = order.order_id
        steps.assets = tuple(assets)

    async def prepared(
        self, spec: JobSpec, order_id: str, assets: Sequence[Asset] = ()
    ) -> PreparedProcess:
        """The job's process request on its order (whose assets are read when not given)."""
        if not assets:
            assets = (await self.client.orders.get(order_id)).entry_assets
        return await self.client.processes.prepare(
            spec.tool, None, spec.widgets, order_assets=assets
        )

    async def create(self, spec: JobSpec, steps: Steps) -> None:
        """Create the process on the uploaded order (the step that costs money); when the answer
        is lost, the processes the order lists are adopted (``Processes.create_once``)."""
        if not steps.order_id:
            raise ValidationError("upload the photo before creating its process")
        prepared = await self.prepared(spec, steps.order_id, steps.assets)
        created = await self.client.processes.create_once(
            steps.order_id, prepared, sent_before=False
        )
        steps.process_id, *more = created.process_ids
        steps.more_process_ids = tuple(more)

    async def wait(self, steps: Steps) -> list[Process]:
        """Wait for the processes: by webhook when a registry is fed, else by polling.  When one
        wait fails, the others are stopped before the error is raised."""
        waits = [
            asyncio.ensure_future(
                self.client.processes.wait(pid, timeout=self.timeout, registry=self.registry)
            )
            for pid in steps.process_ids
        ]
        try:
            return list(await asyncio.gather(*waits))
        except BaseException:
            for wait in waits:
                wait.cancel()
            await asyncio.gather(*waits, return_exceptions=True)
            raise

    async def fetch(self, spec: JobSpec, processes: Sequence[Process]) -> list[Path]:
        """Download every result image of the finished processes into ``out_dir`` (numbered
        across them when there are several)."""
        results = [
            (process.tool or spec.tool, asset)
            for process in processes
            if process.succeeded
            for asset in process.final_assets
            if asset.src
        ]
        return [
            await download(
                self.client,
                asset.src,
                self.out_dir,
                result_name(spec.stem, tool, index, len(results), spec.widgets_digest),
            )
            for index, (tool, asset) in enumerate(results)
        ]

    async def run(self, spec: JobSpec) -> JobResult:
        """All the steps, one after the other; the result says how it went."""
        started = time.monotonic()
        steps = Steps()
        await self.upload(spec, steps)
        await self.create(spec, steps)
        processes = await self.wait(steps)
        outputs = await self.fetch(spec, processes)
        succeeded = all(process.succeeded for process in processes)
        return JobResult(
            spec=spec,
            status=ProcessStatus.DONE if succeeded else ProcessStatus.FAILED,
            seconds=time.monotonic() - started,
            process_id=steps.process_id,
            outputs=outputs,
            exit_code=0 if succeeded else 1,
        )
