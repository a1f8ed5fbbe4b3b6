#!/usr/bin/env bash
# Packs what an offline GPU machine (the `device` tool's H100/H200, image 'cuda') needs to run scripts/gpu-check.sh,
# here, where pip can reach the registry. Run from anywhere; writes into the repo root:
#   .whl/          the wheels in scripts/gpu-wheels.txt, for Python 3.12 on x86-64 (deepspeed built as pure Python)
#   shared/data/   a copy of the data folder (GSM8K + the Qwen2.5 tokenizer + config; $GRPO_EDU_DATA, else ../shared/data)
# Both are ignored through .git/info/exclude: never commit them, and delete shared/ when the GPU work is done. It
# then prints the size that will travel (the device's limit is 64 MiB) and the device call to make, whose command is
# `bash scripts/gpu-device.sh STEPS` (it installs .whl/ there and brings the results back through $OUT).
set -euo pipefail
cd "$(dirname "$0")/.."
ex="$(git rev-parse --git-path info/exclude)"; mkdir -p "$(dirname "$ex")"
for p in /.whl/ /shared/; do grep -qxF "$p" "$ex" 2>/dev/null || echo "$p" >> "$ex"; done
src="${GRPO_EDU_DATA:-../shared/data}"
[[ -d $src/gsm8k && -d $src/qwen2.5-tokenizer ]] || { echo "gpu-pack: no data folder with gsm8k/ and qwen2.5-tokenizer/ at $src; set GRPO_EDU_DATA." >&2; exit 2; }
if [[ "$(cd "$src" && pwd -P)" != "$(mkdir -p shared/data && cd shared/data && pwd -P)" ]]; then
  rm -rf shared/data && mkdir -p shared && cp -r "$src" shared/data
fi
mkdir -p .whl
plat=(); for p in manylinux_2_28 manylinux_2_27 manylinux_2_24 manylinux_2_17 manylinux2014 manylinux1; do plat+=(--platform "${p}_x86_64"); done
mapfile -t pins < <(grep -v '^#' scripts/gpu-wheels.txt | grep -v '^deepspeed' | sed '/^$/d')
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp "${plat[@]}" -d .whl "${pins[@]}"
ds="$(grep '^deepspeed==' scripts/gpu-wheels.txt)"
ls .whl/deepspeed-* >/dev/null 2>&1 || DS_BUILD_OPS=0 python3 -m pip wheel -q --no-deps --no-build-isolation "$ds" -w .whl
n=$(grep -cv '^#\|^$' scripts/gpu-wheels.txt); have=$(ls .whl/*.whl | wc -l)
[[ $have -eq $n ]] || { echo "gpu-pack: .whl/ holds $have wheels, scripts/gpu-wheels.txt names $n: remove stale ones (one version of each, or the install stops)." >&2; exit 2; }
mib=$(( ($(git ls-files -z | du -cb --files0-from=- | tail -n1 | cut -f1) + $(du -sb .whl | cut -f1) + $(du -sb shared | cut -f1)) / 1048576 ))
echo "gpu-pack: $have wheels in .whl/, data in shared/data; about $mib MiB will travel (limit 64)."
(( mib < 64 )) || { echo "gpu-pack: over the device's 64 MiB limit; drop what the picked steps do not need." >&2; exit 2; }
cat <<'EOF'
device runs, each with carry [".whl"] (every call stops itself at 570 s and brings back what it wrote):
  1. BENCH_SHAPES=0.5b bash scripts/gpu-device.sh tests bench
  2. BENCH_SHAPES=1.5b bash scripts/gpu-device.sh bench
  3. copy the benchmark JSON that came back into benchmarks/results/ here (10_speed reads it), then
     bash scripts/gpu-device.sh notebooks
  4. bash scripts/gpu-device.sh recipes sharded
EOF
