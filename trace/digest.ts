import { createHash } from 'node:crypto'

/** Lowercase hex SHA-256 of bytes or a UTF-8 string. */
export function sha256(data: Uint8Array | string): string {
  return createHash('sha256').update(data).digest('hex')
}
