#!/bin/bash
# usage: run.sh NPROC NAME args...
n=$1; name=$2; shift 2
cd /work/main/apps/clip
timeout 120 node --conditions=@ddp/source --import tsx ../../packages/launch/src/cli.ts --nproc-per-node $n src/train.ts --steps 6 --batch-size 24 --lr 3e-3 --checkpoint-every 3 --eval-every 3 --eval-size 60 --seed 3 --out /tmp/probeC-$name --checkpoint-dir /tmp/probeC-$name/ckpt "$@" 2>&1 | grep -v "native kernels\|step .*/.*|" 
echo "rc=${PIPESTATUS[0]}"
