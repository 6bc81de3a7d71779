"""Runs every cell of the support matrix and writes its table into docs/support-matrix.md
(between the page's markers; the prose around them is kept).

    python -m tests.matrix.generate
"""

import tempfile
from pathlib import Path

from tests.matrix import cells


def main() -> None:
    import torch
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        table = cells.run_all(root)
        table = {n: {c: cells.normalized(o, root) for c, o in row.items()}
                 for n, row in table.items()}
    text = cells.PAGE.read_text()
    start, end = text.index(cells._BEGIN), text.index(cells._END) + len(cells._END)
    cells.PAGE.write_text(text[:start] + cells.render(table) + text[end:])
    print(f"wrote {cells.PAGE}")


if __name__ == "__main__":
    main()
