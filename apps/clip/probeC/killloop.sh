#!/bin/bash
# kill -9 a rank (or the launcher) at a random time, resume until done; compare with straight run
name=$1; who=$2; N=${3:-2}
A="--steps 30 --checkpoint-every 1 --eval-every 5"
cd /work/main/apps/clip
rm -rf /tmp/probeC-$name
for i in $(seq 1 8); do
  flag=""; [ -d /tmp/probeC-$name/ckpt ] && flag=--resume
  timeout 120 node --conditions=@ddp/source --import tsx ../../packages/launch/src/cli.ts --nproc-per-node $N src/train.ts --batch-size 24 --lr 3e-3 --eval-size 60 --seed 3 $A --out /tmp/probeC-$name --checkpoint-dir /tmp/probeC-$name/ckpt $flag > /tmp/probeC-$name.log.$i 2>&1 &
  L=$!
  sleep $(/usr/bin/python3 -c "import random;print(round(random.uniform(2.2,3.5),2))")
  if [ "$who" = launcher ]; then kill -9 $L; else R=$(pgrep -P $L | head -${who#rank} | tail -1); [ -n "$R" ] && kill -9 $R; fi
  wait $L; rc=$?
  sleep 1
  grep -h "resumed from\|Error\|final" /tmp/probeC-$name.log.$i | head -3 | cut -c1-200
  echo "iter $i rc=$rc latest=$(readlink /tmp/probeC-$name/ckpt/latest) rows=$(wc -l < /tmp/probeC-$name/metrics.jsonl 2>/dev/null)"
  grep -q final /tmp/probeC-$name.log.$i && break
done
