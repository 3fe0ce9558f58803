"""Policy files a pull request changes: a change of the rules, not of the data.

A pull request's plan is judged by the base branch's policies (``planning.compose``), so
it cannot relax its own rules; but once merged, the relaxed rules judge every later pull
request, and a policy file that does not load stops every plan and run on the default
branch. So the plan of a pull request (``--base``) reports each policy file it adds,
changes or deletes as an error naming the file, as it does a Spark setting that is not
tuning: a maintainer reviews it and merges it knowingly, past the failed check. When
the pull request's policies do not load, that is an error too, at the file and line, so
the maintainer is not the one who finds out on main.
"""

from __future__ import annotations

from pathlib import Path

from ..config import RepoConfig
from ..gitloop import gitops
from ..plan.model import Location, Problem
from ..plan.policies import SCHEMA_SUFFIXES, PolicyError, load_policies

_VERBS = {"added": "adds", "modified": "changes", "deleted": "deletes"}


def policy_change_problems(config: RepoConfig, base_ref: str) -> list[Problem]:
    """An error for each policy file the working tree adds, changes or deletes since it
    branched from ``base_ref``, and one for a policies folder that no longer loads."""
    folder = config.policies_dir
    problems = []
    changed = gitops.changed_files(config.root, base_ref, folder)
    for status, path in sorted(changed, key=lambda change: change[1]):
        if len(path.parts) > 1 or not (
            path.suffix == ".yaml" or path.name.endswith(SCHEMA_SUFFIXES)
        ):
            continue  # a README beside the rules, or a subfolder, is not read as a policy
        file = folder / path
        done = f"{_VERBS[status]} the policy file {path}"
        if status != "deleted" and file.is_dir():
            # a git submodule (a gitlink) in its place: a folder, which no plan reads
            done = f"replaces the policy file {path} by a folder, whose rules no plan reads"
        problems.append(
            Problem(
                f"this pull request {done}: the policies"
                " judge every later pull request (this one is judged by the base's), so a"
                " change to them is a change of the rules: a maintainer reviews and merges"
                " it as such, since this plan cannot approve it",
                location=Location(str(file), None if status == "deleted" else 1),
                field="policies",
            )
        )
    if problems:
        problems += _load_problem(folder)
    return problems


def _load_problem(folder: Path) -> list[Problem]:
    try:
        load_policies(folder)
    except PolicyError as error:
        return [
            Problem(
                f"the policies as this pull request leaves them do not load: {e.message};"
                " once merged, every plan and run on the base branch would stop here",
                location=Location(str(e.file), e.line),
                field=f"policies.{e.policy}" if e.policy else "policies",
            )
            for e in error.each()
        ]
    return []
