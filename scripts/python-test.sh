#!/usr/bin/env bash
# The Python package's test suite: a venv in build/venv-py with the oracles (torch 2.13.0 CPU,
# transformers, tokenizers, sentence-transformers, ray), `pip install .` of this checkout
# (warnings as errors), a wheel installed into a second, fresh venv and imported there, then
# pytest python/tests.
# The CLI tests use build/bert8 (scripts/test.sh builds it); they are skipped without it.
# The real-checkpoint tests use the models scripts/fetch-models.sh fetched (docs/models.md); they
# are skipped without them, unless BERT8_REAL_MODELS=required (as .ci/run sets).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=build/venv-py
# pip's warnings about the machine's extra local indexes are noise; failures still fail the script
pipq() { "$@" 2> >(grep -v '^WARNING: Location' >&2); }
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
# torch is pinned: an unpinned one would pull a multi-GB CUDA build
pipq "$venv/bin/pip" install -q --disable-pip-version-check torch==2.13.0 numpy pytest transformers tokenizers \
  sentence-transformers sentencepiece protobuf "ray[data]" scikit-build-core
# the package itself, built by scikit-build-core with the C warnings as errors
pipq "$venv/bin/pip" install -q --disable-pip-version-check --no-build-isolation . -C cmake.define.BERT8_WERROR=ON
"$venv/bin/python" -c "import bert8; print('bert8', bert8.__version__, bert8.Model('models/sst2-bert-mini').info['architecture'])"

# A wheel from a plain `pip wheel .` (isolated build environment, as from a fresh clone)
# installs into a fresh venv and imports there.
rm -rf build/wheel build/venv-wheel
pipq "$venv/bin/pip" wheel -q --disable-pip-version-check --no-deps -w build/wheel .
python3 -m venv build/venv-wheel
pipq build/venv-wheel/bin/pip install -q --disable-pip-version-check build/wheel/bert8-*.whl
(cd build && venv-wheel/bin/python -c "import bert8; print('wheel OK:', bert8.Model('../models/sst2-bert-mini'))")

export BERT8_CLI="${BERT8_CLI:-$PWD/build/bert8}"
exec nice "$venv/bin/python" -m pytest -q -p no:cacheprovider python/tests "$@"
