import { hash } from 'node:crypto'

/** Lowercase hex SHA-256 of bytes or a UTF-8 string. */
export function sha256(data: Uint8Array | string): string {
  // One-shot (Node >= 21.7): no Hash object per call, which matters for the many small bodies of a recording.
  return hash('sha256', data, 'hex')
}
