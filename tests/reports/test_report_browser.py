"""report.html in a real browser: headless Chromium renders the scale_down report with no
console error, and the screenshot shows the timeline with the crash and the world 4 -> 3.

Needs /usr/bin/chromium (Debian: ``apt-get install -y chromium``); skipped without it."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import pytest

from elastic_sim.cli import main
from elastic_sim.reports.plots import COLORS, FAULT_COLOR

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")

pytestmark = [
    pytest.mark.skipif(not CHROMIUM.exists(), reason="headless Chromium not installed "
                       "(/usr/bin/chromium; Debian: apt-get install -y chromium)"),
    pytest.mark.slow,
]


def chromium(*args: str) -> subprocess.CompletedProcess[str]:
    """Run headless Chromium with a fresh profile and no network chatter."""
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run(
            [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
             "--no-first-run", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", f"--user-data-dir={profile}", "--enable-logging=stderr",
             "--v=0", *args],
            capture_output=True, text=True, timeout=120, check=False,
        )


def console_lines(stderr: str) -> list[str]:
    """What the page wrote to the console (messages and uncaught errors)."""
    return [ln for ln in stderr.splitlines() if ":CONSOLE" in ln or "Uncaught" in ln]


def test_console_scan_sees_a_page_error(tmp_path: Path) -> None:
    page = tmp_path / "bad.html"
    page.write_text("<html><body><script>undefinedFn();</script></body></html>")
    assert console_lines(chromium("--dump-dom", page.as_uri()).stderr)


def _share(rgba: object, color: str, tol: float = 0.08) -> float:
    import numpy as np

    px = np.asarray(rgba)[..., :3]
    rgb = np.array([int(color[i:i + 2], 16) / 255 for i in (1, 3, 5)])
    return float((np.abs(px - rgb) < tol).all(axis=-1).mean())


def test_scale_down_report_renders_without_console_errors_and_shows_the_crash(
    tmp_path: Path,
) -> None:
    from matplotlib.image import imread

    run = tmp_path / "run"
    assert main(["run", str(ROOT / "scenarios" / "scale_down.yaml"), "--out", str(run),
                 "-q"]) == 0
    url = (run / "report.html").as_uri()
    shot = tmp_path / "report.png"
    proc = chromium(f"--screenshot={shot}", "--window-size=1400,2000", url)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert console_lines(proc.stderr) == []

    dom = chromium("--dump-dom", url).stdout
    assert "<h1>scale_down" in dom and ">PASS: expectations met<" in dom
    assert ">job completed<" in dom
    assert "<b>4 → 3</b>" in dom  # the world-size fact
    assert dom.count('src="data:image/png;base64,') == 3  # timeline, world size, recovery
    assert "<td>crash-h3</td>" in dom

    # The screenshot's first screen holds the timeline: the crashed host's "down" band and
    # the red crash marks are painted (not a blank or broken image).
    top = imread(str(shot))[:1000]
    assert _share(top, COLORS["down"]) > 0.005
    assert _share(top, COLORS["training"]) > 0.02
    assert _share(top, FAULT_COLOR, tol=0.12) > 0.0002
