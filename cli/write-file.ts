import { mkdir, rename, writeFile } from 'node:fs/promises'
import { dirname } from 'node:path'
import { ErrorCodes, ToolReplayError } from '../trace/index.ts'

/** Writes through a temp file and a rename, so a reader never sees half a file. */
export async function writeAtomic(file: string, text: string): Promise<void> {
  const tmp = `${file}.${process.pid}.tmp`
  try {
    await mkdir(dirname(file), { recursive: true })
    await writeFile(tmp, text)
    await rename(tmp, file)
  } catch (err) {
    throw new ToolReplayError(ErrorCodes.STORE_IO, `Failed to write ${file}: ${(err as Error).message}. Check the directory is writable.`, { cause: err })
  }
}
