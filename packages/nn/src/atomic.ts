import { randomBytes } from 'node:crypto';
import { closeSync, fsyncSync, openSync, renameSync, rmSync, writeSync } from 'node:fs';
import { open, rename, rm } from 'node:fs/promises';
import { dirname } from 'node:path';

/** Writing a file failed (a full disk, no permission): names the file, keeps the system error's code. */
export class FileWriteError extends Error {
  override name = 'FileWriteError';
  readonly code: string | undefined;
  constructor(
    readonly path: string,
    cause: unknown,
  ) {
    super(`cannot write ${path}: ${(cause as Error).message}`, { cause });
    this.code = (cause as NodeJS.ErrnoException).code;
  }
}

/** A sibling name for a temporary file or directory that no one else will pick. */
export function temporarySibling(path: string, tag = 'tmp'): string {
  return `${path}.${tag}-${process.pid}-${randomBytes(4).toString('hex')}`;
}

/** fsync a directory so a rename inside it survives a power cut. */
export async function syncDirectory(dir: string): Promise<void> {
  const handle = await open(dir, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/**
 * Writes `data` to `path` so that a crash leaves either the old file or the whole new one:
 * write a temporary sibling, fsync it, rename it over `path`, fsync the directory.
 */
export async function writeFileAtomic(path: string, data: Uint8Array | string): Promise<void> {
  const tmp = temporarySibling(path);
  try {
    const handle = await open(tmp, 'wx');
    try {
      await handle.writeFile(data);
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(tmp, path);
    await syncDirectory(dirname(path));
  } catch (error) {
    await rm(tmp, { force: true });
    throw new FileWriteError(path, error);
  }
}

/** writeFileAtomic on the calling thread (blocking it), from `parts` written in order. */
export function writeFileAtomicSync(path: string, parts: readonly Uint8Array[]): void {
  const tmp = temporarySibling(path);
  try {
    const fd = openSync(tmp, 'wx');
    try {
      for (const part of parts) for (let at = 0; at < part.length; ) at += writeSync(fd, part, at);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, path);
    const dir = openSync(dirname(path), 'r');
    try {
      fsyncSync(dir);
    } finally {
      closeSync(dir);
    }
  } catch (error) {
    rmSync(tmp, { force: true });
    throw new FileWriteError(path, error);
  }
}
