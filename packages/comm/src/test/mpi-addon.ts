/** Why the `mpi` backend cannot run here (the optional @ddp/mpi addon is not built), or null. */
export async function mpiAddonMissing(): Promise<string | null> {
  const addon = await import('@ddp/mpi').then(
    (m) => m.loadMpi(),
    () => null,
  );
  return addon ? null : '@ddp/mpi is not built (apt-get install libopenmpi-dev, then pnpm rebuild @ddp/mpi)';
}
