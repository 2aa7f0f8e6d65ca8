/** Bad use of fullyShard (a unit's parameters used while resharded, a unit nested in a resharded unit, bad options). */
export class FSDPError extends Error {
  override readonly name = 'FSDPError';
}
