"""Draw the bundled sample photos: ``python scripts/draw_samples.py`` rewrites the JPEGs.

Plain Pillow drawing, no randomness: three empty rooms in one-point perspective (walls, floor,
ceiling, window, door) and a house front (sky, roof, facade, lawn).  Each is 640 x 427 pixels and
a few tens of kilobytes.  The JPEGs in ``asyncsdk/samples/`` are this script's output; run it
only when a drawing changes (``--out DIR`` writes elsewhere, to compare).

The room is seen from its front: a back wall (``BACK``) with a vanishing point at eye height
(``VP``), walls, floor and ceiling around it.  Points on each surface are addressed by fractions
(``left_wall``, ``back_wall``, ``floor_point``), and windows, doors, planks and tiles are drawn
onto those surfaces; the four scenes at the end compose these pieces.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

from PIL import Image, ImageDraw, ImageFilter

from asyncsdk import samples
from asyncsdk.samples import BOX_DRAWN, NAMES

SIZE: Final = (640, 427)
W, H = SIZE
RGB = tuple[int, int, int]
Point = tuple[float, float]

# One-point perspective: the back wall and the vanishing point (eye height).
BACK: Final = (190.0, 112.0, 450.0, 282.0)  # x0, y0, x1, y1
VP: Final = (320.0, 205.0)


def lerp(a: float, b: float, t: float) -> float:
    return a + (b - a) * t


def mix(a: RGB, b: RGB, t: float) -> RGB:
    return (round(lerp(a[0], b[0], t)), round(lerp(a[1], b[1], t)), round(lerp(a[2], b[2], t)))


def gradient(size: tuple[int, int], top: RGB, bottom: RGB, *, vertical: bool = True) -> Image.Image:
    """A linear gradient image (top to bottom, or left to right)."""
    w, h = size
    steps = h if vertical else w
    strip = Image.new("RGB", (1, steps) if vertical else (steps, 1))
    for i in range(steps):
        colour = mix(top, bottom, i / max(1, steps - 1))
        strip.putpixel((0, i) if vertical else (i, 0), colour)
    return strip.resize((w, h))


def fill(
    img: Image.Image, polygon: Sequence[Point], top: RGB, bottom: RGB, *, vertical: bool = True
) -> None:
    """Fill ``polygon`` with a gradient running over the whole canvas."""
    mask = Image.new("L", img.size, 0)
    ImageDraw.Draw(mask).polygon(list(polygon), fill=255)
    img.paste(gradient(img.size, top, bottom, vertical=vertical), (0, 0), mask)


def left_wall(x: float, f: float) -> Point:
    """A point of the left wall: ``x`` from 0 (near) to BACK[0] (far), ``f`` from ceiling (0) to
    floor (1)."""
    t = x / BACK[0]
    top = lerp(0, BACK[1], t)
    bottom = lerp(H, BACK[3], t)
    return (x, lerp(top, bottom, f))


def right_wall(x: float, f: float) -> Point:
    t = (W - x) / (W - BACK[2])
    top = lerp(0, BACK[1], t)
    bottom = lerp(H, BACK[3], t)
    return (x, lerp(top, bottom, f))


def back_wall(u: float, f: float) -> Point:
    """A point of the back wall, ``u`` from its left (0) to its right (1)."""
    return (lerp(BACK[0], BACK[2], u), lerp(BACK[1], BACK[3], f))


def floor_point(u: float, depth: float) -> Point:
    """A point of the floor: ``u`` across (0 left, 1 right) at ``depth`` 0 (back) to 1 (front)."""
    y = lerp(BACK[3], H, depth)
    spread = (y - VP[1]) / (BACK[3] - VP[1])
    x_back = lerp(BACK[0], BACK[2], u)
    return (VP[0] + (x_back - VP[0]) * spread, y)


def room(img: Image.Image, *, wall: RGB, floor: tuple[RGB, RGB], ceiling: RGB) -> None:
    x0, y0, x1, y1 = BACK
    dark = mix(wall, (0, 0, 0), 0.16)
    light = mix(wall, (255, 255, 255), 0.25)
    fill(img, [(0, 0), (W, 0), (x1, y0), (x0, y0)], mix(ceiling, (0, 0, 0), 0.1), ceiling)
    fill(img, [(0, 0), (x0, y0), (x0, y1), (0, H)], dark, wall, vertical=False)
    fill(img, [(W, 0), (x1, y0), (x1, y1), (W, H)], wall, light, vertical=False)
    fill(img, [(x0, y0), (x1, y0), (x1, y1), (x0, y1)], light, wall)
    fill(img, [(x0, y1), (x1, y1), (W, H), (0, H)], floor[0], floor[1])
    draw = ImageDraw.Draw(img)
    edge = mix(wall, (0, 0, 0), 0.3)
    for a, b in (
        ((0, 0), (x0, y0)),
        ((W, 0), (x1, y0)),
        ((x0, y0), (x0, y1)),
        ((x1, y0), (x1, y1)),
    ):
        draw.line([a, b], fill=edge, width=1)
    # Skirting boards along the floor edges.
    skirting = mix(wall, (255, 255, 255), 0.5)
    draw.polygon([(x0, y1 - 5), (x1, y1 - 5), (x1, y1), (x0, y1)], fill=skirting)
    draw.polygon([left_wall(0, 0.97), left_wall(x0, 0.97), (x0, y1), (0, H)], fill=skirting)
    draw.polygon([right_wall(W, 0.97), right_wall(x1, 0.97), (x1, y1), (W, H)], fill=skirting)


def floor_mask(size: tuple[int, int]) -> Image.Image:
    x0, _, x1, y1 = BACK
    mask = Image.new("L", size, 0)
    ImageDraw.Draw(mask).polygon([(x0, y1), (x1, y1), (W, H), (0, H)], fill=255)
    return mask


def planks(img: Image.Image, wood: RGB, seam: RGB, count: int = 14) -> None:
    """Boards running away from the viewer, each a slightly different shade of ``wood``, clipped
    to the floor."""
    layer = img.copy()
    draw = ImageDraw.Draw(layer)
    for i in range(-count, 2 * count):
        u0, u1 = i / count, (i + 1) / count
        board = [floor_point(u0, 0), floor_point(u1, 0), floor_point(u1, 1), floor_point(u0, 1)]
        shade = ((i * 7) % 5 - 2) * 0.035
        tone = mix(wood, (255, 255, 255) if shade > 0 else (0, 0, 0), abs(shade))
        draw.polygon(board, fill=tone)
        draw.line([floor_point(u0, 0), floor_point(u0, 1)], fill=seam, width=1)
    # Butt joints, staggered from board to board.
    for i in range(-count, 2 * count):
        u0, u1 = i / count, (i + 1) / count
        depth = 0.04 + ((i * 5) % 7) * 0.021
        while depth < 1:
            draw.line([floor_point(u0, depth), floor_point(u1, depth)], fill=seam, width=1)
            depth += 0.16 + depth * 0.5
    gradient_overlay(layer, img)
    img.paste(layer, (0, 0), floor_mask(img.size))


def gradient_overlay(layer: Image.Image, original: Image.Image) -> None:
    """Blend ``layer`` with the plain floor gradient under it, more at the far end, so that the
    boards keep the floor's light falloff."""
    shade = gradient(layer.size, (0, 0, 0), (255, 255, 255))
    dimmed = Image.blend(layer, original, 0.25)
    layer.paste(dimmed, (0, 0), shade.convert("L").point(lambda v: 255 - v // 2))


def tiles(img: Image.Image, colour: RGB, count: int = 8) -> None:
    layer = img.copy()
    draw = ImageDraw.Draw(layer)
    for i in range(-count, 2 * count + 1):
        u = i / count
        draw.line([floor_point(u, 0), floor_point(u, 1)], fill=colour, width=2)
    depth = 0.0
    step = 0.08
    while depth < 1:
        draw.line([floor_point(-1.5, depth), floor_point(2.5, depth)], fill=colour, width=2)
        depth += step
        step *= 1.45
    img.paste(layer, (0, 0), floor_mask(img.size))


def sky_pane(img: Image.Image, polygon: Sequence[Point]) -> None:
    """Sky seen through a window, with a band of far trees at the bottom."""
    fill(img, polygon, (120, 170, 225), (215, 232, 245))
    x0, y0, x1, y1 = bbox(polygon)
    mask = Image.new("L", img.size, 0)
    ImageDraw.Draw(mask).polygon(list(polygon), fill=255)
    layer = img.copy()
    ImageDraw.Draw(layer).rectangle((x0, y0 + (y1 - y0) * 0.78, x1, y1), fill=(96, 132, 88))
    img.paste(layer, (0, 0), mask)


def bbox(points: Sequence[Point]) -> tuple[float, float, float, float]:
    xs = [p[0] for p in points]
    ys = [p[1] for p in points]
    return (min(xs), min(ys), max(xs), max(ys))


def frame(img: Image.Image, quad: Sequence[Point], colour: RGB, *, mullions: bool = True) -> None:
    """Outline a window quad (tl, tr, br, bl) and draw its cross bars."""
    draw = ImageDraw.Draw(img)
    tl, tr, br, bl = quad
    draw.line([tl, tr, br, bl, tl], fill=colour, width=5)
    if mullions:
        top_mid = ((tl[0] + tr[0]) / 2, (tl[1] + tr[1]) / 2)
        bottom_mid = ((bl[0] + br[0]) / 2, (bl[1] + br[1]) / 2)
        left_mid = ((tl[0] + bl[0]) / 2, (tl[1] + bl[1]) / 2)
        right_mid = ((tr[0] + br[0]) / 2, (tr[1] + br[1]) / 2)
        draw.line([top_mid, bottom_mid], fill=colour, width=4)
        draw.line([left_mid, right_mid], fill=colour, width=3)


def back_window(img: Image.Image, u0: float, u1: float, f0: float, f1: float) -> None:
    quad = [back_wall(u0, f0), back_wall(u1, f0), back_wall(u1, f1), back_wall(u0, f1)]
    sky_pane(img, quad)
    frame(img, quad, (250, 250, 248))
    sill = [back_wall(u0 - 0.03, f1), back_wall(u1 + 0.03, f1)]
    ImageDraw.Draw(img).line(sill, fill=(240, 240, 236), width=5)


def left_window(img: Image.Image, x0: float, x1: float, f0: float, f1: float) -> None:
    quad = [left_wall(x0, f0), left_wall(x1, f0), left_wall(x1, f1), left_wall(x0, f1)]
    sky_pane(img, quad)
    frame(img, quad, (250, 250, 248))


def right_door(img: Image.Image, x0: float, x1: float, colour: RGB) -> None:
    quad = [
        right_wall(x0, 0.3),
        right_wall(x1, 0.3),
        right_wall(x1, 0.985),
        right_wall(x0, 0.985),
    ]
    draw = ImageDraw.Draw(img)
    draw.polygon(quad, fill=colour, outline=mix(colour, (0, 0, 0), 0.35))
    # Panels and a handle.
    for f0, f1 in ((0.36, 0.6), (0.66, 0.93)):
        panel = [
            right_wall(lerp(x0, x1, 0.2), f0),
            right_wall(lerp(x0, x1, 0.8), f0),
            right_wall(lerp(x0, x1, 0.8), f1),
            right_wall(lerp(x0, x1, 0.2), f1),
        ]
        draw.polygon(panel, outline=mix(colour, (0, 0, 0), 0.2))
    hx, hy = right_wall(lerp(x0, x1, 0.12), 0.64)
    draw.ellipse((hx - 3, hy - 3, hx + 3, hy + 3), fill=(190, 170, 90))


def ceiling_light(img: Image.Image) -> None:
    draw = ImageDraw.Draw(img)
    cx, cy = 320, 52
    draw.line([(cx, 0), (cx, cy - 10)], fill=(80, 80, 80), width=2)
    draw.ellipse((cx - 22, cy - 12, cx + 22, cy + 6), fill=(250, 246, 228), outline=(200, 196, 180))


# The four scenes.


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
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--out",
        type=Path,
        default=samples.folder(),
        help="the folder to write the JPEGs into (default: the package's samples folder)",
    )
    for path in draw_all(parser.parse_args().out):
        print(f"{path.name}: {path.stat().st_size} bytes")


if __name__ == "__main__":
    main()
