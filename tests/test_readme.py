"""README.md, the first page a user reads: at most 300 lines, its install block runs as pasted
on a CPU-only machine (torch's CPU wheel index first, the same line on every page), and its
first run is a short one that works."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
TORCH = "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu"


def test_the_readme_is_short_and_its_install_block_is_whole():
    text = README.read_text()
    assert len(text.splitlines()) <= 300
    block = re.search(r"## Install and quickstart.*?```\n(.*?)```", text, re.S).group(1)
    lines = block.strip().splitlines()
    assert lines[0] == TORCH
    # a short first run, then the main job
    assert lines[1] == "pip install -e . && python -m rlf.bin.train --conf confs/ppo_cartpole.gin"
    assert lines[2] == "python -m rlf.bin.train --conf confs/impala_atari.gin"
    assert "`.[suite]`" in text and "rlf.bin.compare" in text


def test_one_torch_install_line_everywhere():
    docs = README.parent / "docs"
    for page in (README, docs / "index.md", docs / "getting-started.md"):
        installs = re.findall(r"^pip install torch.*$", page.read_text(), re.M)
        assert installs == [TORCH], (page, installs)


def test_the_readmes_first_run_starts_as_written(tmp_path):
    # the quickstart's second line (its 100k steps take about a minute: two iterations here)
    import subprocess
    import sys
    block = re.search(r"## Install and quickstart.*?```\n(.*?)```", README.read_text(),
                      re.S).group(1)
    command = block.splitlines()[1].split(" && ", 1)[1].split()
    r = subprocess.run([sys.executable, *command[1:], "--root_dir", str(tmp_path / "run"),
                        "--noprogress", "--conf_param", "TrainerConfig.num_env_steps=512"],
                       cwd=README.parent, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.splitlines()[-1].startswith("finished: "), r.stdout[-2000:]
