import { readdir } from 'node:fs/promises'
import { join } from 'node:path'

/** Every regular file below `dir`, recursively (for byte searches over a store or an export). */
export async function* filesUnder(dir: string): AsyncGenerator<string> {
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const p = join(dir, entry.name)
    if (entry.isDirectory()) yield* filesUnder(p)
    else if (entry.isFile()) yield p
  }
}
