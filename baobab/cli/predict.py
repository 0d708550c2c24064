"""``baobab predict``: send queries (a JSON file, or images) to an inference job's predictor."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from baobab.cli._common import print_json, report
from baobab.exceptions import BaobabError
from baobab.sdk import Client

__all__ = ["image_query", "predict"]

# As the IMAGE_FILES reader decodes images (baobab.store): 1-bit as grayscale, palette as RGB.
_MODES = {"L": "L", "1": "L", "RGB": "RGB", "P": "RGB"}


def image_query(path: Path) -> list[Any]:
    """An image as the predictor expects it: rows of 0..255 ints (H x W grayscale, or H x W x 3 RGB).

    Raises:
        ValueError: not an image Pillow can read, or a mode other than grayscale or RGB.
    """
    from PIL import Image, UnidentifiedImageError  # only this option needs Pillow

    try:
        with Image.open(path) as image:
            image.load()
            mode = _MODES.get(image.mode)
            if mode is None:
                raise ValueError(f"{path}: the image has mode {image.mode}; use 8-bit grayscale (L) or RGB")
            converted = image if image.mode == mode else image.convert(mode)
            width, height, data = converted.width, converted.height, converted.tobytes()
    except (UnidentifiedImageError, OSError, SyntaxError) as e:
        raise ValueError(f"{path}: not a readable image: {e}") from None
    if mode == "L":
        return [list(data[row * width : (row + 1) * width]) for row in range(height)]
    pixels = [list(data[i : i + 3]) for i in range(0, len(data), 3)]
    return [pixels[row * width : (row + 1) * width] for row in range(height)]


def _queries_file(path: Path) -> list[Any]:
    try:
        queries = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise click.BadParameter(f"{path}: not a JSON file: {e}", param_hint="--queries") from None
    if not isinstance(queries, list) or not queries:
        raise click.BadParameter(f"{path}: must hold a non-empty JSON list of queries", param_hint="--queries")
    return queries


@click.command()
@click.option("--url", "predictor_url", required=True, metavar="URL", help="The predictor (see `baobab serve show`).")
@click.option("--api-key", help="The inference job's API key (not needed for a public job).")
@click.option(
    "--queries",
    "queries_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A JSON file holding a list of queries.",
)
@click.option(
    "--image",
    "images",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A PNG or JPEG image to classify (repeatable).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the predictor's JSON answer.")
def predict(
    predictor_url: str, api_key: str | None, queries_file: Path | None, images: tuple[Path, ...], as_json: bool
) -> None:
    """Send queries to a predictor and print one prediction per query."""
    if (queries_file is None) == (not images):
        raise click.UsageError("give --queries FILE.json or --image (one or more), not both")
    try:
        queries = _queries_file(queries_file) if queries_file is not None else [image_query(p) for p in images]
        with Client() as client:
            answer = client.predict(queries, predictor_url=predictor_url, api_key=api_key)
    except (BaobabError, OSError, ValueError) as e:
        report(e, None)
    if as_json:
        print_json(answer)
        return
    names = [str(p) for p in images] if images else [f"query {i}" for i in range(len(queries))]
    for name, prediction in zip(names, answer.get("predictions") or [], strict=False):
        click.echo(f"{name}: {json.dumps(prediction)}")
    for member in (answer.get("members") or {}).get("left_out") or []:
        click.echo(f"left out trial {member.get('trial_id')}: {member.get('reason')}", err=True)
