/** Bytes received on a stream, kept as a list of chunks until a parser takes them. */
export class ByteQueue {
  private chunks: Buffer[] = [];
  private head = 0; // offset into chunks[0]
  length = 0;

  push(chunk: Buffer): void {
    if (chunk.length === 0) return;
    this.chunks.push(chunk);
    this.length += chunk.length;
  }

  /** Copies the first n bytes (n ≤ length) into dst at offset, without consuming. */
  peekInto(dst: Uint8Array, n: number, offset = 0): void {
    let copied = 0;
    let start = this.head;
    for (const c of this.chunks) {
      if (copied >= n) break;
      const take = Math.min(n - copied, c.length - start);
      dst.set(c.subarray(start, start + take), offset + copied);
      copied += take;
      start = 0;
    }
  }

  /** Discards the first n bytes (n ≤ length). */
  skip(n: number): void {
    this.length -= n;
    while (n > 0) {
      const c = this.chunks[0] as Buffer;
      const avail = c.length - this.head;
      if (n < avail) {
        this.head += n;
        return;
      }
      n -= avail;
      this.chunks.shift();
      this.head = 0;
    }
  }

  /** Takes the first n bytes as a fresh, 8-byte-aligned copy. */
  take(n: number): Uint8Array {
    const out = new Uint8Array(n);
    this.peekInto(out, n);
    this.skip(n);
    return out;
  }

  /** Removes and returns everything left (the bytes after a handshake). */
  drain(): Buffer[] {
    const out = this.chunks.map((c, i) => (i === 0 ? c.subarray(this.head) : c));
    this.chunks = [];
    this.head = 0;
    this.length = 0;
    return out;
  }
}
