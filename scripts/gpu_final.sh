#!/usr/bin/env bash
# The last GPU run of a session: the GPU tests, the read benchmark, then a
# zstd fuzz whose killed-decoder cases join the corpus and are replayed.
set -u -o pipefail
bash scripts/gpu_check.sh tests read
checks=$?
echo "== fuzz zstd for the corpus"
mkdir -p "$OUT/fz"
timeout 150 python3 fuzz/gpu_fuzz.py --only zstd --cases 60 --jobs 14 --out "$OUT/fz" 2>&1 | tail -6
before=$(ls fuzz/gpu_corpus | wc -l)
python3 fuzz/make_gpu_corpus.py "$OUT/fz/failures.jsonl" --only-killed --max 8
ls fuzz/gpu_corpus | wc -l
timeout 120 python3 -m pytest -q -m gpu -p no:cacheprovider python/tests/test_gpu_safety.py -rfEx 2>&1 | tail -25
replayed=$?
tar -cf "$OUT/corpus.tar" fuzz/gpu_corpus
echo "corpus: $before files before"
((checks == 0 && replayed == 0))
