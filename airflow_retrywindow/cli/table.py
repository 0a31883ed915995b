"""Fixed-width text tables for the command line."""

from __future__ import annotations


def render_table(headers: list[str], rows: list[list[str]], *, right: frozenset[int]) -> list[str]:
    """Lay out ``rows`` under ``headers`` in columns two spaces apart.

    :param headers: the column titles.
    :param rows: the cells, one list per row, as many cells as headers.
    :param right: positions of the columns to align right (numbers and times).
    """
    widths = [max(len(cell) for cell in column) for column in zip(headers, *rows, strict=True)]
    lines = []
    for cells in [headers, *rows]:
        padded = [
            cell.rjust(width) if index in right else cell.ljust(width)
            for index, (cell, width) in enumerate(zip(cells, widths, strict=True))
        ]
        lines.append("  ".join(padded).rstrip())
    return lines
