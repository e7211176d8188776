/**
 * Garbage collection: removes the bodies and piece files no trace references (a deleted or replaced trace
 * leaves its bodies behind: they are content-addressed and shared). Safe while other processes record: it runs
 * in the process that owns the store, where every write is made, and keeps
 *   - every body any stored exchange references: complete traces, recordings still running, partial ones;
 *   - every body an exchange written while gc runs references (the backend reports them as it writes, and
 *     writes queued before gc began land before it marks: a body stored in the same batch as its exchange, or
 *     already stored and referenced again, is never between the two);
 *   - every piece file written or reused (its time is refreshed) since the oldest recording still running
 *     began, or since gc began: a recording streams a big body's pieces before it appends the exchange that
 *     references them, so a piece nothing references yet may be about to be;
 * and deletes the rest in one synced batch (bodies) and one sweep (piece files) during which new pieces wait.
 * LevelDB returns the space of deleted keys when it compacts, so gc compacts the store after.
 *
 * gc waits for others twice: for the writes queued before its mark and sweep, and for piece writes in flight
 * before its sweep of piece files. Neither waits on gc (appends, chunks and puts never wait for a gc to end;
 * a piece write waits only for the sweep, which waits for nothing), so there is no cycle; both waits are
 * still bounded (`waitMs`), and a gc that gives up has deleted nothing and leaves no hold behind.
 */
import { readdir, stat, unlink } from 'node:fs/promises'
import { hostname } from 'node:os'
import { dirname, join } from 'node:path'
import { ErrorCodes, type Exchange, ToolReplayError } from '../trace/index.ts'
import { type BodyManifest, type GcReport, ownerAlive, refsOf } from './store-ops.ts'
import { type KvRead, prefixRange, type StoredMeta } from './store-reads.ts'

/** What a collection is given by the backend that runs it. */
export interface GcTarget {
  kv: KvRead
  piecesDir: string
  dryRun: boolean
  /**
   * Body digests exchanges written since gc began reference: the backend adds to it as each write lists what it
   * references, from before collectGarbage is called.
   */
  referencedSince: ReadonlySet<string>
  /** Runs `fn` with no other write of the store in between (the backend's write queue). */
  exclusive<T>(fn: () => Promise<T>): Promise<T>
  /** Deletes keys in one synced batch and forgets them as stored. */
  deleteKeys(keys: string[]): Promise<void>
  /** Holds new piece writes (and waits for those in flight) until `release` is called. */
  holdPieces(): Promise<() => void>
  /** How long gc waits for queued writes, or for piece writes in flight, before TR_STORE_LOCKED. Default GC_WAIT_MS. */
  waitMs?: number
}

/** Slack for file times written by this host's clock and compared with recordings' start times. */
const CLOCK_SLACK_MS = 2000

/** gc's bound on each wait for the store's other writers (see the file's note). */
export const GC_WAIT_MS = 60_000

/** Collects the garbage of one store. */
export async function collectGarbage(t: GcTarget): Promise<GcReport> {
  const began = Date.now()
  const report: GcReport = { dryRun: t.dryRun, bodies: 0, pieces: 0, bytes: 0, keptRecent: 0 }
  // A write already queued may have listed what it references before referencedSince began counting, and
  // land after the mark below has read the exchanges: let every such write land first, so the mark sees it.
  await exclusiveWithin(t, 'the writes queued before it', async () => {})
  const newerThan = Math.min(began, await oldestRunningRecording(t.kv)) - CLOCK_SLACK_MS
  // Mark, without holding writes: every exchange stored, whatever its trace's state.
  const referenced = new Set<string>()
  await t.kv.scan(prefixRange('x!'), (_key, value) => {
    for (const d of refsOf(JSON.parse(Buffer.from(value).toString('utf8')) as Exchange)) referenced.add(d)
    return true
  })
  const keptPieces = new Set<string>()
  // Sweep the bodies between writes, counting what exchanges written meanwhile reference.
  await exclusiveWithin(t, 'the writes queued before its sweep', async () => {
    const dead: string[] = []
    const live = (digest: string) => referenced.has(digest) || t.referencedSince.has(digest)
    await t.kv.scan(prefixRange('b!'), (key, value) => {
      if (live(key.slice(2))) return true
      dead.push(key)
      report.bytes += value.byteLength
      return true
    })
    await t.kv.scan(prefixRange('B!'), (key, value) => {
      const manifest = JSON.parse(Buffer.from(value).toString('utf8')) as BodyManifest
      if (live(key.slice(2))) for (const p of manifest.pieces) keptPieces.add(p.sha256)
      else dead.push(key)
      return true
    })
    report.bodies = dead.length
    if (!t.dryRun && dead.length > 0) await t.deleteKeys(dead)
  })
  const release = t.dryRun ? () => {} : await holdWithin(t)
  try {
    await sweepPieces(t, keptPieces, newerThan, report)
  } finally {
    release()
  }
  return report
}

/**
 * Runs `fn` in the write queue, waiting at most `t.waitMs` for it to start. One that has not started by then
 * never runs (the queue reaches it later and skips it): gc rejects having deleted nothing.
 */
async function exclusiveWithin(t: GcTarget, what: string, fn: () => Promise<void>): Promise<void> {
  let state: 'waiting' | 'started' | 'gave up' = 'waiting'
  let started = () => {}
  const starting = new Promise<void>((resolve) => {
    started = resolve
  })
  const run = t.exclusive(async () => {
    if (state === 'gave up') return
    state = 'started'
    started()
    await fn()
  })
  // Settled below or, after giving up, never read: its failure is not this caller's any more.
  run.catch(() => {})
  if (!(await settlesWithin(starting, t.waitMs ?? GC_WAIT_MS)) && state === 'waiting') {
    state = 'gave up'
    throw gcWaitedTooLong(t, what)
  }
  await run
}

/** holdPieces, waiting at most `t.waitMs`; a hold granted after gc gave up is released at once. */
async function holdWithin(t: GcTarget): Promise<() => void> {
  let late = false
  const hold = t.holdPieces().then((release) => {
    if (late) release()
    return release
  })
  if (await settlesWithin(hold, t.waitMs ?? GC_WAIT_MS)) return hold
  late = true
  throw gcWaitedTooLong(t, 'the piece writes in flight', 'so it removed unreferenced bodies but no piece files')
}

/** True when `p` settles (either way) within `ms`; the timer never outlives the wait. */
async function settlesWithin(p: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), ms)
  })
  try {
    return await Promise.race([
      p.then(
        () => true,
        () => true,
      ),
      late,
    ])
  } finally {
    clearTimeout(timer)
  }
}

function gcWaitedTooLong(t: GcTarget, what: string, outcome = 'so it removed nothing'): ToolReplayError {
  const ms = t.waitMs ?? GC_WAIT_MS
  return new ToolReplayError(
    ErrorCodes.STORE_LOCKED,
    `Failed to collect garbage in the trace store at ${dirname(t.piecesDir)}: gc waited ${ms} ms for ${what} and they did not finish, ${outcome}. Run \`tr-proxy gc\` again once the store's import or recording has gone quieter.`,
    { details: { location: dirname(t.piecesDir), waitedMs: ms, for: what } },
  )
}

/** Start time of the oldest recording whose process may still be appending to it (+Infinity when none). */
async function oldestRunningRecording(kv: KvRead): Promise<number> {
  let oldest = Number.POSITIVE_INFINITY
  await kv.scan(prefixRange('m!'), (_key, value) => {
    const m = JSON.parse(Buffer.from(value).toString('utf8')) as StoredMeta
    // A recording of another host cannot be checked: it may be running.
    const running = m.status === 'recording' && (m.owner === undefined || m.owner.host !== hostname() || ownerAlive(m.owner))
    if (running) oldest = Math.min(oldest, Date.parse(m.createdAt) || 0)
    return true
  })
  return oldest
}

async function sweepPieces(t: GcTarget, kept: Set<string>, newerThan: number, report: GcReport): Promise<void> {
  for (const sub of await readdir(t.piecesDir).catch(() => [] as string[])) {
    if (!/^[0-9a-f]{2}$/.test(sub)) continue
    const dir = join(t.piecesDir, sub)
    for (const f of await readdir(dir).catch(() => [] as string[])) {
      const sha = /^\.?([0-9a-f]{64})/.exec(f)?.[1]
      if (sha === undefined || (kept.has(sha) && !f.startsWith('.'))) continue
      const st = await stat(join(dir, f)).catch(() => undefined)
      if (!st?.isFile()) continue
      if (st.mtimeMs >= newerThan) {
        report.keptRecent++
        continue
      }
      report.pieces++
      report.bytes += st.size
      if (!t.dryRun) await unlink(join(dir, f)).catch(() => {})
    }
  }
}
