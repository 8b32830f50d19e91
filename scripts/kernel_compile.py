"""Compile attnviz/stats_kernel.py's Triton kernel for an H100/H200 (sm_90) on a machine without a GPU.

Triton's interpreter (TRITON_INTERPRET=1, the CPU tests' way to run the kernel) executes it as Python, so it cannot see
what Triton's compiler refuses, nor what the compiled kernel is made of. Triton ships ptxas, so the whole compile runs
anywhere: this prints, for each variant asked, one JSON line with the binary's size, its SASS instruction count and
the counts of the instructions that tell where a tile's time may go (exponentials MUFU, barriers BAR, shuffles SHFL,
atomics REDG/ATOMG, matrix products HGMMA, registers spilled to local memory and read back STL/LDL), and with --sass
DIR writes each variant's SASS there.

This is no measurement of time: a lent GPU (scripts/gpu-check.sh) measures that. It is the check that a change to the
kernel compiles, made before that GPU, and a count to reason with.

Usage: python scripts/kernel_compile.py [--variants both,given,narrow] [--tiles "R,K,W,S;..."] [--sass DIR]
       [--kernel FILE]
(--tiles: each variant at each tile, e.g. --variants given-ieee --tiles "64,64,4,2;64,64,8,2", the sweep's shapes.)
(--kernel: another version of stats_kernel.py, e.g. `git show REV:attnviz/stats_kernel.py > FILE`, to compare.)
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
os.environ.pop("TRITON_INTERPRET", None)  # the real compiler, not the interpreter
sys.path.insert(0, str(ROOT))

BASE = {"CAUSAL": True, "HAS_SINK": False, "LSE_GIVEN": False, "PRECISION": "bf16", "BM": 64, "BN": 64, "D": 64,
        "NB1": 2, "PB1": 16, "DOT1": False, "NB2": 2, "PB2": 16, "DOT2": False, "POOLS": 2, "SKIP": 0}  # fmt: skip
VARIANTS = {
    "both": {},  # a decoder's long text: both passes, two pooled maps with cells a tile wide or more
    "given": {"LSE_GIVEN": True},  # the second pass alone, from the forward pass's normalisers
    "narrow": {"CAUSAL": False, "LSE_GIVEN": True, "NB1": 17, "PB1": 32, "DOT1": True, "NB2": 4},  # short, BERT-like
    "sinks": {"HAS_SINK": True},
    "both-ieee": {"PRECISION": "ieee"},
    "given-ieee": {"PRECISION": "ieee", "LSE_GIVEN": True},
    "given-tf32x3": {"PRECISION": "tf32x3", "LSE_GIVEN": True},
    "given-ieee-32": {"PRECISION": "ieee", "LSE_GIVEN": True, "BM": 32},  # 32 rows a program: fewer registers
    "given-k32": {"LSE_GIVEN": True},  # bf16 products from float32 keys, rounded as loaded (before 2026-12-01)
}
# LDL, STL: spills; LDG, LDGSTS: loads from global memory (LDGSTS: asynchronous copies); F2FP: float32 pairs to bf16
COUNTED = ("MUFU", "BAR", "SHFL", "REDG", "ATOMG", "HGMMA", "FFMA", "FADD", "FSEL", "LDL", "STL", "LDG", "LDGSTS")
COUNTED += ("F2FP",)


def compile_variant(name: str, sass_dir: Path | None, module=None, tile: str = "", align: bool = True) -> dict:
    """One variant's compile and counts; `tile` "R,K,W,S" (rows, keys, warps, stages, as ATTNVIZ_FUSED_TILES) replaces
    its rows and keys a program and the compile's warps and stages (else 4 warps, 2 stages)."""
    import triton
    from triton.backends.compiler import GPUTarget

    from attnviz import stats_kernel

    kernel = (module or stats_kernel)._stats_kernel
    bm, bn, warps, stages = (int(x) for x in tile.split(",")) if tile else (0, 0, 4, 2)
    shape = {"BM": bm, "BN": bn} if tile else {}
    wanted = {**BASE, **VARIANTS[name], **shape}
    const = {k: v for k, v in wanted.items() if k in kernel.arg_names}  # an older kernel has fewer
    types = {"CODES": "*i32", "scale": "fp32"}
    if wanted["PRECISION"] == "bf16" and not name.endswith("-k32"):  # layer_pass hands bf16 products bf16 keys
        types["K"] = "*bf16"
    signature = {
        arg: "constexpr" if arg in const else types.get(arg, "*fp32" if arg.isupper() else "i32")
        for arg in kernel.arg_names
    }
    started = time.perf_counter()
    # what a launch at the bench's 32,768 tokens specializes: each tensor's address and the token count and head size
    # multiples of 16 (Triton's JIT marks such arguments so); without it a bf16 tile's loads are not vectorized
    aligned = [i for i, arg in enumerate(kernel.arg_names) if signature[arg].startswith("*") or arg in ("n", "dh")]
    attrs = {(i,): [["tt.divisibility", 16]] for i in aligned} if align else {}
    source = triton.compiler.ASTSource(fn=kernel, signature=signature, constexprs=const, attrs=attrs)
    options = {"num_warps": warps, "num_stages": stages}
    binary = triton.compile(source, target=GPUTarget("cuda", 90, 32), options=options)
    seconds = time.perf_counter() - started
    cubin = binary.asm["cubin"]
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        nvdisasm = Path(triton.__file__).parent / "backends/nvidia/bin/nvdisasm"
        sass = subprocess.run([str(nvdisasm), "-c", f.name], capture_output=True, text=True, check=True).stdout
    ops: collections.Counter[str] = collections.Counter()
    for line in sass.splitlines():
        m = re.match(r"\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9_]+)", line)
        if m:
            ops[m.group(1)] += 1
    if sass_dir is not None:
        sass_dir.mkdir(parents=True, exist_ok=True)
        (sass_dir / f"{name}{'-' + tile.replace(',', 'x') if tile else ''}.sass").write_text(sass)
    return {
        "variant": name,
        **({"tile": tile} if tile else {}),
        **({} if align else {"aligned": False}),
        "name": binary.metadata.name,
        "elf": cubin[:4] == b"\x7fELF",
        "cubin_bytes": len(cubin),
        "instructions": sum(ops.values()),
        **{op: ops[op] for op in COUNTED},
        "compile_s": round(seconds, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variants", default="both,given,narrow", help=f"any of {', '.join(VARIANTS)}")
    parser.add_argument("--sass", type=Path, default=None, help="write each variant's SASS into this folder")
    parser.add_argument("--tiles", default="", help="R,K,W,S;...: each variant at each of these tiles (as the sweep's)")
    parser.add_argument("--kernel", type=Path, default=None, help="another stats_kernel.py to compile instead")
    parser.add_argument("--unaligned", action="store_true", help="no argument marked a multiple of 16 (before 12-01)")
    args = parser.parse_args()
    module = None
    if args.kernel is not None:
        spec = importlib.util.spec_from_file_location("other_stats_kernel", args.kernel)
        module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        spec.loader.exec_module(module)  # type: ignore[union-attr]
    for name in args.variants.split(","):
        for tile in args.tiles.split(";"):
            print(json.dumps(compile_variant(name, args.sass, module, tile.strip(), not args.unaligned)), flush=True)


if __name__ == "__main__":
    main()
