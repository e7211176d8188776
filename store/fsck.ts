/**
 * `checkStore`: every trace of a store, every exchange and every body checked (bodies against their
 * SHA-256, piece by piece), and what is still intact can be exported as trace files. A store too damaged
 * to open (no CURRENT, a damaged log) is never touched: the check runs on a copy, where LevelDB may recover
 * what it can.
 */
import { copyFile, mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { ErrorCodes, type Exchange, isToolReplayError, ToolReplayError, type Trace } from '../trace/index.ts'
import { LevelBackend } from './level-backend.ts'
import { openStoreOps } from './level-store.ts'
import type { StoreOps, TraceInfo, TraceSummary } from './store-ops.ts'
import { writeTraceFile } from './trace-file.ts'
import { bodyRefs, TraceReader } from './trace-reader.ts'

/** What the check found for one trace. */
export interface FsckTrace {
  name: string
  id: string
  status: TraceSummary['status']
  /** Exchanges the trace should have (its count when complete, else what was found). */
  exchanges: number
  /** Exchanges that read back whole, bodies verified. */
  intact: number
  /** One line per problem: `exchange #2 response: body 3f.. is damaged`. */
  damage: string[]
  /** The trace file written for it with `exportTo`. */
  exported?: string
}

/** The whole report. */
export interface FsckReport {
  location: string
  ok: boolean
  /** Why the store could not be opened as it is (then the check ran on a copy). */
  openProblem?: string
  traces: FsckTrace[]
}

/** Options for checkStore. */
export interface FsckOptions {
  /** Write every trace's intact exchanges as trace files here (damaged ones labelled `fsck: partial`). */
  exportTo?: string
}

/**
 * Checks the store at `dir` without changing it.
 * @example
 * const report = await checkStore('.tool-replay/store', { exportTo: 'rescued/' })
 */
export async function checkStore(dir: string, options: FsckOptions = {}): Promise<FsckReport> {
  let openProblem: string | undefined
  let copy: string | undefined
  let ops: StoreOps
  let close: () => Promise<void>
  try {
    const opened = await openStoreOps(dir, { create: false })
    ops = opened.ops
    close = opened.close
  } catch (err) {
    if (!isToolReplayError(err, ErrorCodes.STORE_CORRUPT)) throw err
    openProblem = err.message
    copy = await copyForRecovery(dir)
    const backend = await LevelBackend.open(copy, { create: false, unchecked: true, piecesDir: join(dir, 'pieces') })
    ops = backend
    close = () => backend.close()
  }
  try {
    const traces: FsckTrace[] = []
    for (const summary of await ops.listTraces()) traces.push(await checkTrace(ops, summary, options.exportTo))
    const report: FsckReport = { location: dir, ok: openProblem === undefined && traces.every((t) => t.damage.length === 0), traces }
    if (openProblem !== undefined) report.openProblem = openProblem
    return report
  } finally {
    await close()
    if (copy) await rm(copy, { recursive: true, force: true })
  }
}

async function checkTrace(ops: StoreOps, summary: TraceSummary, exportTo: string | undefined): Promise<FsckTrace> {
  const info = (await ops.traceInfo(summary.id)) as TraceInfo
  const reader = new TraceReader(ops, info)
  const damage: string[] = []
  const intact: Exchange[] = []
  const bodies = new Map<string, Uint8Array>()
  const expected = info.status === 'complete' ? info.count : summary.exchanges
  const missing = (from: number, to: number) => {
    for (let m = from; m < Math.min(to, expected); m++) damage.push(`exchange #${m} is missing`)
  }
  // One exchange per read, so a damaged one costs only itself. Bounded: past the expected count, stop at
  // the end of what is stored (or after a run of unreadable keys).
  for (let seq = 0; seq < expected + 1000; seq++) {
    let x: Exchange | undefined
    try {
      ;[x] = await ops.exchanges(info.id, seq, 1)
    } catch (err) {
      damage.push(`exchange #${seq}: ${(err as Error).message}`)
      continue
    }
    if (x === undefined) {
      missing(seq, expected)
      break
    }
    missing(seq, x.seq)
    seq = x.seq
    if (await bodiesIntact(reader, x, bodies, damage)) intact.push(x)
  }
  const out: FsckTrace = { name: info.name, id: info.id, status: summary.status, exchanges: expected, intact: intact.length, damage }
  if (exportTo && intact.length > 0) out.exported = await exportIntact(exportTo, info, intact, bodies, damage.length > 0 || info.status !== 'complete')
  return out
}

async function bodiesIntact(reader: TraceReader, x: Exchange, bodies: Map<string, Uint8Array>, damage: string[]): Promise<boolean> {
  let ok = true
  for (const [ref, use] of bodyRefs(x)) {
    if (bodies.has(ref.digest)) continue
    try {
      bodies.set(ref.digest, await reader.bodyBytes(ref, use))
    } catch (err) {
      ok = false
      damage.push(
        isToolReplayError(err)
          ? err.message.replace(/^Trace "[^"]*" in the store at .*? is damaged: /, '').replace(/\. Nothing damaged was served.*$/, '')
          : String(err),
      )
    }
  }
  return ok
}

async function exportIntact(dir: string, info: TraceInfo, exchanges: Exchange[], bodies: Map<string, Uint8Array>, partial: boolean): Promise<string> {
  await mkdir(dir, { recursive: true })
  const own = new Map<string, Uint8Array>()
  for (const x of exchanges) for (const [ref] of bodyRefs(x)) own.set(ref.digest, bodies.get(ref.digest) as Uint8Array)
  const meta = partial ? { ...info.meta, labels: { ...info.meta.labels, fsck: 'partial' } } : info.meta
  const trace: Trace = { meta, exchanges, bodies: own }
  const file = join(dir, `${info.name}${info.status === 'complete' ? '' : `.${info.id}`}.trace.json`)
  await writeTraceFile(file, trace)
  return file
}

/**
 * A private copy of a damaged store to recover from: LevelDB's recovery may drop records there, never in the
 * original. A missing CURRENT is restored in the copy to name the newest MANIFEST.
 */
async function copyForRecovery(dir: string): Promise<string> {
  const copy = await mkdtemp(join(tmpdir(), 'tr-fsck-'))
  const files = await readdir(dir)
  for (const f of files) {
    if (f === 'LOCK' || f.endsWith('.sock') || !/^(\d+\.(log|ldb|sst)|MANIFEST-\d+|CURRENT|LOG(\.old)?)$/.test(f)) continue
    await copyFile(join(dir, f), join(copy, f))
  }
  if (!files.includes('CURRENT')) {
    const manifest = files
      .filter((f) => f.startsWith('MANIFEST-'))
      .sort()
      .at(-1)
    if (manifest === undefined) {
      await rm(copy, { recursive: true, force: true })
      throw new ToolReplayError(
        ErrorCodes.STORE_CORRUPT,
        `The trace store at ${dir} has no CURRENT and no MANIFEST file: nothing can be recovered from it with LevelDB.`,
        {
          details: { location: dir },
        },
      )
    }
    await writeFile(join(copy, 'CURRENT'), `${manifest}\n`)
  }
  return copy
}
