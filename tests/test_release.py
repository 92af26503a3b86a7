"""The release as CI and the forge make it: .ci/run's named steps are the forge's, the workflows are
pinned and hold no more rights than they use, .ci/dist refuses a tag that is not the version, and the
single file is the same bytes from any checkout. (.ci/run's dist step builds every artifact twice,
from two clean clones, and compares them.)"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]  # pyyaml: the test extra's

import patcher
from tests.helpers import checkout_copy

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = ROOT / ".github" / "workflows"
CI_STEP = re.compile(r"\.ci/run (\w+)")


def _workflow(name: str) -> dict[Any, Any]:
    """A workflow as YAML reads it (PyYAML reads the key `on` as True)."""
    loaded = yaml.safe_load((WORKFLOWS / name).read_text())
    assert isinstance(loaded, dict)
    return loaded


def _runs(workflow: dict[str, Any]) -> list[str]:
    return [step["run"] for job in workflow["jobs"].values() for step in job["steps"] if "run" in step]


def _ci_run_steps() -> list[str]:
    done = subprocess.run(["bash", ".ci/run", "--list"], cwd=ROOT, capture_output=True, text=True, check=True)
    return done.stdout.split()


def test_the_forges_ci_runs_the_steps_of_ci_run_and_ci_run_runs_them_all() -> None:
    """ci.yml's jobs call `.ci/run STEP`: together, every step .ci/run lists (by name, or within the
    merge tier's step, which runs some by name), and no other; .ci/run itself, run whole, calls each
    of them too ("$self" STEP), so the two cannot drift apart."""
    steps = _ci_run_steps()
    forge = [name for run in _runs(_workflow("ci.yml")) for name in CI_STEP.findall(run)]
    whole = (ROOT / ".ci" / "run").read_text()
    merge = re.search(r"^step_merge\(\) \{\n(.*?)^\}", whole, re.S | re.M)
    assert merge and "merge" in forge, "the forge runs the merge tier"
    assert sorted({*forge, *re.findall(r'"\$self" (\w+)', merge[1])}) == sorted(steps), (forge, steps)
    # (install is the first half of tests, the README's command, which the whole run calls.)
    assert sorted({*re.findall(r'"\$self" (\w+)', whole), "install"}) == sorted(steps)
    release = [name for run in _runs(_workflow("release.yml")) for name in CI_STEP.findall(run)]
    assert release and set(release) <= set(steps), release


def test_an_unknown_step_is_refused_by_name() -> None:
    done = subprocess.run(["bash", ".ci/run", "nosuch"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 2 and "no step nosuch" in done.stderr, done.stderr


def test_every_action_is_pinned_to_a_commit_with_its_version_beside_it() -> None:
    pins: dict[str, set[str]] = {}
    for path in sorted(WORKFLOWS.glob("*.yml")):
        for line in path.read_text().splitlines():
            if "uses:" not in line:
                continue
            match = re.fullmatch(r"\s*(?:- )?uses: ([\w.-]+/[\w.-]+)@([0-9a-f]{40})  # v\d+(\.\d+)*", line)
            assert match, f"{path.name}: {line.strip()}"
            pins.setdefault(match[1], set()).add(match[2])
    assert pins and all(len(shas) == 1 for shas in pins.values()), pins


def test_each_job_holds_only_the_rights_it_uses() -> None:
    """Read-only by default; an OIDC token in the publishing job alone, in its protected environment;
    no pull_request_target; no expression expanded inside a shell line."""
    ci, release = _workflow("ci.yml"), _workflow("release.yml")
    assert ci["permissions"] == {"contents": "read"}
    assert all("permissions" not in job for job in ci["jobs"].values())
    assert release["permissions"] == {}
    rights = {name: job["permissions"] for name, job in release["jobs"].items()}
    assert [name for name, granted in rights.items() if granted.get("id-token") == "write"] == ["publish"]
    assert release["jobs"]["publish"]["environment"] == "pypi"
    assert [name for name, granted in rights.items() if "write" in granted.values()] == [
        "publish",
        "forge-release",
        "image",
    ]
    for workflow in (ci, release):
        assert "pull_request_target" not in workflow[True]
        assert [run for run in _runs(workflow) if "${{" in run] == []


def test_the_release_publishes_attests_and_pushes_both_architectures() -> None:
    release = (WORKFLOWS / "release.yml").read_text()
    jobs = _workflow("release.yml")["jobs"]
    uses = [step.get("uses", "").split("@")[0] for job in jobs.values() for step in job["steps"]]
    assert {"pypa/gh-action-pypi-publish", "actions/attest-build-provenance"} <= set(uses)
    (push,) = [s["with"] for s in jobs["image"]["steps"] if s.get("uses", "").startswith("docker/build-push")]
    assert push["platforms"] == "linux/amd64,linux/arm64" and push["push"] is True
    assert push["provenance"] == "mode=max" and push["sbom"] is True and push["target"] == "torch-lazylog"
    assert "password:" not in release.replace("password: ${{ github.token }}", "")


def _repository_of(tmp_path: Path, tag: str) -> Path:
    """A clean clone as the release workflow has it: this checkout's tracked files, committed, tagged."""
    clone = checkout_copy(tmp_path / "clone")
    git = ["git", "-C", str(clone), "-c", "user.name=t", "-c", "user.email=t@t"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "release"], ["tag", tag]):
        subprocess.run([*git, *args], check=True, capture_output=True)
    return clone


def test_dist_refuses_a_tag_that_is_not_the_version_before_building(tmp_path: Path) -> None:
    clone = _repository_of(tmp_path, "v9.9.9")
    out = tmp_path / "out"
    done = subprocess.run(["bash", ".ci/dist", str(out)], cwd=clone, capture_output=True, text=True)
    assert done.returncode == 1, done.stdout + done.stderr
    assert (
        f"the tag v9.9.9 is not the version patcher/__version__ says (v{patcher.__version__})" in done.stderr
    )
    assert list(out.iterdir()) == []
    # The tag a release workflow runs for counts as well, on an untagged commit.
    subprocess.run(["git", "-C", str(clone), "tag", "-d", "v9.9.9"], check=True, capture_output=True)
    env = {**os.environ, "GITHUB_REF_TYPE": "tag", "GITHUB_REF_NAME": "v0.0.0"}
    done = subprocess.run(["bash", ".ci/dist", str(out)], cwd=clone, capture_output=True, text=True, env=env)
    assert done.returncode == 1 and "the tag v0.0.0 is not" in done.stderr, done.stderr


def _single_file(checkout: Path, out: Path, epoch: str | None) -> bytes:
    env = {k: v for k, v in os.environ.items() if k != "SOURCE_DATE_EPOCH"}
    env.update({"SOURCE_DATE_EPOCH": epoch} if epoch else {})
    subprocess.run(
        [sys.executable, "-B", "-m", "patcher.pyz", str(out)],
        cwd=checkout,
        env=env,
        check=True,
        capture_output=True,
    )
    return out.read_bytes()


def test_the_single_file_is_the_same_bytes_from_two_checkouts_built_apart(tmp_path: Path) -> None:
    """Two copies of this checkout, in different directories, their files of different times and modes:
    the same bytes, with SOURCE_DATE_EPOCH's time on every member (the earliest a zip holds without)."""
    first = checkout_copy(tmp_path / "one")
    second = checkout_copy(tmp_path / "two" / "deeper")
    later = time.time() + 3600
    for path in second.rglob("*.py"):
        os.utime(path, (later, later))
        path.chmod(0o664)
    for epoch in (None, "1764806400"):
        one = _single_file(first, tmp_path / "one.pyz", epoch)
        two = _single_file(second, tmp_path / "two.pyz", epoch)
        assert one == two
        with zipfile.ZipFile(tmp_path / "one.pyz") as archive:
            stamps = {member.date_time for member in archive.infolist()}
            modes = {member.external_attr >> 16 for member in archive.infolist()}
        assert stamps == {time.gmtime(int(epoch or 315532800))[:6]}, stamps
        assert modes == {0o100644, 0o40755}, modes
    assert (tmp_path / "one.pyz").stat().st_mode & 0o777 == 0o755


def test_the_tools_are_pinned_to_the_versions_the_index_served() -> None:
    """.ci/constraints.txt pins every tool CI installs for the release, each to one version."""
    pinned = dict(
        line.split("==")
        for line in (ROOT / ".ci" / "constraints.txt").read_text().splitlines()
        if line and not line.startswith("#")
    )
    assert {"click", "libcst", "setuptools", "build", "twine", "check-wheel-contents", "zizmor"} == set(
        pinned
    )
    assert all(re.fullmatch(r"\d+(\.\d+)+", version) for version in pinned.values()), pinned


def test_the_changelog_gives_this_versions_notes_and_the_readme_links_the_release_pages() -> None:
    """CHANGELOG.md (Keep a Changelog) has an entry for this version, which the release workflow's awk
    takes as the notes; the README links it and docs/releasing.md and says where releases appear."""
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert "keepachangelog.com" in changelog
    headings = re.findall(r"^## \[([^\]]+)\]", changelog, re.M)
    assert headings[0] in ("Unreleased", patcher.__version__) and patcher.__version__ in headings
    (notes,) = [run for run in _runs(_workflow("release.yml")) if "CHANGELOG.md" in run]
    awk = re.search(r"awk (.*) CHANGELOG.md", notes)
    assert awk
    taken = subprocess.run(
        ["bash", "-c", f"awk {awk[1]} CHANGELOG.md".replace('"$version"', patcher.__version__)],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    entry = changelog.split(f"## [{patcher.__version__}]")[1].split("\n## [")[0]
    assert taken.strip() and taken.strip() == entry.split("\n", 1)[1].strip()
    readme = (ROOT / "README.md").read_text()
    assert "(CHANGELOG.md)" in readme and "(docs/releasing.md)" in readme
    releasing = (ROOT / "docs" / "releasing.md").read_text()
    assert "sha256sum -c SHA256SUMS" in releasing and "gh attestation verify" in releasing
