"""Suite aggregates with confidence intervals (rliable) against hand-computed point
estimates, and ``rlf.bin.compare`` on a tiny real suite and its table with higher scores."""

import csv
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("rliable")

from rlf.bin.suite_aggregates import score_matrix  # noqa: E402
from rlf.utils.aggregates import (aggregate_estimates, per_game_estimates,  # noqa: E402
                                  probability_of_improvement)
from rlf.utils.atari_scores import human_normalized_score  # noqa: E402
from rlf.utils.dopamine_scores import DOPAMINE_SCORES, dopamine_matrix  # noqa: E402
from rlf.utils.errors import UserError  # noqa: E402
from tests.test_suite import REPO, _suite  # noqa: E402


def test_aggregates_by_hand_and_their_intervals_contain_them():
    # 2 runs x 4 games: the IQM trims the lowest and highest quarter of the 8 scores.
    x = np.array([[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0]])
    est = aggregate_estimates({"x": x}, reps=500)["x"]
    assert est["IQM"][0] == pytest.approx((2 + 3 + 4 + 5) / 4)
    assert est["median"][0] == pytest.approx(3.5) and est["mean"][0] == pytest.approx(3.5)
    assert est["optimality_gap"][0] == pytest.approx(1 / 8)  # only the 0 is below 1
    for point, lo, hi in est.values():
        assert lo <= point <= hi
    assert est["mean"][1] < est["mean"][2]  # a real interval over the runs
    assert aggregate_estimates({"x": x}, reps=500) == aggregate_estimates({"x": x}, reps=500)
    games = per_game_estimates({"Pong": [10.0, 20.0, 30.0], "Breakout": [5.0]}, reps=500)
    assert games["Pong"][0] == pytest.approx(20.0) and games["Pong"][1] < 20 < games["Pong"][2]
    assert games["Breakout"] == (5.0, 5.0, 5.0)
    better = probability_of_improvement(x + 10, x, reps=500)
    assert better == (1.0, 1.0, 1.0)
    assert probability_of_improvement(x, x, reps=500)[0] == pytest.approx(0.5)


def test_uneven_seeds_and_unknown_games_are_refused():
    rows = [dict(game="Pong", seed=0, score_last_10pct=1.0),
            dict(game="Pong", seed=1, score_last_10pct=2.0),
            dict(game="Breakout", seed=0, score_last_10pct=3.0)]
    with pytest.raises(UserError, match="aggregates need every game with the same seeds"):
        score_matrix(rows)
    games, seeds, m = score_matrix(rows[:1] + rows[2:])
    assert games == ["Pong", "Breakout"] and seeds == [0]
    assert m.tolist() == [[human_normalized_score("Pong", 1.0),
                           human_normalized_score("Breakout", 3.0)]]
    with pytest.raises(UserError, match="no human-normalised score for NoSuchGame"):
        score_matrix([dict(game="NoSuchGame", seed=0, score_last_10pct=1.0)])


def test_dopamine_reference_scores_by_hand():
    # The five seeds' means over frames 9-10M, as the per-game table of docs/results.md
    # quotes them (DQN / Rainbow): Pong -4.9 / 15.2, Breakout 21.5 / 41.9, BeamRider
    # 869 / 5,983, Qbert 1,658 / 5,354, SpaceInvaders 663 / 744.
    means = {(a, g): float(np.mean(v)) for a, t in DOPAMINE_SCORES.items() for g, v in t.items()}
    expected = {("DQN", "Pong"): -4.9256, ("Rainbow", "Pong"): 15.1998,
                ("DQN", "Breakout"): 21.4831, ("Rainbow", "Breakout"): 41.8974,
                ("DQN", "BeamRider"): 869.3071, ("Rainbow", "BeamRider"): 5982.5814,
                ("DQN", "Qbert"): 1658.4078, ("Rainbow", "Qbert"): 5353.8659,
                ("DQN", "SpaceInvaders"): 663.3366, ("Rainbow", "SpaceInvaders"): 743.655}
    assert means == pytest.approx(expected, abs=1e-4)
    assert all(len(v) == 5 for t in DOPAMINE_SCORES.values() for v in t.values())
    m = dopamine_matrix("Rainbow", ["Breakout", "Pong"])
    assert m.shape == (5, 2)
    assert m[:, 0].mean() == pytest.approx((41.8974 - 1.7) / (30.5 - 1.7), abs=1e-5)
    assert m[:, 1].mean() == pytest.approx((15.1998 + 20.7) / (14.6 + 20.7), abs=1e-5)
    assert dopamine_matrix("DQN", ["Pong", "Alien"]) is None  # no Dopamine values for Alien


def test_tiny_suites_write_aggregates_and_compare(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    r = _suite(a)
    assert r.returncode == 0, r.stderr
    # b: the same runs scoring one more point each (compare reads a suite's results.csv)
    with open(a / "results.csv") as f:
        rows = list(csv.DictReader(f))
    for row in rows:
        for key in ("score", "score_last_10pct"):
            row[key] = str(float(row[key]) + 1.0)
        row["human_normalized"] = str(human_normalized_score("Breakout", float(row["score"])))
    b.mkdir()
    with open(b / "results.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    content = json.loads((a / "aggregates.json").read_text())
    assert content["games"] == ["Breakout"] and content["seeds"] == [0, 1]
    iqm = content["aggregates"]["impala_atari_sync"]["IQM"]
    assert iqm[1] <= iqm[0] <= iqm[2]
    md = (a / "aggregates.md").read_text()
    assert "| Breakout |" in md and "| impala_atari_sync | 2 x 1 |" in md
    # Dopamine's reference rows, the same aggregates of its 5 seeds on the suite's games.
    rainbow = content["aggregates"]["Dopamine Rainbow"]
    assert rainbow["mean"][0] == pytest.approx((41.8974 - 1.7) / (30.5 - 1.7), abs=1e-5)
    assert rainbow["mean"][1] <= rainbow["mean"][0] <= rainbow["mean"][2]
    assert "| Dopamine DQN | 5 x 1 |" in md and "| Dopamine Rainbow | 5 x 1 |" in md
    assert "google/dopamine" in md and "not the same budget" in md
    assert (a / "performance_profile.png").read_bytes()[:4] == b"\x89PNG"
    out = tmp_path / "cmp"
    r = subprocess.run([sys.executable, "-m", "rlf.bin.compare", str(a), str(b), "--out",
                        str(out), "--reps", "500"], cwd=REPO, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    lines = (out / "compare.md").read_text().splitlines()
    assert lines[2].endswith(f"| P(suite > {a}) |")
    assert lines[4].startswith(f"| {a} | 2 x 1 |") and lines[4].endswith("|  |")
    assert lines[5].startswith(f"| {b} | 2 x 1 |") and "[" in lines[5].rsplit("|", 2)[1]
    assert (out / "performance_profile.png").is_file()
    for args, message in (([str(a)], "give at least two suite directories"),
                          ([str(a), str(tmp_path)], f"{tmp_path} holds no results.csv"),
                          ([str(a), str(a)], "a suite directory is given twice")):
        r = subprocess.run([sys.executable, "-m", "rlf.bin.compare", *args], cwd=REPO,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 2 and message in r.stderr and len(r.stderr.splitlines()) == 1, (
            r.stderr)


def test_a_method_has_one_colour_in_both_plots(tmp_path):
    # The interval plot draws the first method in the top row, in the colour-blind palette's
    # first colour (the colour of the first method's profile line), the last method in the
    # bottom row in the second; the profile draws both colours.
    import matplotlib.colors
    import matplotlib.image
    import seaborn

    from rlf.utils.aggregates import plot_interval_estimates, plot_performance_profiles
    scores = {"first": np.array([[0.2, 0.9], [0.3, 1.1]]),
              "second": np.array([[0.5, 0.4], [0.7, 0.2]])}
    plot_interval_estimates(aggregate_estimates(scores, reps=200), tmp_path / "agg.png")
    plot_performance_profiles(scores, tmp_path / "profile.png", reps=200)
    palette = np.array(seaborn.color_palette("colorblind", n_colors=2))

    def palette_index_by_row(image):
        # Bars and bands are drawn translucent: match the hue of saturated pixels.
        hsv = matplotlib.colors.rgb_to_hsv(matplotlib.image.imread(image)[..., :3])
        hues = matplotlib.colors.rgb_to_hsv(palette)[:, 0]
        near = (np.abs(hsv[..., :1] - hues) < 0.02) & (hsv[..., 1:2] > 0.3)
        rows = np.nonzero(near.any(axis=(1, 2)))[0]
        return [int(np.argmax(near[r].sum(axis=0))) for r in rows]

    top_row_colours = palette_index_by_row(tmp_path / "agg.png")
    assert top_row_colours[0] == 0 and top_row_colours[-1] == 1
    assert set(palette_index_by_row(tmp_path / "profile.png")) == {0, 1}


SUITES = (("suite_det", "| rlf IMPALA | 3 x 2 | 1.394 [1.312, 1.462] |",
           "| Dopamine Rainbow | 5 x 2 | 1.193 [1.154, 1.244] |"),
          ("suite5", "| rlf IMPALA | 3 x 5 | 0.484 [0.460, 0.511] |",
           "| Dopamine Rainbow | 5 x 5 | 0.591 [0.563, 0.629] |"))


@pytest.mark.parametrize("suite,rlf_row,rainbow_row", SUITES, ids=[s[0] for s in SUITES])
def test_the_documented_headline_is_what_the_suites_aggregates_give(tmp_path, suite, rlf_row,
                                                                     rainbow_row):
    # docs/data/<suite>/results.csv: the runs of the aggregates docs/results.md quotes (the
    # five-game suite and the Pong and Breakout one); the suite's own code gives the table
    # and the plots of the home and results pages.
    import shutil
    repo = Path(__file__).resolve().parents[1]
    shutil.copy(repo / "docs" / "data" / suite / "results.csv", tmp_path)
    r = subprocess.run([sys.executable, "-m", "rlf.bin.suite_aggregates", "--root_dir",
                        str(tmp_path), "--label", "rlf IMPALA"], cwd=repo,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    table = (tmp_path / "aggregates.md").read_text()
    assert rlf_row in table and rainbow_row in table
    assert table == (repo / "docs" / "data" / suite / "aggregates.md").read_text()
    for image in ("aggregates.png", "performance_profile.png"):
        assert (tmp_path / image).read_bytes()[:4] == b"\x89PNG"
