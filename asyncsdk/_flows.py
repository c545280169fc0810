"""The one-call flows of a client: ``Client.run`` and ``Client.run_mask_removal``.

Each checks everything it can before the first upload (the request against the catalogue, the
mask against its photo), so a wrong request costs neither an upload nor a paid process; then it
waits for a place in the generation limit, so that no upload is made for a process that could not
be created yet (concurrent calls queue there, in arrival order), uploads, creates the process and
waits for it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence

import attrs

from asyncsdk._catalogue import PreparedProcess, WidgetsArg
from asyncsdk._checks import require_text
from asyncsdk._errors import APIDecodeError, ConfigurationError, NotFoundError, ValidationError
from asyncsdk._keyed import KeyedRuns, Uploaded, run_arguments
from asyncsdk._masks import ImageSource, Point, Rectangle, readable_photo, ready_mask
from asyncsdk._models import Asset, AssetRole, CreatedProcesses, Process, ToolSlug
from asyncsdk._resources import Orders, Processes, ResultWaiter
from asyncsdk._resources.generations import Generations
from asyncsdk._uploads import Upload, UploadSource, check_roles, to_upload

__all__ = ["Flows"]


@attrs.frozen
class Flows:
    """The flows over a client's processes and orders."""

    processes: Processes
    orders: Orders
    generations: Generations
    keyed: KeyedRuns | None = None
    """The keyed runs, over the client's journal (None without one)."""

    def _keyed_runs(self, key: str | None) -> KeyedRuns | None:
        """The keyed runs when ``key`` is given; a clear error when there is no journal."""
        if key is None:
            return None
        require_text(key, "key")
        if self.keyed is None:
            raise ConfigurationError(
                f"key={key!r} needs a journal to record the run in: create the client with "
                "Client(journal='runs.sqlite3') (or a PostgresJournal shared by several nodes)"
            )
        return self.keyed

    async def run(
        self,
        tool: str,
        images: Sequence[Upload | UploadSource],
        *,
        asset_map: Mapping[str, str | int] | None,
        widgets: WidgetsArg | None,
        project_id: str | None,
        timeout: float,
        registry: ResultWaiter | None,
        webhook_grace: float | None,
        validate: bool | None,
        key: str | None = None,
    ) -> Process:
        """:meth:`Client.run <asyncsdk.Client.run>`."""
        keyed = self._keyed_runs(key)
        require_text(tool, "tool")
        if not images:
            raise ValidationError("run() needs at least one image")
        if asset_map is None and tool.strip() == ToolSlug.ITEM_REMOVAL_MASK:
            raise ValidationError(
                f"{tool} needs a photo and a mask appended to its order: use "
                "client.run_mask_removal(image, mask=...) instead"
            )
        if asset_map is None and len(images) != 1:
            raise ValidationError(
                f"{tool} was given {len(images)} images: pass asset_map to say which image fills "
                f"which input slot, e.g. {{'{tool}-input-image': 0}}"
            )
        uploads = [to_upload(image) for image in images]
        check_roles(uploads)
        # Placeholder asset ids (the image indexes) let the request be checked before uploading.
        placeholders = {str(index) for index in range(len(uploads))}
        inputs: Mapping[str, str] | str
        given_ids: set[str] = set()
        if asset_map is None:
            inputs = "0"
        else:
            if not isinstance(asset_map, Mapping) or not asset_map:
                raise ValidationError(
                    f"asset_map must map input slots to indexes into images, e.g. "
                    f"{{'{tool}-input-image': 0}}, not {asset_map!r}"
                )
            slots: dict[str, str] = {}
            for slot, target in asset_map.items():
                if isinstance(target, bool) or not isinstance(target, int | str):
                    raise ValidationError(
                        f"asset_map[{slot!r}] must be an index into images or an asset id"
                    )
                if isinstance(target, int):
                    if not 0 <= target < len(images):
                        raise ValidationError(
                            f"asset_map[{slot!r}] = {target} is not an index of the "
                            f"{len(images)} images"
                        )
                    slots[slot] = str(target)
                    continue
                require_text(target, f"asset_map[{slot!r}]")
                if target in placeholders:
                    raise ValidationError(
                        f"asset_map[{slot!r}] = {target!r} reads as an image index: give the "
                        f"index as the int {int(target)}"
                    )
                given_ids.add(target)
                slots[slot] = target
            inputs = slots
        # Existing asset ids are not in the new order, so the order check is left to the service.
        stand_ins = tuple(
            Asset(id=str(index), asset_role=upload.role) for index, upload in enumerate(uploads)
        )
        prepared = await self.processes.prepare(
            tool,
            widgets=widgets,
            inputs=inputs,
            order_assets=None if given_ids else stand_ins,
            validate=validate,
        )

        async def upload() -> Uploaded:
            reserved = await self.generations.reserve()
            with self.generations.given_back_on_failure(reserved):
                order = await self.orders.create(*uploads, project_id=project_id)
                if len(order.assets) < len(uploads):
                    raise APIDecodeError(
                        f"order {order.order_id} lists {len(order.assets)} assets for "
                        f"{len(uploads)} uploaded images"
                    )
            ids = {str(index): order.assets[index].id for index in range(len(uploads))}
            ids.update((asset_id, asset_id) for asset_id in given_ids)
            return order.order_id, prepared.with_asset_ids(ids), reserved

        if keyed is not None and key is not None:
            arguments = await run_arguments("run", prepared, uploads, project_id=project_id)
            return await keyed.run(
                key,
                arguments,
                upload,
                None,
                timeout=timeout,
                registry=registry,
                webhook_grace=webhook_grace,
            )
        order_id, ready, reserved = await upload()
        return await self._create_and_wait(
            order_id,
            ready,
            None,
            reserved,
            timeout=timeout,
            registry=registry,
            webhook_grace=webhook_grace,
        )

    async def run_mask_removal(
        self,
        image: Upload | UploadSource,
        mask: ImageSource | None,
        *,
        rectangles: Iterable[Rectangle],
        polygons: Iterable[Sequence[Point]],
        project_id: str | None,
        after_auto_removal: str | CreatedProcesses | Process | None,
        convert_white: bool,
        check: bool,
        validate: bool | None,
        timeout: float,
        registry: ResultWaiter | None,
        webhook_grace: float | None,
        key: str | None = None,
    ) -> Process:
        """:meth:`Client.run_mask_removal <asyncsdk.Client.run_mask_removal>`."""
        keyed = self._keyed_runs(key)
        upload = to_upload(image)
        check_roles([upload])
        shapes = list(rectangles), [list(poly) for poly in polygons]
        if mask is not None and (shapes[0] or shapes[1]):
            raise ValidationError(
                "give the mask either as mask=... or as rectangles=/polygons=, not both"
            )
        if mask is None and not (shapes[0] or shapes[1]):
            raise ValidationError(
                "no mask given: pass mask=<path, bytes or PIL image> (blue #7878CD removes, "
                "black keeps) or rectangles=[(x0, y0, x1, y1)] / polygons=[[(x, y), ...]]"
            )
        photo = readable_photo(upload.source)
        if mask is None and photo is None:
            raise ValidationError(
                "rectangles=/polygons= need the photo's size, which cannot be read from a file "
                "object or stream: pass the photo as a path or bytes, or draw the mask yourself "
                "with mask_from_shapes((width, height), rectangles=...) and pass mask="
            )
        mask_upload = await asyncio.to_thread(
            ready_mask,
            mask,
            photo,
            rectangles=shapes[0],
            polygons=shapes[1],
            convert_white=convert_white,
            check=check,
        )
        tool = ToolSlug.ITEM_REMOVAL_MASK
        prepared = await self.processes.prepare(
            tool,
            inputs={"image": "0", "mask": "1"},
            order_assets=(
                Asset(id="0", asset_role=upload.role),
                Asset(id="1", asset_role=AssetRole.MASK, asset_type=AssetRole.MASK),
            ),
            validate=validate,
        )
        group_id = await self._removal_group(after_auto_removal)

        async def upload_both() -> Uploaded:
            reserved = await self.generations.reserve()
            with self.generations.given_back_on_failure(reserved):
                order = await self.orders.create(upload, project_id=project_id)
                if not order.assets:
                    raise APIDecodeError(
                        f"order {order.order_id} lists no asset for the uploaded photo"
                    )
                appended = await self.orders.append_mask(
                    order.order_id, mask_upload, project_id=project_id, check=False
                )
                photo_id = order.assets[0].id
                mask_id = await self._mask_id(order.order_id, photo_id, appended.assets)
            ids = {"0": photo_id, "1": mask_id}
            return order.order_id, prepared.with_asset_ids(ids), reserved

        if keyed is not None and key is not None:
            arguments = await run_arguments(
                "mask_removal",
                prepared,
                [upload, mask_upload],
                project_id=project_id,
                process_group_id=group_id,
            )
            return await keyed.run(
                key,
                arguments,
                upload_both,
                group_id,
                timeout=timeout,
                registry=registry,
                webhook_grace=webhook_grace,
            )
        order_id, ready, reserved = await upload_both()
        return await self._create_and_wait(
            order_id,
            ready,
            group_id,
            reserved,
            timeout=timeout,
            registry=registry,
            webhook_grace=webhook_grace,
        )

    async def _removal_group(self, after: str | CreatedProcesses | Process | None) -> str | None:
        """The ``process_group_id`` of a preceding automatic removal, or ``None``."""
        if after is None:
            return None
        if isinstance(after, CreatedProcesses | Process):
            if not after.process_group_id:
                raise ValidationError(
                    f"after_auto_removal={after!r} carries no process_group_id: pass the group "
                    "id the service returned when the automatic removal was created"
                )
            return after.process_group_id
        require_text(after, "after_auto_removal")
        try:
            process = await self.processes.get(after)
        except NotFoundError:
            return after  # not a process id: the group id itself, checked by the service
        if process.tool not in (ToolSlug.ITEM_REMOVAL, ToolSlug.ITEM_REMOVAL_MASK):
            raise ValidationError(
                f"after_auto_removal={after!r} is a {process.tool} process; give the process "
                f"or group id of a {ToolSlug.ITEM_REMOVAL} run"
            )
        if not process.process_group_id:
            raise ValidationError(
                f"process {after} carries no process_group_id: pass the group id the service "
                "returned when it was created (CreatedProcesses.process_group_id)"
            )
        return process.process_group_id

    async def _mask_id(self, order_id: str, photo_id: str, appended: Sequence[Asset]) -> str:
        """The id of the mask just appended: from the append answer, else from the order."""
        masks = [a for a in appended if a.asset_role == AssetRole.MASK and a.id != photo_id]
        if not masks and len(appended) == 1 and appended[0].id != photo_id:
            masks = list(appended)
        if not masks:
            entries = (await self.orders.get(order_id)).entry_assets
            masks = [a for a in entries if a.asset_role == AssetRole.MASK]
        if not masks:
            raise APIDecodeError(f"the mask appended to order {order_id} is not in the order")
        return masks[-1].id

    async def _create_and_wait(
        self,
        order_id: str,
        prepared: PreparedProcess,
        process_group_id: str | None,
        reserved: float | None,
        *,
        timeout: float,
        registry: ResultWaiter | None,
        webhook_grace: float | None,
    ) -> Process:
        # The place in the generation window was taken before the uploads.
        created = await self.processes.create_prepared(
            order_id, prepared, process_group_id=process_group_id, reserved=reserved
        )
        if not created.process_ids:
            raise APIDecodeError(
                f"creating a {prepared.tool} process on order {order_id} returned no id"
            )
        process = await self.processes.wait(
            created.process_ids[0],
            timeout=timeout,
            registry=registry,
            webhook_grace=webhook_grace,
        )
        if process.process_group_id is None and created.process_group_id:
            # A result by webhook carries no group id; the creation's answer did (an automatic
            # removal's, which run_mask_removal(after_auto_removal=...) takes).
            process = attrs.evolve(process, process_group_id=created.process_group_id)
        return process
