#!/usr/bin/env bash
# Fill .whl/ with the wheels the lent GPU machine lacks for `bench/gpu_check.py`, and print
# their total size (the machine takes 64 MiB in all, the checkout included).
#
#     bash bench/gpu_wheels.sh          # here, with PyPI; then see bench/README.md
#
# That machine (Python 3.12, no network) already holds torch, torchvision, numpy, pillow,
# opencv-python-headless, scipy, requests, typer, click, tqdm, safetensors, cloudpickle,
# and huggingface_hub (the device notes' package list): opencv (61 MB) and
# scipy (35 MB) alone would not fit in 64 MiB, so gpu_check.py names any of those it misses
# instead. Carried: LibreYOLO and the small dependencies it lacks, runspec's own dependencies
# at the versions the tests pass with, and runspec itself, built from this checkout.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python3}
LIMIT_MIB=60 # 64 MiB for everything that travels; about 2 MiB is the checkout

WHEELS=(
    # LibreYOLO, and what it imports that the machine lacks (pycocotools for COCO-style
    # validation, mss for screen sources: small, declared, never worth a failed run).
    libreyolo==1.6.0 pycocotools==2.0.11 mss==10.2.0
    # runspec's dependencies. pyyaml, psutil and typing-extensions are on the machine too, but
    # runspec's YAML 1.2 loader leans on PyYAML internals and referencing wants a recent
    # typing-extensions: carry the tested versions (newer typing-extensions serves torch as
    # well).
    pyyaml==6.0.4 psutil==7.2.2 typing-extensions==4.16.0
    jsonschema==4.26.0 referencing==0.37.0 rpds-py==2026.9.1 attrs==26.1.0
    jsonschema-specifications==2025.9.1
    apscheduler==3.11.3 tzlocal==5.4.5 watchdog==7.1.0
)

rm -rf .whl
mkdir -p .whl
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform manylinux_2_12_x86_64 --platform manylinux2010_x86_64 \
    --platform manylinux_2_5_x86_64 --platform manylinux1_x86_64 \
    -d .whl "${WHEELS[@]}"
# runspec from this checkout: pure Python, so the wheel built here serves Python 3.12.
"$PY" -m pip wheel -q --no-deps -w .whl .

ls -l .whl/*.whl | awk '{printf "%8.2f MiB  %s\n", $5 / 1048576, $9}'
total=$(du -cb .whl/*.whl | tail -1 | cut -f1)
awk -v t="$total" 'BEGIN {printf "total: %.2f MiB in %s\n", t / 1048576, ".whl/"}'
if ((total > LIMIT_MIB * 1048576)); then
    echo "over ${LIMIT_MIB} MiB: it will not travel with the checkout" >&2
    exit 1
fi
