import { readdir, utimes } from 'node:fs/promises'
import { join } from 'node:path'

/** Every regular file below `dir`, recursively (for byte searches over a store or an export). */
export async function* filesUnder(dir: string): AsyncGenerator<string> {
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const p = join(dir, entry.name)
    if (entry.isDirectory()) yield* filesUnder(p)
    else if (entry.isFile()) yield p
  }
}

/**
 * Sets the modification time of every piece file of the store at `storeDir` back by `ms`: what gc sees of pieces
 * written that long ago. gc keeps any piece written since a running recording began, less 2 s of clock slack
 * (store/gc.ts); aging them is that wait without the wait.
 */
export async function agePieces(storeDir: string, ms: number): Promise<number> {
  const when = new Date(Date.now() - ms)
  let n = 0
  for await (const file of filesUnder(join(storeDir, 'pieces'))) {
    await utimes(file, when, when)
    n++
  }
  return n
}
