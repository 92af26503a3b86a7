"""The release's first check, before anything is built or uploaded (release.yml's `preflight` job,
which every publishing job needs): the settings docs/releasing.md makes once are in place.

- The environment `pypi` exists and has required reviewers: without it the forge creates it at the
  first publish, unprotected, and the upload runs unapproved. Read with the job's own token
  (`actions: read`) from GET /repos/{repository}/environments/pypi.
- The Actions variable IMAGE_REGISTRY is set (passed in by the workflow): without it the image job
  fails after the index took the files, a half release.

Environment: GITHUB_API_URL, GITHUB_REPOSITORY, GITHUB_TOKEN (the forge's), IMAGE_REGISTRY. Prints
one line per setting; exit 0 when all hold, 1 with each refusal on stderr otherwise."""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request
from typing import Any

ENVIRONMENT = "pypi"


def environment(api: str, repository: str, token: str) -> dict[str, Any] | None:
    """The environment as the forge describes it, or None when it has none of that name."""
    request = urllib.request.Request(
        f"{api}/repos/{repository}/environments/{ENVIRONMENT}",
        headers={
            "Accept": "application/vnd.github+json",
            "Authorization": f"Bearer {token}",
            "X-GitHub-Api-Version": "2022-11-28",
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            loaded = json.load(answer)
    except urllib.error.HTTPError as error:
        if error.code == 404:
            return None
        raise
    assert isinstance(loaded, dict)
    return loaded


def reviewers(described: dict[str, Any]) -> list[str]:
    """The required reviewers' names (users' logins, teams' slugs)."""
    found = []
    for rule in described.get("protection_rules", []):
        if rule.get("type") == "required_reviewers":
            for reviewer in rule.get("reviewers", []):
                who = reviewer.get("reviewer", {})
                found.append(str(who.get("login") or who.get("slug") or who.get("name") or "?"))
    return found


def refusals(described: dict[str, Any] | None, registry: str) -> list[str]:
    found = []
    if described is None:
        found.append(
            f"the environment `{ENVIRONMENT}` does not exist: the publish job would create it without "
            "reviewers and upload unapproved. Create it with required reviewers (docs/releasing.md)."
        )
    elif not reviewers(described):
        found.append(
            f"the environment `{ENVIRONMENT}` has no required reviewers: the publish job would upload "
            "unapproved. Add the maintainers as required reviewers (docs/releasing.md)."
        )
    if not registry.strip():
        found.append(
            "the Actions variable IMAGE_REGISTRY is unset: the image job would fail after the index "
            "took the files. Set it to the forge's container registry host (docs/releasing.md)."
        )
    return found


def main() -> int:
    api = os.environ.get("GITHUB_API_URL", "https://api.github.com").rstrip("/")
    described = environment(api, os.environ["GITHUB_REPOSITORY"], os.environ["GITHUB_TOKEN"])
    registry = os.environ.get("IMAGE_REGISTRY", "")
    refused = refusals(described, registry)
    for reason in refused:
        print(f"preflight: refused: {reason}", file=sys.stderr)
    if refused:
        print("preflight: nothing was built or uploaded", file=sys.stderr)
        return 1
    assert described is not None
    print(
        f"preflight: the environment `{ENVIRONMENT}` requires a review by {', '.join(reviewers(described))}"
    )
    print(f"preflight: IMAGE_REGISTRY is {registry}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
