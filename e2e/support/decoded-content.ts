/**
 * What a search for a leaked secret must read, decoded: every value of a store's LevelDB as LevelDB itself
 * returns it (its compressed blocks undone, which a byte search of the directory cannot see through), every
 * other file below a directory (piece files, an export and its blobs), and each of those once more with a
 * Content-Encoding undone when it decodes as one (a body stored as it came on the wire).
 */
import { access, readFile } from 'node:fs/promises'
import { join } from 'node:path'
import * as zlib from 'node:zlib'
import { Level } from 'level'
import { filesUnder } from './files-under.ts'

const zstd = (zlib as unknown as { zstdDecompressSync?: (b: Uint8Array) => Buffer }).zstdDecompressSync
const DECODERS: Array<(b: Buffer) => Buffer> = [zlib.gunzipSync, zlib.inflateSync, zlib.inflateRawSync, zlib.brotliDecompressSync, ...(zstd ? [zstd] : [])]

/** Each readable thing below `dir` (a closed store, an export) with where it is, decoded every way it decodes. */
export async function* decodedContent(dir: string): AsyncGenerator<{ where: string; bytes: Buffer }> {
  const isStore = await access(join(dir, 'CURRENT')).then(
    () => true,
    () => false,
  )
  if (isStore) {
    const db = new Level<string, Uint8Array>(dir, { keyEncoding: 'utf8', valueEncoding: 'view' })
    try {
      for await (const [key, value] of db.iterator()) yield* decodings(`LevelDB value ${key}`, Buffer.from(value))
    } finally {
      await db.close()
    }
  }
  for await (const file of filesUnder(dir)) yield* decodings(file, await readFile(file))
}

function* decodings(where: string, bytes: Buffer): Generator<{ where: string; bytes: Buffer }> {
  yield { where, bytes }
  for (const decode of DECODERS) {
    let plain: Buffer
    try {
      plain = decode(bytes)
    } catch {
      continue
    }
    yield { where: `${where} (decoded)`, bytes: plain }
  }
}

/** The places below `dir` whose decoded content holds any of `secrets` ([] when none does). */
export async function placesHolding(dir: string, secrets: string[]): Promise<string[]> {
  const out: string[] = []
  for await (const { where, bytes } of decodedContent(dir)) for (const s of secrets) if (bytes.includes(s)) out.push(`${where}: ${s}`)
  return out
}
