"""``segstore.entrypoints`` lists what ``importlib.metadata.entry_points(group=...)`` lists.

``importlib.metadata`` is the reference: every case puts distributions on ``sys.path`` and compares
the two listings, and the loaded objects and the distributions' names and versions.
"""

from __future__ import annotations

import sys
import zipfile
from importlib.metadata import entry_points

import pytest

from segstore import entrypoints, registry

GROUP = "segstore.formats"


def _pairs(eps) -> list[tuple[str, str]]:
    return sorted((ep.name, ep.value) for ep in eps)


def _dist(root, dirname: str, entry_text: str | None, name: str, version: str) -> None:
    dist = root / dirname
    dist.mkdir(parents=True)
    (dist / ("METADATA" if dirname.endswith(".dist-info") else "PKG-INFO")).write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nSummary: x\n\nName: not-a-header\n")
    if entry_text is not None:
        (dist / "entry_points.txt").write_text(entry_text)


def test_the_installed_formats_are_importlibs() -> None:
    ours = entrypoints.group(GROUP)
    assert _pairs(ours) == _pairs(entry_points(group=GROUP))
    assert {ep.name for ep in ours} >= {"kafka", "rocketmq"}
    theirs = {ep.name: ep for ep in entry_points(group=GROUP)}
    for ep in ours:
        assert ep.load() == theirs[ep.name].load()
        dist = theirs[ep.name].dist
        assert ep.distribution == f"{dist.name} {dist.version}"
    assert [row.distribution for row in registry.available()] == [
        f"{theirs[n].dist.name} {theirs[n].dist.version}" for n in registry.names() if n in theirs]


def test_sections_comments_extras_and_the_first_distribution_of_a_name(tmp_path, monkeypatch) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    _dist(first, "my_plugin-1.0.dist-info", "# a comment\n; another\n[console_scripts]\nx = a:b\n\n"
          f"[{GROUP}]\n  one = json:dumps  \ntwo=os.path [extra1]\n"
          "three = collections:OrderedDict.fromkeys\n",
          "my-plugin", "1.0")
    # the same distribution (normalized name) later on sys.path: importlib.metadata ignores it
    _dist(second, "My.Plugin-2.0.dist-info", f"[{GROUP}]\nshadowed = json:loads\n", "My.Plugin", "2.0")
    _dist(second, "other-0.1-py3.11.egg-info", f"[{GROUP}]\nfour = json\n[other.group]\nfive = json\n",
          "other", "0.1")
    _dist(second, "bare-3.dist-info", None, "bare", "3")
    monkeypatch.setattr(sys, "path", [str(first), str(tmp_path / "missing"), str(second)])
    ours = entrypoints.group(GROUP)
    assert _pairs(ours) == _pairs(entry_points(group=GROUP))
    assert {ep.name for ep in ours} == {"one", "two", "three", "four"}
    theirs = {ep.name: ep for ep in entry_points(group=GROUP)}
    for ep in ours:
        assert ep.load() == theirs[ep.name].load()
        assert ep.distribution == f"{theirs[ep.name].dist.name} {theirs[ep.name].dist.version}"


def test_suffixes_in_any_case_and_runs_of_separators_in_names(tmp_path, monkeypatch) -> None:
    # the suffix is matched in any case; a name's runs of "-", "_" and "." normalize to one "_" (the second
    # directory's distribution is the first's again, shadowed); a directory of another suffix, and a file
    # that names the group in a value only, list nothing
    first, second = tmp_path / "first", tmp_path / "second"
    _dist(first, "Upper_Case..Name-1.0.DIST-INFO", f"[{GROUP}]\nupper = json:dumps\n", "Upper_Case..Name",
          "1.0")
    _dist(first, "Mixed-1.0.Egg-Info", f"[{GROUP}]\nmixed = json\n", "Mixed", "1.0")
    _dist(first, "mentions-1.0.dist-info", f"[other]\nx = {GROUP}:y\n", "mentions", "1.0")
    _dist(first, "backup-1.0.dist-info.bak", f"[{GROUP}]\nbackup = json\n", "backup", "1.0")
    _dist(second, "upper_case.name-2.0.dist-info", f"[{GROUP}]\nshadowed = json:loads\n", "upper-case.name",
          "2.0")
    monkeypatch.setattr(sys, "path", [str(first), str(second)])
    ours = entrypoints.group(GROUP)
    assert _pairs(ours) == _pairs(entry_points(group=GROUP)) == [("mixed", "json"), ("upper", "json:dumps")]


def test_a_zip_on_sys_path_hands_over_to_importlib(tmp_path, monkeypatch) -> None:
    archive = tmp_path / "plugins.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("zipped-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: zipped\nVersion: 1.0\n")
        z.writestr("zipped-1.0.dist-info/entry_points.txt", f"[{GROUP}]\nzipped = json:dumps\n")
    monkeypatch.setattr(sys, "path", [str(archive)])
    ours = entrypoints.group(GROUP)
    assert _pairs(ours) == [("zipped", "json:dumps")] == _pairs(entry_points(group=GROUP))


def test_a_bad_value_is_refused_when_loaded() -> None:
    with pytest.raises(ValueError, match="module:attr"):
        entrypoints.EntryPoint("x", "not a value!", GROUP, None).load()
    with pytest.raises(ImportError):
        entrypoints.EntryPoint("x", "no_such_module_here:thing", GROUP, None).load()
