#!/bin/bash
# Open MPI starts every rank; each rank reads OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK,
# _LOCAL_SIZE. -x passes the store's address, the secret and the interface to every rank.
set -euo pipefail
export DDP_SECRET="$(openssl rand -hex 32)"

mpirun -np 4 -H node01:2,node02:2 \
  -x MASTER_ADDR=node01 -x MASTER_PORT=29500 -x DDP_SECRET -x DDP_SOCKET_IFNAME=eth0 \
  node --import tsx train.ts --epochs 3
