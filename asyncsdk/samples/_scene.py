"""The drawing kit of the sample photos: a room in one-point perspective and its fittings.

Plain Pillow drawing, no randomness.  The room is seen from its front: a back wall
(:data:`BACK`) with a vanishing point at eye height (:data:`VP`), walls, floor and ceiling around
it.  Points on each surface are addressed by fractions (``left_wall``, ``back_wall``,
``floor_point``), and windows, doors, planks and tiles are drawn onto those surfaces.
:mod:`asyncsdk.samples._make` composes the four scenes from these pieces.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from PIL import Image, ImageDraw

__all__ = [
    "BACK",
    "RGB",
    "SIZE",
    "VP",
    "H",
    "W",
    "back_wall",
    "back_window",
    "ceiling_light",
    "fill",
    "frame",
    "gradient",
    "left_wall",
    "left_window",
    "lerp",
    "mix",
    "planks",
    "right_door",
    "right_wall",
    "room",
    "tiles",
]

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
