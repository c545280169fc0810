"""Draw the bundled sample photos: ``python -m asyncsdk.samples._make`` rewrites the JPEGs.

Plain Pillow drawing, no randomness: three empty rooms in one-point perspective (walls, floor,
ceiling, window, door) and a house front (sky, roof, facade, lawn), composed from the drawing kit
in :mod:`asyncsdk.samples._scene`.  Each is 640 x 427 pixels and a few tens of kilobytes.  The
committed JPEGs are the output of this script.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Final

from PIL import Image, ImageDraw, ImageFilter

from asyncsdk.samples import BOX_DRAWN, NAMES
from asyncsdk.samples._scene import (
    BACK,
    SIZE,
    H,
    W,
    back_wall,
    back_window,
    ceiling_light,
    fill,
    frame,
    gradient,
    left_wall,
    left_window,
    lerp,
    mix,
    planks,
    right_door,
    right_wall,
    room,
    tiles,
)

__all__ = ["DRAWINGS", "SIZE", "draw_all", "main"]


def bedroom() -> Image.Image:
    """An empty bedroom: warm walls, carpet, a window on the back wall, a door on the right."""
    img = Image.new("RGB", SIZE)
    room(
        img, wall=(226, 214, 196), floor=((178, 166, 150), (150, 136, 120)), ceiling=(246, 244, 240)
    )
    back_window(img, 0.3, 0.7, 0.2, 0.62)
    right_door(img, 505, 585, (244, 242, 236))
    ceiling_light(img)
    return img


def living_room() -> Image.Image:
    """An empty living room: oak floor, two windows on the left wall, a window at the back."""
    img = Image.new("RGB", SIZE)
    room(img, wall=(218, 224, 228), floor=((168, 124, 82), (128, 88, 54)), ceiling=(248, 248, 248))
    planks(img, (128, 88, 54), (110, 76, 46))
    left_window(img, 25, 85, 0.2, 0.7)
    left_window(img, 110, 160, 0.2, 0.7)
    back_window(img, 0.22, 0.78, 0.18, 0.66)
    right_door(img, 510, 590, (236, 236, 236))
    ceiling_light(img)
    return img


def kitchen() -> Image.Image:
    """A kitchen: cabinets and worktop along the back wall, a window above the sink, tiled floor,
    and a cardboard box left on the floor (the item the demo removes)."""
    img = Image.new("RGB", SIZE)
    room(
        img, wall=(236, 232, 222), floor=((210, 210, 206), (176, 176, 172)), ceiling=(250, 250, 250)
    )
    tiles(img, (150, 150, 146))
    back_window(img, 0.36, 0.64, 0.18, 0.5)
    draw = ImageDraw.Draw(img)
    cabinet = (72, 96, 112)
    cabinet_edge = (48, 66, 78)
    worktop = (226, 222, 214)
    # Lower cabinets on the back wall and the worktop.
    lower = [back_wall(0, 0.66), back_wall(1, 0.66), back_wall(1, 0.97), back_wall(0, 0.97)]
    draw.polygon(lower, fill=cabinet, outline=cabinet_edge)
    for i in range(1, 6):
        draw.line([back_wall(i / 6, 0.68), back_wall(i / 6, 0.97)], fill=cabinet_edge, width=2)
    for i in range(6):
        hx, hy = back_wall((i + 0.5) / 6, 0.72)
        draw.line([(hx - 6, hy), (hx + 6, hy)], fill=(200, 200, 200), width=2)
    draw.polygon(
        [
            back_wall(-0.02, 0.62),
            back_wall(1.02, 0.62),
            back_wall(1.02, 0.67),
            back_wall(-0.02, 0.67),
        ],
        fill=worktop,
        outline=(180, 176, 168),
    )
    # Sink under the window.
    sx0, sy = back_wall(0.4, 0.625)
    sx1, _ = back_wall(0.6, 0.625)
    draw.rectangle((sx0, sy, sx1, sy + 4), fill=(170, 174, 178))
    draw.line([((sx0 + sx1) / 2, sy - 14), ((sx0 + sx1) / 2, sy)], fill=(150, 150, 155), width=3)
    # Upper cabinets either side of the window.
    for u0, u1 in ((0.0, 0.3), (0.7, 1.0)):
        upper = [
            back_wall(u0, 0.1),
            back_wall(u1, 0.1),
            back_wall(u1, 0.42),
            back_wall(u0, 0.42),
        ]
        draw.polygon(upper, fill=cabinet, outline=cabinet_edge)
        draw.line(
            [back_wall((u0 + u1) / 2, 0.1), back_wall((u0 + u1) / 2, 0.42)],
            fill=cabinet_edge,
            width=2,
        )
    # Lower cabinets running along the left wall, with their worktop.
    side = [
        left_wall(40, 0.66),
        left_wall(BACK[0], 0.66),
        left_wall(BACK[0], 0.97),
        left_wall(40, 0.97),
    ]
    draw.polygon(side, fill=mix(cabinet, (0, 0, 0), 0.15), outline=cabinet_edge)
    for x in (80, 120, 155):
        draw.line([left_wall(x, 0.68), left_wall(x, 0.97)], fill=cabinet_edge, width=2)
    top_side = [
        left_wall(40, 0.61),
        left_wall(BACK[0], 0.61),
        left_wall(BACK[0], 0.67),
        left_wall(40, 0.67),
    ]
    draw.polygon(top_side, fill=worktop, outline=(180, 176, 168))
    # A tall fridge against the right wall.
    fridge = [
        right_wall(470, 0.08),
        right_wall(540, 0.08),
        right_wall(540, 0.985),
        right_wall(470, 0.985),
    ]
    draw.polygon(fridge, fill=(214, 218, 222), outline=(150, 154, 160))
    draw.line([right_wall(470, 0.4), right_wall(540, 0.4)], fill=(150, 154, 160), width=2)
    hx, hy = right_wall(480, 0.3)
    draw.line([(hx, hy - 18), (hx, hy + 18)], fill=(120, 124, 130), width=3)
    ceiling_light(img)
    # The cardboard box on the floor.
    x0, y0, x1, y1 = BOX_DRAWN
    draw.polygon([(x0, y0 + 16), (x1 - 20, y0 + 16), (x1 - 20, y1), (x0, y1)], fill=(176, 132, 84))
    draw.polygon([(x1 - 20, y0 + 16), (x1, y0), (x1, y1 - 14), (x1 - 20, y1)], fill=(146, 106, 64))
    draw.polygon([(x0, y0 + 16), (x0 + 20, y0), (x1, y0), (x1 - 20, y0 + 16)], fill=(198, 156, 106))
    mid = (x0 + x1 - 20) / 2
    draw.line([(mid, y0 + 16), (mid, y1)], fill=(214, 196, 150), width=6)
    draw.line([(mid, y0 + 16), (mid + 20, y0)], fill=(214, 196, 150), width=6)
    return img


def exterior() -> Image.Image:
    """A detached house by day: sky with clouds, gabled roof, facade, windows, door, lawn, trees."""
    img = gradient(SIZE, (92, 146, 214), (206, 226, 244))
    clouds = Image.new("L", SIZE, 0)
    cdraw = ImageDraw.Draw(clouds)
    for box in (
        (40, 40, 170, 80),
        (90, 25, 200, 70),
        (420, 55, 560, 95),
        (470, 35, 590, 80),
        (300, 20, 380, 45),
    ):
        cdraw.ellipse(box, fill=220)
    clouds = clouds.filter(ImageFilter.GaussianBlur(6))
    img.paste(Image.new("RGB", SIZE, (252, 252, 252)), (0, 0), clouds)
    draw = ImageDraw.Draw(img)
    # Distant hedge line and lawn.
    draw.rectangle((0, 300, W, 330), fill=(84, 120, 70))
    lawn = gradient((W, H - 330), (112, 168, 78), (74, 128, 52))
    img.paste(lawn, (0, 330))
    for y in range(338, H, 14):
        draw.line([(0, y), (W, y)], fill=(98, 154, 68), width=3)
    # Trees either side.
    for cx, top in ((70, 150), (585, 170)):
        draw.rectangle((cx - 8, 260, cx + 8, 345), fill=(92, 66, 44))
        draw.ellipse((cx - 55, top, cx + 55, top + 140), fill=(58, 104, 52))
        draw.ellipse((cx - 38, top - 20, cx + 38, top + 70), fill=(70, 120, 60))
    # The house: facade, siding, roof and chimney.
    fx0, fy0, fx1, fy1 = 150, 180, 490, 345
    draw.rectangle((fx0, fy0, fx1, fy1), fill=(236, 228, 210))
    for y in range(fy0 + 8, fy1, 9):
        draw.line([(fx0, y), (fx1, y)], fill=(216, 206, 186), width=1)
    draw.rectangle((fx0 - 5, fy1 - 10, fx1 + 5, fy1), fill=(150, 140, 130))
    draw.rectangle((400, 70, 428, 140), fill=(140, 74, 60))
    draw.rectangle((396, 64, 432, 72), fill=(110, 60, 50))
    roof = [(fx0 - 28, fy0 + 4), (fx1 + 28, fy0 + 4), (fx1 - 60, 92), (fx0 + 60, 92)]
    draw.polygon(roof, fill=(74, 78, 92))
    for i in range(1, 8):
        roof_y = lerp(92, fy0 + 4, i / 8)
        x_left = lerp(fx0 + 60, fx0 - 28, i / 8)
        x_right = lerp(fx1 - 60, fx1 + 28, i / 8)
        draw.line([(x_left, roof_y), (x_right, roof_y)], fill=(60, 64, 76), width=1)
    # A gable with a round window.
    draw.polygon(
        [(250, fy0 + 4), (390, fy0 + 4), (320, 112)], fill=(226, 218, 200), outline=(200, 190, 172)
    )
    draw.ellipse((306, 140, 334, 168), fill=(150, 190, 228), outline=(255, 255, 255), width=3)

    def window(x0: float, y0: float, x1: float, y1: float) -> None:
        pane = [(x0, y0), (x1, y0), (x1, y1), (x0, y1)]
        fill(img, pane, (150, 196, 236), (96, 132, 170))
        frame(img, pane, (255, 255, 255))
        wdraw = ImageDraw.Draw(img)
        wdraw.rectangle((x0 - 8, y0, x0 - 2, y1), fill=(60, 86, 110))
        wdraw.rectangle((x1 + 2, y0, x1 + 8, y1), fill=(60, 86, 110))
        wdraw.rectangle((x0 - 4, y1, x1 + 4, y1 + 5), fill=(250, 250, 250))

    for x0 in (185, 400):
        window(x0, 200, x0 + 55, 250)
        window(x0, 272, x0 + 55, 318)
    # Front door with a small porch roof and steps.
    draw.rectangle((296, 250, 344, 335), fill=(128, 36, 40), outline=(90, 24, 28))
    draw.rectangle((302, 258, 338, 290), outline=(100, 28, 32), width=2)
    draw.rectangle((302, 298, 338, 328), outline=(100, 28, 32), width=2)
    draw.ellipse((333, 292, 339, 298), fill=(214, 186, 90))
    draw.polygon([(282, 246), (358, 246), (346, 232), (294, 232)], fill=(74, 78, 92))
    draw.rectangle((286, 335, 354, 341), fill=(190, 186, 180))
    draw.rectangle((280, 341, 360, 347), fill=(176, 172, 166))
    # The path to the door, and shrubs along the facade.
    draw.polygon([(300, 347), (340, 347), (380, H), (260, H)], fill=(196, 188, 176))
    for cx in (180, 225, 265, 375, 415, 460):
        draw.ellipse((cx - 22, 318, cx + 22, 352), fill=(52, 98, 48))
    return img


#: File name -> drawing function.
DRAWINGS: Final[dict[str, Callable[[], Image.Image]]] = dict(
    zip(NAMES, (bedroom, living_room, kitchen, exterior), strict=True)
)


def draw_all(folder: Path) -> list[Path]:
    """Write every sample JPEG into ``folder``; returns their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, draw in DRAWINGS.items():
        path = folder / name
        draw().save(path, "JPEG", quality=84, optimize=True)
        written.append(path)
    return written


def main() -> None:
    for path in draw_all(Path(__file__).resolve().parent):
        print(f"{path.name}: {path.stat().st_size} bytes")


if __name__ == "__main__":
    main()
