"""README.md, the first page a user reads: at most 300 lines, and its install block runs as
pasted on a CPU-only machine (torch's CPU wheel index first)."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_the_readme_is_short_and_its_install_block_is_whole():
    text = README.read_text()
    assert len(text.splitlines()) <= 300
    block = re.search(r"## Install and quickstart.*?```\n(.*?)```", text, re.S).group(1)
    lines = block.strip().splitlines()
    assert lines[0] == "pip install torch --index-url https://download.pytorch.org/whl/cpu"
    assert lines[1].startswith("pip install -e . && python -m rlf.bin.train")
    assert "`.[suite]`" in text and "rlf.bin.compare" in text
