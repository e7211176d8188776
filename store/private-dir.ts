/**
 * This user's private directory in the shared temp dir, declared once: where a socket goes when its path inside a
 * store would be too long (the store's own, the proxy's control API) and where shared sessions listen. The temp dir
 * is writable by every user, so the directory must be ours and closed to others: otherwise another user could
 * reach the socket (read traces, serve forged ones).
 */
import { lstat, mkdir } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

/** `<tmp>/tool-replay-<uid>`, or a folder under it. */
export function privateTempDir(...under: string[]): string {
  return join(tmpdir(), `tool-replay-${process.getuid?.() ?? 'user'}`, ...under)
}

/**
 * Creates `dir` (mode 0700) when missing; returns why it is not private to this user (a symlink, someone else's,
 * open to others), or undefined when it is. Each caller raises its own typed error with that reason.
 */
export async function privateDirProblem(dir: string): Promise<string | undefined> {
  if (process.platform === 'win32') return undefined
  await mkdir(dir, { recursive: true, mode: 0o700 })
  const st = await lstat(dir)
  if (st.isSymbolicLink()) return 'it is a symlink'
  if (!st.isDirectory()) return 'it is not a directory'
  if (process.getuid && st.uid !== process.getuid()) return `it belongs to uid ${st.uid}`
  if ((st.mode & 0o077) !== 0) return `it is open to others (mode ${(st.mode & 0o777).toString(8)})`
  return undefined
}
