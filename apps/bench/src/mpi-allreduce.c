/*
 * `pnpm bench comm`'s Open MPI peer: MPI_Allreduce (sum, float32, in place) over the sizes
 * in argv[1] (bytes, comma-separated), with comm.ts's iteration rule and warm-up (3× the timed loop); rank 0
 * prints one `SAMPLE {"bytes":…,"us":…}` line per size. Built by the bench with mpicc,
 * run by mpirun.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int iters_for(long bytes) {
  double n = 128.0 * 1024 * 1024 / (double)bytes + 0.5;
  return n < 3 ? 3 : n > 10000 ? 10000 : (int)n;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  char *sizes = strdup(argc > 1 ? argv[1] : "4096");
  /* the process warms up before the sweep, as comm.ts's ranks do: 50 000 all-reduces of 4 KiB */
  float warm[1024] = {0};
  for (int i = 0; i < 50000; i++) MPI_Allreduce(MPI_IN_PLACE, warm, 1024, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  for (char *tok = strtok(sizes, ","); tok; tok = strtok(NULL, ",")) {
    long bytes = atol(tok);
    int count = (int)(bytes / 4), n = iters_for(bytes);
    float *buf = malloc((size_t)bytes);
    for (int i = 0; i < count; i++) buf[i] = 1.0f;
    for (int i = 0; i < 3 * n; i++) MPI_Allreduce(MPI_IN_PLACE, buf, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < n; i++) MPI_Allreduce(MPI_IN_PLACE, buf, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double us = (MPI_Wtime() - t0) / n * 1e6;
    if (rank == 0) printf("SAMPLE {\"bytes\":%ld,\"us\":%.3f}\n", bytes, us);
    fflush(stdout);
    free(buf);
  }
  free(sizes);
  MPI_Finalize();
  return 0;
}
