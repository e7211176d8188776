/**
 * `checkStore`: every trace of a store, every exchange and every body checked (bodies against their
 * SHA-256, piece by piece), and what is still intact can be exported as trace files. Never changes the store:
 * it is opened read-only (through its owner, or its files read directly). A store the open check refuses is
 * read from its files as they are (leveldb-view.ts, rescue): every table and log in the directory, listed in
 * the MANIFEST or not, whole or cut short, so every trace whose exchanges and bodies are still on disk is found,
 * and the files that could not be read are named.
 */
import { mkdir } from 'node:fs/promises'
import { join } from 'node:path'
import { ErrorCodes, type Exchange, isToolReplayError, TRACE_FORMAT_VERSION, type Trace } from '../trace/index.ts'
import { FileBackend } from './file-backend.ts'
import { openStoreOps } from './level-store.ts'
import { FileView } from './leveldb-view.ts'
import { inspectStore } from './store-files.ts'
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
  /** Why the store could not be opened as it is (then its files were read as they are). */
  openProblem?: string
  /** The files that are damaged, missing or cut short, each with why (when the store could not be opened). */
  files?: string[]
  traces: FsckTrace[]
}

/** Options for checkStore. */
export interface FsckOptions {
  /** Write every trace's intact exchanges as trace files here (damaged ones labelled `fsck: partial`). */
  exportTo?: string
}

const PAGE = 1000

/**
 * Checks the store at `dir` without changing it.
 * @example
 * const report = await checkStore('.tool-replay/store', { exportTo: 'rescued/' })
 */
export async function checkStore(dir: string, options: FsckOptions = {}): Promise<FsckReport> {
  let opened: { ops: StoreOps; close: () => Promise<void> }
  let report: FsckReport
  let rescue: FileView | undefined
  try {
    opened = await openStoreOps(dir, { readOnly: true })
    report = { location: dir, ok: true, traces: [] }
  } catch (err) {
    if (!isToolReplayError(err, ErrorCodes.STORE_CORRUPT)) throw err
    const files = await inspectStore(dir)
    rescue = await FileView.rescue(dir, files.tableFiles, files.logFiles)
    const backend = FileBackend.over(dir, rescue)
    opened = { ops: backend, close: () => backend.close() }
    const problems = (err.details?.problems as Array<{ files: string[]; why: string }> | undefined) ?? []
    report = { location: dir, ok: false, openProblem: err.message, files: problems.map((p) => `${p.files.join(', ')}: ${p.why}`), traces: [] }
  }
  try {
    const { ops } = opened
    for (const summary of await ops.listTraces()) report.traces.push(await checkTrace(ops, summary, options.exportTo))
    if (rescue) {
      report.traces.push(...(await lostMetaTraces(ops, rescue, report.traces, options.exportTo)))
      report.files?.push(...rescue.damage)
    }
    report.ok = report.ok && report.traces.every((t) => t.damage.length === 0)
    return report
  } finally {
    await opened.close()
  }
}

async function checkTrace(ops: StoreOps, summary: TraceSummary, exportTo: string | undefined, lostInfo?: TraceInfo): Promise<FsckTrace> {
  const info = lostInfo ?? ((await ops.traceInfo(summary.id)) as TraceInfo)
  const reader = new TraceReader(ops, info)
  const damage: string[] = []
  const intact: Exchange[] = []
  const bodies = new Map<string, Uint8Array>()
  const expected = info.status === 'complete' ? info.count : summary.exchanges
  const missing = (from: number, to: number) => {
    for (let m = from; m < Math.min(to, expected); m++) damage.push(`exchange #${m} is missing`)
  }
  let seq = 0
  // A page at a time; a page that cannot be read is read one exchange at a time, so damage costs only
  // itself. Bounded: past the expected count, stop at the end of what is stored.
  while (seq < expected + PAGE) {
    let page: Exchange[]
    let next = seq
    try {
      page = await ops.exchanges(info.id, seq, PAGE)
    } catch {
      page = []
      for (let s = seq; s < seq + PAGE; s++) {
        try {
          const [x] = await ops.exchanges(info.id, s, 1)
          if (x === undefined) break
          if (x.seq === s) page.push(x)
        } catch (err) {
          damage.push(`exchange #${s}: ${(err as Error).message}`)
        }
      }
      next = seq + PAGE
    }
    for (const x of page) {
      missing(seq, x.seq)
      seq = x.seq + 1
      if (await bodiesIntact(reader, x, bodies, damage)) intact.push(x)
    }
    if (page.length < PAGE && next <= seq) break
    seq = Math.max(seq, next)
  }
  missing(seq, expected)
  const out: FsckTrace = { name: info.name, id: info.id, status: summary.status, exchanges: Math.max(expected, intact.length), intact: intact.length, damage }
  if (exportTo && intact.length > 0) {
    const listed = (await ops.completeId(info.name).catch(() => undefined)) === info.id
    out.exported = await exportIntact(exportTo, info, intact, bodies, damage.length > 0 || info.status !== 'complete', listed)
  }
  return out
}

/** Exchanges whose trace metadata was lost (its key was in a damaged or missing file): rescued under their id. */
async function lostMetaTraces(ops: StoreOps, view: FileView, found: FsckTrace[], exportTo: string | undefined): Promise<FsckTrace[]> {
  const known = new Set(found.map((t) => t.id))
  const ids: string[] = []
  let from = 'x!'
  for (;;) {
    let id: string | undefined
    await view.scan({ gte: from, lt: 'x"' }, (key) => {
      id = key.slice(2, key.indexOf('!', 2))
      return false
    })
    if (id === undefined) break
    if (!known.has(id)) ids.push(id)
    from = `x!${id}"`
  }
  const out: FsckTrace[] = []
  for (const id of ids) {
    const info: TraceInfo = {
      id,
      name: `lost-${id}`,
      meta: { name: `lost-${id}`, format: TRACE_FORMAT_VERSION, labels: { 'fsck-metadata': 'lost' } },
      status: 'recording',
      // Rescued, not recorded here: a command that came with it is never run unconfirmed (the inspector).
      recorded: false,
      createdAt: '',
      count: 0,
      bodyBytes: 0,
      indexed: false,
    }
    const t = await checkTrace(ops, { name: info.name, id, status: 'partial', exchanges: 0, createdAt: '' }, exportTo, info)
    t.damage.unshift('its metadata (name, labels) is lost; its exchanges are rescued under its id')
    out.push(t)
  }
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
      const why = isToolReplayError(err) ? err.details?.why : undefined
      damage.push(
        typeof why === 'string'
          ? `${use}: body ${ref.digest} is damaged (${why})`
          : isToolReplayError(err)
            ? err.message.replace(/^Trace "[^"]*" in the store at .*? is damaged: /, '').replace(/\. Nothing damaged was served.*$/, '')
            : String(err),
      )
    }
  }
  return ok
}

async function exportIntact(
  dir: string,
  info: TraceInfo,
  exchanges: Exchange[],
  bodies: Map<string, Uint8Array>,
  partial: boolean,
  listed: boolean,
): Promise<string> {
  await mkdir(dir, { recursive: true })
  const own = new Map<string, Uint8Array>()
  for (const x of exchanges) for (const [ref] of bodyRefs(x)) own.set(ref.digest, bodies.get(ref.digest) as Uint8Array)
  const meta = partial ? { ...info.meta, labels: { ...info.meta.labels, fsck: 'partial' } } : info.meta
  const trace: Trace = { meta, exchanges, bodies: own }
  const file = join(dir, `${info.name}${info.status === 'complete' && listed ? '' : `.${info.id}`}.trace.json`)
  await writeTraceFile(file, trace)
  return file
}
