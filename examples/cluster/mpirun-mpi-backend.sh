#!/bin/bash
# The 'mpi' backend: Open MPI carries every collective (its shared memory on a node, the
# cluster's interconnect between nodes). No store, secret or port: ranks come from
# MPI_COMM_WORLD. Needs @ddp/mpi built (apt-get install openmpi-bin libopenmpi-dev, then
# pnpm install). train.ts is unchanged (or passes { backend: 'mpi' } to initProcessGroup).
set -euo pipefail

mpirun -np 4 -H node01:2,node02:2 -x DDP_COMM_BACKEND=mpi \
  node --import tsx train.ts --epochs 3
