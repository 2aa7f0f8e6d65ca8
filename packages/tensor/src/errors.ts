/** Raised when a requested backend is unknown or cannot be initialised, or its settings are wrong. */
export class BackendError extends Error {
  override name = 'BackendError';
}
