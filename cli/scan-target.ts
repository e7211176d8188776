/**
 * What `tr-proxy scan` reads: a store (through the store API, so LevelDB's compressed blocks are read
 * decoded), a trace file (with its blobs), a case directory (its trace, manifest and test file), or a
 * directory of trace files. The search itself is engine/secret-scan.ts.
 */
import { access, readdir, readFile, stat } from 'node:fs/promises'
import { join, resolve } from 'node:path'
import { checkCaseIntegrity, MANIFEST_FILE } from '../cases/index.ts'
import { type RedactionOptions, type SecretFinding, scanDocument, scanTrace } from '../engine/index.ts'
import { openStore, readTraceFile } from '../store/index.ts'
import { ErrorCodes, ToolReplayError, type Trace } from '../trace/index.ts'

/** A finding and the file or store it was found in. */
export type SourcedFinding = SecretFinding & { source: string }

/** What a scan read and found. */
export interface ScanReport {
  target: string
  kind: 'store' | 'trace file' | 'case' | 'directory'
  traces: number
  exchanges: number
  /** Files read besides traces (a case's manifest and test). */
  documents: number
  /** Recordings that could not be read, and why. */
  skipped: Array<{ trace: string; reason: string }>
  findings: SourcedFinding[]
}

/** Reads `target` as the kind of thing it is and scans all of it. */
export async function scanTarget(target: string, redaction: RedactionOptions): Promise<ScanReport> {
  const path = resolve(target)
  const info = await stat(path).catch(() => undefined)
  if (info?.isFile()) return scanFiles(path, 'trace file', [path], redaction)
  if (info?.isDirectory()) {
    if (await exists(join(path, MANIFEST_FILE))) return scanCase(path, redaction)
    if ((await exists(join(path, 'CURRENT'))) || (await exists(join(path, 'LOCK')))) return scanStore(path, redaction)
    const files = await traceFiles(path)
    if (files.length > 0) return scanFiles(path, 'directory', files, redaction)
  }
  // Not a file or a known kind of directory: as a store path, which says what is missing and how to fix it.
  return scanStore(path, redaction)
}

async function scanStore(dir: string, redaction: RedactionOptions): Promise<ScanReport> {
  const report = empty(dir, 'store')
  const store = await openStore(dir, { readOnly: true })
  try {
    const partialRead = new Set<string>()
    for (const t of await store.listTraces()) {
      let trace: Trace
      if (t.status === 'complete') trace = await store.readTrace(t.name)
      else if (!partialRead.has(t.name)) {
        // Recordings that never completed hold secrets too; the store API reads the newest one of a name.
        partialRead.add(t.name)
        trace = await store.readTrace(t.name, { partial: true })
      } else {
        report.skipped.push({
          trace: t.name,
          reason: `an older ${t.status} recording (${t.id}): the store API reads only the newest unfinished recording of a name`,
        })
        continue
      }
      count(report, trace.exchanges.length)
      report.findings.push(...scanTrace(trace, { redaction }).map((f) => ({ ...f, source: dir })))
    }
  } finally {
    await store.close()
  }
  return report
}

async function scanFiles(target: string, kind: ScanReport['kind'], files: string[], redaction: RedactionOptions): Promise<ScanReport> {
  const report = empty(target, kind)
  for (const file of files) {
    const trace = await readTraceFile(file)
    count(report, trace.exchanges.length)
    report.findings.push(...scanTrace(trace, { redaction }).map((f) => ({ ...f, source: file })))
  }
  return report
}

async function scanCase(dir: string, redaction: RedactionOptions): Promise<ScanReport> {
  const report = empty(dir, 'case')
  const intact = await checkCaseIntegrity(dir)
  count(report, intact.trace.exchanges.length)
  report.findings.push(...scanTrace(intact.trace, { redaction }).map((f) => ({ ...f, source: join(dir, intact.manifest.trace.file) })))
  for (const name of [MANIFEST_FILE, intact.manifest.test.file]) {
    const file = join(dir, name)
    report.documents++
    report.findings.push(...scanDocument(name, await readFile(file, 'utf8'), { redaction }).map((f) => ({ ...f, source: file })))
  }
  return report
}

/** `*.trace.json` files below `dir` (not into `blobs/`, which trace files name themselves). */
async function traceFiles(dir: string, depth = 0): Promise<string[]> {
  if (depth > 8) return []
  const out: string[] = []
  for (const entry of await readdir(dir, { withFileTypes: true }).catch(() => [])) {
    const p = join(dir, entry.name)
    if (entry.isDirectory() && entry.name !== 'blobs' && entry.name !== 'node_modules') out.push(...(await traceFiles(p, depth + 1)))
    else if (entry.isFile() && entry.name.endsWith('.trace.json')) out.push(p)
  }
  return out.sort()
}

function empty(target: string, kind: ScanReport['kind']): ScanReport {
  return { target, kind, traces: 0, exchanges: 0, documents: 0, skipped: [], findings: [] }
}

function count(report: ScanReport, exchanges: number): void {
  report.traces++
  report.exchanges += exchanges
}

async function exists(p: string): Promise<boolean> {
  return access(p).then(
    () => true,
    () => false,
  )
}

/** The error a scan with findings ends in: TR_SECRET_FOUND, with every finding in `details`. */
export function secretsFound(report: ScanReport): ToolReplayError {
  const n = report.findings.length
  return new ToolReplayError(
    ErrorCodes.SECRET_FOUND,
    `Found ${n} value${n === 1 ? '' : 's'} that look${n === 1 ? 's' : ''} like credentials in ${report.target}. Remove them: re-record with redaction (--redact-header, --redact-query, --redact-body-path or .tool-replay/config.json), then \`tr-proxy rm\` or re-export the old trace; rotate any key that was real.`,
    { details: { target: report.target, findings: report.findings } },
  )
}
