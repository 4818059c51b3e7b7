"""The registry finds its entry points as ``importlib.metadata.entry_points(group=...)`` does, without
importing importlib.metadata (``segstore.registry._scan``), and leaves what it cannot read the same way
(zips, other distribution finders) to importlib.metadata."""

from __future__ import annotations

import importlib.metadata
import sys
import zipfile
from pathlib import Path

from segstore import registry


def _dist(root: Path, dirname: str, entry_points: str | None = None) -> None:
    info = root / dirname
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dirname.split('-')[0]}\nVersion: 1.0\n")
    if entry_points is not None:
        (info / "entry_points.txt").write_text(entry_points)


def _pairs(eps) -> list[tuple[str, str]]:
    return [(ep.name, ep.value) for ep in eps]


def test_scan_finds_what_importlib_metadata_finds(tmp_path, monkeypatch) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    _dist(a, "alpha-1.0.dist-info",
          "[segstore.formats]\nx = alpha.plugin:X\n# a comment\n\n[other]\ny = no:Y\n")
    _dist(a, "beta_pkg-2.0.dist-info", "[console_scripts]\nb = beta:main\n")      # other groups only
    _dist(a, "Gamma.Thing-1.0.egg-info", "  [segstore.formats]  \n  g =  gamma.plugin : G  \n")
    (a / "delta-1.0.egg-info").write_text("Metadata-Version: 1.0\nName: delta\n")    # a PKG-INFO file
    _dist(b, "alpha-0.9.dist-info", "[segstore.formats]\nold = alpha.old:X\n")    # shadowed by a's alpha
    _dist(b, "delta-2.0.dist-info", "[segstore.formats]\nd = delta:D\n")        # shadowed by a's file
    _dist(b, "gamma_thing-0.1.dist-info", "[segstore.formats]\nold = gamma.old:G\n")  # the same name
    _dist(b, "epsilon-1.0.dist-info", "[segstore.formats]\ne = eps:E\nf=eps.more:F\n")
    _dist(b, "zeta-1.0.dist-info")                                                 # no entry_points.txt
    monkeypatch.setattr(sys, "path", [str(a), str(tmp_path / "missing"), str(b)])
    scanned = registry._scan(registry.GROUP)
    assert scanned is not None
    assert _pairs(scanned) == _pairs(importlib.metadata.entry_points(group=registry.GROUP))
    assert sorted(_pairs(scanned)) == [("e", "eps:E"), ("f", "eps.more:F"), ("g", "gamma.plugin : G"),
                                       ("x", "alpha.plugin:X")]


def test_scan_of_this_environment_loads_the_same_plugins() -> None:
    scanned = registry._scan(registry.GROUP)
    assert scanned is not None
    listed = list(importlib.metadata.entry_points(group=registry.GROUP))
    assert _pairs(scanned) == _pairs(listed) and {"kafka", "rocketmq"} <= {ep.name for ep in scanned}
    for mine, theirs in zip(scanned, listed, strict=True):
        assert mine.load() is theirs.load()
        assert (mine.dist.name, mine.dist.version) == (theirs.dist.name, theirs.dist.version)


def test_zips_and_other_finders_are_left_to_importlib_metadata(tmp_path, monkeypatch) -> None:
    archive = tmp_path / "plugins.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("omega-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: omega\nVersion: 1\n")
        z.writestr("omega-1.0.dist-info/entry_points.txt", "[segstore.formats]\nomega = omega.plugin:O\n")
    monkeypatch.setattr(sys, "path", [str(archive)])
    assert registry._scan(registry.GROUP) is None
    monkeypatch.setattr(registry, "_entry_points", None)     # listed again, through importlib.metadata
    assert "omega" in registry.names()

    class Finder:   # a finder that knows distributions the path finder does not
        @staticmethod
        def find_distributions(context: object = None) -> list:
            return []

    monkeypatch.setattr(sys, "path", [str(tmp_path)])
    monkeypatch.setattr(sys, "meta_path", [*sys.meta_path, Finder])
    assert registry._scan(registry.GROUP) is None
