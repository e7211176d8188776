/**
 * Piece files: `pieces/<2 hex>/<sha256>` beside the database, one piece of a big body each, content-addressed.
 * The store never follows a symbolic link out of its directory: `pieces/`, its subfolders and the piece files
 * must be what they claim (a link there would have pieces written and read somewhere else, where another
 * user or a sync tool controls them), so a link is refused with TR_STORE_IO naming it.
 */
import { randomBytes } from 'node:crypto'
import { constants, readFile } from 'node:fs'
import { lstat, mkdir, open, rename, unlink, utimes, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { ErrorCodes, ToolReplayError } from '../trace/index.ts'

/** The path of a piece (the digest is checked, so no name can climb out of the folder). */
export function piecePath(piecesDir: string, sha: string): string {
  if (!/^[0-9a-f]{64}$/.test(sha)) throw new ToolReplayError(ErrorCodes.INTERNAL, `"${sha}" is not a piece digest.`)
  return join(piecesDir, sha.slice(0, 2), sha)
}

/**
 * Reads a piece; undefined when it is not there. `knownDirs` caches the folders already found real (as for
 * writes): two `lstat`s per read cost a replay of big bodies a tenth of its time.
 */
export async function readPiece(location: string, piecesDir: string, sha: string, knownDirs: Set<string>): Promise<Uint8Array | undefined> {
  const path = piecePath(piecesDir, sha)
  const dir = join(piecesDir, sha.slice(0, 2))
  try {
    if (!knownDirs.has(dir)) {
      await assertRealDir(piecesDir, location)
      await assertRealDir(dir, location)
    }
    // fs.readFile's callback form: the promise API's FileHandle costs its close on the main thread.
    // Node takes numeric open flags here too; its typings name only the string ones.
    const flag = (constants.O_RDONLY | constants.O_NOFOLLOW) as unknown as string
    const bytes = await new Promise<Buffer>((resolve, reject) => readFile(path, { flag }, (err, b) => (err ? reject(err) : resolve(b))))
    // Both folders exist, and were real when checked.
    knownDirs.add(dir)
    return new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code
    if (code === 'ENOENT') return undefined
    if (code === 'ELOOP') throw linkRefused(location, path)
    throw pieceIoError(location, piecesDir, err)
  }
}

/**
 * Writes a piece under a temp name and renames it into place (a reader never sees half a piece). A piece
 * already there with the same size is not rewritten, but its time is refreshed, so `gc` sees it as in use.
 * `knownDirs` caches the subfolders already checked.
 */
export async function writePiece(location: string, piecesDir: string, sha: string, bytes: Uint8Array, knownDirs: Set<string>): Promise<void> {
  const path = piecePath(piecesDir, sha)
  const dir = join(piecesDir, sha.slice(0, 2))
  try {
    if (!knownDirs.has(dir)) {
      await mkdir(dir, { recursive: true, mode: 0o700 })
      await assertRealDir(piecesDir, location)
      await assertRealDir(dir, location)
      knownDirs.add(dir)
    }
    const st = await lstat(path).catch(() => undefined)
    if (st?.isSymbolicLink()) throw linkRefused(location, path)
    if (st?.isFile() && st.size === bytes.byteLength) {
      const now = new Date()
      await utimes(path, now, now)
      return
    }
    const tmp = join(dir, `.${sha}.${randomBytes(4).toString('hex')}.tmp`)
    try {
      await writeFile(tmp, bytes, { mode: 0o600, flag: 'wx' })
      await rename(tmp, path)
    } catch (err) {
      await unlink(tmp).catch(() => {})
      throw err
    }
  } catch (err) {
    if (err instanceof ToolReplayError) throw err
    throw pieceIoError(location, piecesDir, err)
  }
}

/**
 * Syncs piece files to the disk, with the folders that name them (a renamed file's name lives in its folder),
 * for appends that ask for durability fsync. A piece missing now was never confirmed as written: TR_STORE_IO.
 */
export async function syncPieces(location: string, piecesDir: string, shas: Iterable<string>): Promise<void> {
  const dirs = new Set<string>()
  try {
    for (const sha of shas) {
      await syncPath(piecePath(piecesDir, sha), constants.O_RDONLY | constants.O_NOFOLLOW)
      dirs.add(join(piecesDir, sha.slice(0, 2)))
    }
    // Windows cannot open a folder to sync it (NTFS journals its names itself).
    if (dirs.size === 0 || process.platform === 'win32') return
    for (const dir of dirs) await syncPath(dir, constants.O_RDONLY | constants.O_DIRECTORY)
    // The subfolders' own names (one may be new), and pieces/ itself in the store's folder.
    await syncPath(piecesDir, constants.O_RDONLY | constants.O_DIRECTORY)
    await syncPath(location, constants.O_RDONLY | constants.O_DIRECTORY)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ELOOP') throw linkRefused(location, piecesDir)
    throw pieceIoError(location, piecesDir, err)
  }
}

async function syncPath(path: string, flags: number): Promise<void> {
  const fh = await open(path, flags)
  try {
    await fh.sync()
  } finally {
    await fh.close()
  }
}

/** Throws TR_STORE_IO when `dir` is a symbolic link or not a directory (a missing one is fine). */
export async function assertRealDir(dir: string, location: string): Promise<void> {
  const st = await lstat(dir).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return undefined
    throw err
  })
  if (st === undefined || st.isDirectory()) return
  if (st.isSymbolicLink()) throw linkRefused(location, dir)
  throw new ToolReplayError(
    ErrorCodes.STORE_IO,
    `The trace store at ${location} has ${dir}, which is not a folder. Move it aside: the store keeps body pieces there.`,
    { details: { location, path: dir } },
  )
}

/** TR_STORE_IO for a symbolic link inside a store. */
export function linkRefused(location: string, path: string): ToolReplayError {
  return new ToolReplayError(
    ErrorCodes.STORE_IO,
    `The trace store at ${location} has a symbolic link at ${path}. The store never follows a link out of its directory (what it writes and reads there would live somewhere else, outside its control). Replace the link with the folder or file it points to (move it into the store), or put the whole store where you want it with --store.`,
    { details: { location, path } },
  )
}

function pieceIoError(location: string, piecesDir: string, err: unknown): ToolReplayError {
  return new ToolReplayError(
    ErrorCodes.STORE_IO,
    `Failed to access a body piece in ${piecesDir}: ${(err as Error).message}. Check disk space and permissions.`,
    { cause: err, details: { location } },
  )
}
