/**
 * An exclusive lock between processes on one machine (or sharing one folder): a lock file created with
 * O_EXCL holding the holder's pid and host. Used so concurrent CI jobs restoring or pushing through one
 * assets cache take turns on its git repository (git's own locks make a second fetch fail, not wait).
 *
 * A lock whose holder died (same host, pid gone) is broken, but only by one waiter at a time: breaking takes
 * a second O_EXCL file, and the breaker checks again under it that the lock is still the dead holder's, so a
 * live holder's fresh lock is never removed. A break file left by a breaker that died is old after
 * BREAK_STALE_MS and is removed. Every wait is bounded (`timeoutMs`): then TR_ASSETS_LOCKED names the
 * holder and the file.
 */
import { open, readFile, stat, unlink } from 'node:fs/promises'
import { hostname } from 'node:os'
import { setTimeout as sleep } from 'node:timers/promises'
import { ErrorCodes, ToolReplayError } from '../trace/index.ts'

/** How long a process waits for the lock by default, in ms. */
export const DEFAULT_LOCK_TIMEOUT_MS = 300_000
/** A break file older than this was left by a breaker that died. */
const BREAK_STALE_MS = 10_000

interface Holder {
  pid: number
  host: string
  since: string
}

/** Runs `fn` holding the lock file `path`; waits for it at most `timeoutMs`. */
export async function withFileLock<T>(path: string, fn: () => Promise<T>, options: { timeoutMs?: number; what?: string } = {}): Promise<T> {
  const timeoutMs = options.timeoutMs ?? DEFAULT_LOCK_TIMEOUT_MS
  const deadline = Date.now() + timeoutMs
  let delay = 20
  for (;;) {
    if (await tryCreate(path)) break
    if (await breakIfDead(path)) continue
    if (Date.now() >= deadline) throw await lockedError(path, timeoutMs, options.what ?? path)
    await sleep(delay)
    delay = Math.min(delay * 2, 100)
  }
  try {
    return await fn()
  } finally {
    await unlink(path).catch(() => {})
  }
}

async function tryCreate(path: string): Promise<boolean> {
  let handle: Awaited<ReturnType<typeof open>> | undefined
  try {
    handle = await open(path, 'wx')
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false
    throw new ToolReplayError(ErrorCodes.STORE_IO, `Cannot create the lock file ${path}: ${(err as Error).message}. Check the cache folder is writable.`, {
      cause: err,
    })
  }
  try {
    const holder: Holder = { pid: process.pid, host: hostname(), since: new Date().toISOString() }
    await handle.writeFile(JSON.stringify(holder))
  } finally {
    await handle.close()
  }
  return true
}

async function readHolder(path: string): Promise<Holder | undefined> {
  try {
    const h = JSON.parse(await readFile(path, 'utf8')) as Holder
    return typeof h.pid === 'number' && typeof h.host === 'string' ? h : undefined
  } catch {
    // Absent, or not yet written by a holder that just created it: not known to be dead.
    return undefined
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'
  }
}

/** Removes the lock when its holder is a dead process of this host; true when it did. */
async function breakIfDead(path: string): Promise<boolean> {
  const seen = await readHolder(path)
  if (!seen || seen.host !== hostname() || alive(seen.pid)) return false
  const breaker = `${path}.break`
  const old = await stat(breaker).catch(() => undefined)
  if (old && Date.now() - old.mtimeMs > BREAK_STALE_MS) await unlink(breaker).catch(() => {})
  if (!(await tryCreate(breaker))) return false
  try {
    // Under the break file nobody else removes the lock, so what is read now is what gets removed.
    const now = await readHolder(path)
    if (!now || now.pid !== seen.pid || now.host !== seen.host || now.since !== seen.since || alive(now.pid)) return false
    await unlink(path).catch(() => {})
    return true
  } finally {
    await unlink(breaker).catch(() => {})
  }
}

async function lockedError(path: string, timeoutMs: number, what: string): Promise<ToolReplayError> {
  const h = await readHolder(path)
  const by = h ? `process ${h.pid} on ${h.host} (since ${h.since})` : 'another process'
  return new ToolReplayError(
    ErrorCodes.ASSETS_LOCKED,
    `Waited ${timeoutMs} ms for ${what}, held by ${by}. Wait for it to finish; if no such process is running, remove ${path}.`,
    { details: { lock: path, holder: h } },
  )
}
