#!/usr/bin/env bash
# After the whole suite: the checkout is as committed. No tracked file changed or deleted, and no file
# that git does not track outside the outputs that the README documents:
#   .venv/               make's environment (`make demo`, `make test`)
#   labkit.egg-info/     pip's record of the editable install in .venv
#   demo.json demo/      `make demo`'s summary and its pictures
#   bench.json           `make bench`
#   test-artifacts/      what the tests keep for a person to look at (screenshots, logs)
#   site/                `make site`: the course as a website (site/html/) and Sphinx's caches
#   .pytest_cache/       pytest's own cache
#   .hypothesis/         hypothesis's database of examples (it replays a failing one on the next run)
#   .ruff_cache/ .mypy_cache/   the linter's and the type checker's caches (`make test` runs both)
#   __pycache__/         Python's bytecode, beside any module that ran
set -euo pipefail
cd "$(dirname "$0")/.."
allowed='^(\.venv/|labkit\.egg-info/|demo\.json|demo/|bench\.json|test-artifacts/|site/|\.pytest_cache/|\.hypothesis/|\.ruff_cache/|\.mypy_cache/|(.*/)?__pycache__/)$'
changed=$(git status --porcelain --untracked-files=no)
stray=$(git ls-files --others --directory | grep -Ev "$allowed" || true)
if [ -z "$changed" ] && [ -z "$stray" ]; then
    echo "check-tree: the checkout is as committed (outputs only in the documented places)"
    exit 0
fi
[ -z "$changed" ] || printf 'check-tree: tracked files changed by the run:\n%s\n' "$changed" >&2
[ -z "$stray" ] || printf 'check-tree: files left where no documented output goes:\n%s\n' "$stray" >&2
exit 1
