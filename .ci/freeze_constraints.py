"""Print constraints.txt: the exact installed version of every package dgm[dev] pulls in.

`pip freeze` filtered to the dependency closure of the project (runtime and dev extras),
read from the installed packages' metadata, so unrelated packages of the machine stay out.
Run after `pip install -e '.[dev]'`:  python .ci/freeze_constraints.py > constraints.txt
"""

from __future__ import annotations

import sys
from importlib import metadata

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

PROJECT = "dgm"
EXTRAS = ("dev",)


def closure(project: str, extras: tuple[str, ...]) -> dict[str, str]:
    """canonical name -> installed version, for everything `project[extras]` requires."""
    found: dict[str, str] = {}
    todo = [(project, extras)]
    seen: set[tuple[str, tuple[str, ...]]] = set()
    while todo:
        name, wanted = todo.pop()
        if (name, wanted) in seen:
            continue
        seen.add((name, wanted))
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue  # an optional dependency that is not installed here
        if canonicalize_name(name) != canonicalize_name(project):
            found[canonicalize_name(dist.metadata["Name"])] = dist.version
        for text in dist.requires or []:
            requirement = Requirement(text)
            environments = [{"extra": extra} for extra in ("", *wanted)]
            if requirement.marker is None or any(
                requirement.marker.evaluate(env) for env in environments
            ):
                todo.append((requirement.name, tuple(sorted(requirement.extras))))
    return found


def main() -> int:
    pinned = closure(PROJECT, EXTRAS)
    print(f"# Exact versions of {PROJECT}[{','.join(EXTRAS)}]'s dependency closure, as tested.")
    print("# Regenerate: pip install -e '.[dev]'")
    print("#             python .ci/freeze_constraints.py > constraints.txt")
    for name, version in sorted(pinned.items()):
        print(f"{name}=={version}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
