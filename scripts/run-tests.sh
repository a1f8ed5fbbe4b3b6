#!/usr/bin/env bash
# The README's test command, in four parts, each timed and naming what it runs:
#   1. every notebook top to bottom, its `#| slow` cells included, two at a time with one thread each;
#   2. the chapters again at another seed offset, as another machine would draw them: the offset changes with the
#      commit (a new draw for every change), and a run without git draws one at random; set
#      GRPO_EDU_SEED_OFFSET to repeat a run's draws;
#   3. pytest, two workers, with the reason of every skipped test;
#   4. TRL's own GRPO test file, unmodified, against grpo_edu (tests/trl_suite), with its count of outcomes;
# and then checks that the checkout holds the same files as before, ignored ones included (the tests write only to
# temporary folders). Any part that fails stops the run with its status.
set -euo pipefail
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=1
say() { printf '\n== %s\n' "$*"; }
took() { printf '== part %s took %d s\n' "$1" "$2"; }

if [ -n "${GRPO_EDU_SEED_OFFSET:-}" ]; then
    offset=$GRPO_EDU_SEED_OFFSET
    origin="as set"
elif commit=$(git rev-parse --short=8 HEAD 2>/dev/null); then
    offset=$(( 16#$commit % 1000000 ))
    origin="from commit $commit"
else
    offset=$(( $(od -An -N3 -tu4 /dev/urandom | tr -d ' ') % 1000000 ))
    origin="drawn at random"
fi
unset GRPO_EDU_SEED_OFFSET

# The checkout's files, ignored ones included, less what Python and pytest keep beside the code.
snapshot() {
    git status --porcelain --ignored --untracked-files=all 2>/dev/null \
        | grep -v -E '__pycache__|\.pytest_cache/|\.egg-info/|^!! "?\.venv' || true
}
before=$(snapshot)

say "1/4 every notebook, slow cells included (about 16 min on 2 cores)"
start=$SECONDS
nbdev-test --flags slow --do-print
took 1 $((SECONDS - start))

say "2/4 the chapters at GRPO_EDU_SEED_OFFSET=$offset ($origin; about 2 min on 2 cores)"
echo "   to repeat a failure: GRPO_EDU_SEED_OFFSET=$offset OMP_NUM_THREADS=1 nbdev-test nbs/NOTEBOOK.ipynb"
start=$SECONDS
GRPO_EDU_SEED_OFFSET=$offset nbdev-test --skip-folder-re "^(api|guides)$" --do-print
took 2 $((SECONDS - start))

say "3/4 pytest (about 11 min on 2 cores)"
start=$SECONDS
python -m pytest -q -rs -n 2 --dist loadfile tests --ignore=tests/trl_suite
took 3 $((SECONDS - start))

say "4/4 TRL's GRPO tests against grpo_edu (about 5 min on 2 cores)"
start=$SECONDS
python -m pytest -q -n 2 tests/trl_suite
took 4 $((SECONDS - start))

after=$(snapshot)
if [ "$before" != "$after" ]; then
    echo "== the tests changed the checkout (they must write only to temporary folders):"
    diff <(echo "$before") <(echo "$after") || true
    exit 1
fi
echo "== the checkout holds the same files as before the tests"
