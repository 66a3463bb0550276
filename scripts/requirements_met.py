"""Whether a venv already has what pip would install: exit 0 when every requirement is installed at a
version it allows (the extras' own requirements too), else 1 naming the first that is not.

  python scripts/requirements_met.py REQ...              PEP 508 strings ("pip>=24")
  python scripts/requirements_met.py --project [EXTRAS]  pyproject.toml's dependencies (and those extras')

Set-up asks it before each pip run: a pip run that changes nothing still costs seconds here and
~20 s under emulation (the ARM64 leg), where set-up runs on every test command."""
from __future__ import annotations

import sys
from importlib import metadata

try:
    from packaging.requirements import Requirement
except ImportError:   # (a venv without packaging: pip's copy)
    from pip._vendor.packaging.requirements import Requirement


def missing(requirement: str, extra: str = "") -> str | None:
    """What is not met of `requirement`, or None."""
    req = Requirement(requirement)
    if req.marker is not None and not req.marker.evaluate({"extra": extra}):
        return None
    try:
        version = metadata.version(req.name)
    except metadata.PackageNotFoundError:
        return f"{req.name} is not installed"
    if req.specifier and not req.specifier.contains(version, prereleases=True):
        return f"{req.name} {version} is installed, {req.specifier} is asked for"
    for wanted in req.extras:
        for sub in metadata.requires(req.name) or []:
            sub_req = Requirement(sub)
            if sub_req.marker is not None and "extra" in str(sub_req.marker):
                problem = missing(sub, wanted) if sub_req.marker.evaluate({"extra": wanted}) else None
                if problem:
                    return f"{problem} (for {req.name}[{wanted}])"
    return None


def project_requirements(extras: str) -> list[str]:
    import tomllib
    with open("pyproject.toml", "rb") as f:
        project = tomllib.load(f)["project"]
    wanted = [e for e in extras.strip("[]").split(",") if e]
    return list(project["dependencies"]) + [r for e in wanted for r in project["optional-dependencies"][e]]


def main(argv: list[str]) -> int:
    requirements = project_requirements(argv[1] if len(argv) > 1 else "") if argv[:1] == ["--project"] else argv
    for requirement in requirements:
        problem = missing(requirement)
        if problem:
            print(problem)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
