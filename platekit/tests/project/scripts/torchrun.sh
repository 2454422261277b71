#!/usr/bin/env bash
# Train with DDP under torchrun: NNODES nodes x NPROC processes each.
#
#   scripts/torchrun.sh NNODES NPROC [hydra overrides...]
#
# Run the same command on every node, with NODE_RANK set to 0..NNODES-1 and MASTER_ADDR set
# to node 0's address (the default, 127.0.0.1, is for all nodes on this machine):
#
#   NODE_RANK=0 MASTER_ADDR=10.0.0.1 RUN_NAME=exp1 scripts/torchrun.sh 2 8 trainer=ddp
#   NODE_RANK=1 MASTER_ADDR=10.0.0.1 RUN_NAME=exp1 scripts/torchrun.sh 2 8 trainer=ddp
#
# Environment (defaults in brackets):
#   NODE_RANK [0]            this node's rank
#   MASTER_ADDR [127.0.0.1]  node 0's address, MASTER_PORT [29500] a free port on it
#   RUN_NAME                 the run directory's name, the same on every node (outputs/train/
#                            runs/RUN_NAME); required with NNODES > 1, else the current time
#   RDZV_TIMEOUT [300]       seconds to wait for every node to join before giving up
#   OMP_NUM_THREADS          CPU threads per process [cores / NPROC, at least 1]
#   PYTHON [python]          the interpreter with the project installed (e.g. .venv/bin/python)
# trainer=ddp (GPUs) is used unless the overrides name a trainer, e.g. trainer=ddp_cpu.
set -euo pipefail

usage="usage: scripts/torchrun.sh NNODES NPROC [hydra overrides...]"
if [[ $# -lt 2 || ! $1 =~ ^[1-9][0-9]*$ || ! $2 =~ ^[1-9][0-9]*$ ]]; then
    echo "error: NNODES and NPROC must be positive integers; $usage" >&2
    exit 2
fi
nnodes=$1
nproc=$2
shift 2

if [[ $nnodes -gt 1 && -z ${RUN_NAME:-} ]]; then
    echo "error: RUN_NAME is not set; with $nnodes nodes set it to the same name on every node," \
        "e.g. RUN_NAME=exp1, so they share one run directory" >&2
    exit 2
fi
RUN_NAME=${RUN_NAME:-$(date +%Y-%m-%d_%H-%M-%S)}
export RUN_NAME

# torchrun sets one thread per process only when NPROC > 1; one process alone on a node
# would otherwise start a thread per core in every library and run many times slower.
cores=$(getconf _NPROCESSORS_ONLN)
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$((cores / nproc > 0 ? cores / nproc : 1))}

overrides=("$@")
if [[ " ${overrides[*]} " != *" trainer="* ]]; then
    overrides=("trainer=ddp" "${overrides[@]}")
fi

exec "${PYTHON:-python}" -m torch.distributed.run \
    --nnodes="$nnodes" \
    --nproc-per-node="$nproc" \
    --node-rank="${NODE_RANK:-0}" \
    --master-addr="${MASTER_ADDR:-127.0.0.1}" \
    --master-port="${MASTER_PORT:-29500}" \
    --rdzv-conf="timeout=${RDZV_TIMEOUT:-300}" \
    -m digits_classifier.train "${overrides[@]}"
