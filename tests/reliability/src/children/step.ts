import { type Tensor, tensor } from '@ddp/autograd';

/** What `step` threw, as `Name: message`, or null when it ran through. */
export async function errorOf(step: () => Promise<void>): Promise<string | null> {
  try {
    await step();
    return null;
  } catch (e) {
    return `${(e as Error).name}: ${(e as Error).message}`;
  }
}

/** The 2 × 3 batch of a rank: one pattern scaled by rank + 1, so the ranks' gradients differ. */
export const rankBatch = (rank: number): Tensor =>
  tensor(
    [1, 2, 3, -1, 0, 2].map((v) => v * (rank + 1)),
    [2, 3],
  );
