/**
 * `verifyCase(dir)`: integrity first, then strict replay, then the expectation.
 *  1. Integrity (TR_CASE_INTEGRITY), before anything is imported or run: the directory holds exactly the
 *     manifest, the trace file and the test file, all regular files (no symlinks); the manifest is
 *     canonical and well-formed; the trace file's SHA-256 and size match and its own digest checks out;
 *     the test file's SHA-256 matches; every path is relative and stays inside the case.
 *  2. Strict replay of the trace from an in-memory store (nothing is written, least of all into the case):
 *     a miss, an overrun or an unused exchange is TR_REPLAY_INCOMPLETE. A runner runs in this process, or
 *     in a child Node process where this realm's fetch cannot be captured (jest's test environments).
 *  3. The app's own failure is TR_CASE_APP_ERROR; a different result is TR_CASE_REGRESSION with the
 *     JSON-path differences between expected and actual.
 */
import { lstat, readdir, readFile } from 'node:fs/promises'
import { resolve } from 'node:path'
import { formatSummary, type SessionSummary } from '../engine/index.ts'
import { parseTraceFile } from '../store/index.ts'
import { canonicalJson, diffJson, ErrorCodes, isToolReplayError, type JsonDifference, sha256, ToolReplayError, type Trace } from '../trace/index.ts'
import { type CaseExpectation, type CaseManifest, type IntactCase, MANIFEST_FILE, parseManifest } from './manifest.ts'
import { canRunInProcess, type RunOutcome, runRunner, runRunnerInChild } from './run-runner.ts'

/** A case that passed. */
export interface VerifyResult {
  ok: true
  name: string
  kind: CaseManifest['run']['kind']
  /** What the run produced (the runner's return value as JSON, or the command's exit code and stdout). */
  actual: unknown
  summary: SessionSummary
}

function integrity(dir: string, why: string, cause?: unknown): ToolReplayError {
  return new ToolReplayError(
    ErrorCodes.CASE_INTEGRITY,
    `Case ${dir} is not intact: ${why}. Restore it from version control or re-emit it with \`tr-proxy emit-test\`.`,
    {
      details: { case: dir },
      ...(cause ? { cause } : {}),
    },
  )
}

/** Checks a case directory without importing or running anything; returns its manifest and verified trace. */
export async function checkCaseIntegrity(dirArg: string): Promise<IntactCase> {
  const dir = resolve(dirArg)
  const info = await lstat(dir).catch(() => undefined)
  if (!info) throw integrity(dir, 'the directory does not exist')
  if (info.isSymbolicLink()) throw integrity(dir, 'the case directory is a symbolic link')
  if (!info.isDirectory()) throw integrity(dir, 'it is not a directory')
  const regular = async (name: string): Promise<Buffer> => {
    const st = await lstat(resolve(dir, name)).catch(() => undefined)
    if (!st) throw integrity(dir, `${name} is missing`)
    if (st.isSymbolicLink()) throw integrity(dir, `${name} is a symbolic link`)
    if (!st.isFile()) throw integrity(dir, `${name} is not a regular file`)
    return readFile(resolve(dir, name))
  }
  const manifest = parseManifest((await regular(MANIFEST_FILE)).toString('utf8'), dir)
  const expected = [MANIFEST_FILE, manifest.trace.file, manifest.test.file].sort()
  const present = (await readdir(dir)).sort()
  const extra = present.filter((n) => !expected.includes(n))
  if (extra.length > 0) throw integrity(dir, `it holds files the manifest does not list (${extra.join(', ')})`)
  const traceBytes = await regular(manifest.trace.file)
  if (traceBytes.byteLength !== manifest.trace.size)
    throw integrity(dir, `the trace file is ${traceBytes.byteLength} bytes, the manifest says ${manifest.trace.size}`)
  if (sha256(traceBytes) !== manifest.trace.sha256)
    throw integrity(dir, `the trace file's SHA-256 is ${sha256(traceBytes)}, the manifest says ${manifest.trace.sha256}`)
  const testBytes = await regular(manifest.test.file)
  if (sha256(testBytes) !== manifest.test.sha256) throw integrity(dir, `the test file ${manifest.test.file} was changed (SHA-256 mismatch)`)
  let trace: Trace
  try {
    trace = parseTraceFile(traceBytes.toString('utf8'), new Map(), { file: resolve(dir, manifest.trace.file) })
  } catch (err) {
    throw integrity(dir, `the trace file does not verify (${(err as Error).message})`, err)
  }
  if (trace.exchanges.length !== manifest.trace.exchanges)
    throw integrity(dir, `the trace has ${trace.exchanges.length} exchanges, the manifest says ${manifest.trace.exchanges}`)
  if (trace.meta.name !== manifest.name) throw integrity(dir, `the trace is named "${trace.meta.name}", the case "${manifest.name}"`)
  return { dir, manifest, trace }
}

/** Options of `verifyCase`. */
export interface VerifyOptions {
  /** A command case's command runs sealed (Linux; docs/sealed-runs.md): its only way out is the strict-replay proxy. */
  sealed?: boolean
}

// Verification installs a process-wide dispatcher: one case at a time per process.
let queue: Promise<unknown> = Promise.resolve()

/**
 * Verifies a case directory; resolves with the result or throws a ToolReplayError whose code says which
 * contract broke: TR_CASE_INTEGRITY, TR_REPLAY_INCOMPLETE, TR_CASE_APP_ERROR or TR_CASE_REGRESSION.
 * @example
 * await verifyCase(fileURLToPath(new URL('.', import.meta.url)))
 */
export function verifyCase(dir: string, options: VerifyOptions = {}): Promise<VerifyResult> {
  const run = queue.then(() => verifyNow(dir, options))
  queue = run.catch(() => {})
  return run
}

async function verifyNow(dir: string, options: VerifyOptions): Promise<VerifyResult> {
  const c = await checkCaseIntegrity(dir)
  const { manifest } = c
  let outcome: RunOutcome
  if (manifest.run.kind === 'runner' && options.sealed) {
    throw new ToolReplayError(
      ErrorCodes.INVALID_OPTION,
      `Case "${manifest.name}" runs in this process (a runner case), so --sealed has nothing to seal: drop it, or emit a command case (--command) to verify sealed.`,
    )
  }
  if (manifest.run.kind === 'runner') {
    // In a realm whose fetch an installed dispatcher cannot see (jest), the app runs in a child Node process.
    outcome = canRunInProcess() ? await runRunner(c, manifest.run) : await runRunnerInChild(c, manifest.run)
  } else {
    // Loaded only for command cases: runner cases never load the proxy.
    const { runCommandCase } = await import('./command-case.ts')
    outcome = await runCommandCase(c, manifest.run, options)
  }
  const { summary } = outcome
  if (!summary.ok) {
    const appError = outcome.error === undefined ? '' : `\nThe app also failed: ${errorText(outcome.error)}`
    throw new ToolReplayError(
      ErrorCodes.REPLAY_INCOMPLETE,
      `Case "${manifest.name}" broke the replay contract: the app did not make exactly the recorded requests.\n${formatSummary(summary)}${appError}\nFix the app, or re-emit the case from a new recording.`,
      { details: { case: manifest.name, summary }, ...(outcome.error !== undefined ? { cause: outcome.error } : {}) },
    )
  }
  if (outcome.error !== undefined) {
    throw new ToolReplayError(
      ErrorCodes.CASE_APP_ERROR,
      `Case "${manifest.name}": the app failed under a complete strict replay (${summary.replayed} exchange(s) replayed): ${errorText(outcome.error)}. Fix the app; the recorded world did not change.`,
      { cause: outcome.error, details: { case: manifest.name, error: errorText(outcome.error), summary } },
    )
  }
  const { expected, actual } = comparable(manifest.expect, outcome.actual)
  if (canonicalJson(expected) !== canonicalJson(actual)) {
    const differences = diffJson(expected, actual, 20)
    throw new ToolReplayError(
      ErrorCodes.CASE_REGRESSION,
      `Case "${manifest.name}" failed: behavioural regression. Expected ${short(expected)}, got ${short(actual)} (${differences.map(formatDifference).join('; ')}). Strict replay completed (${summary.replayed} exchange(s) replayed, none missing or unused), so the app saw the recorded world and behaved differently. Fix the app, or re-emit the case if the new behaviour is intended.`,
      { details: { case: manifest.name, expected, actual, differences, summary } },
    )
  }
  return { ok: true, name: manifest.name, kind: manifest.run.kind, actual: outcome.actual, summary }
}

/**
 * The expectation and the actual result, in the form they are compared: a runner's JSON as is; for a
 * command, only the fields the case names, with one trailing newline of stdout insignificant for `stdout`
 * and every byte significant for `stdoutExact`.
 */
function comparable(expect: CaseExpectation, actual: unknown): { expected: unknown; actual: unknown } {
  if ('json' in expect) return { expected: expect.json, actual }
  const a = actual as { exitCode?: number; stdout?: string }
  const expected: Record<string, unknown> = {}
  const got: Record<string, unknown> = {}
  if (expect.exitCode !== undefined) {
    expected.exitCode = expect.exitCode
    got.exitCode = a.exitCode
  }
  if (expect.stdout !== undefined) {
    expected.stdout = dropFinalNewline(expect.stdout)
    got.stdout = dropFinalNewline(a.stdout ?? '')
  }
  if (expect.stdoutExact !== undefined) {
    expected.stdoutExact = expect.stdoutExact
    got.stdoutExact = a.stdout ?? ''
  }
  return { expected, actual: got }
}

function dropFinalNewline(text: string): string {
  return text.endsWith('\r\n') ? text.slice(0, -2) : text.endsWith('\n') ? text.slice(0, -1) : text
}

function errorText(err: unknown): string {
  if (isToolReplayError(err)) return `${err.code}: ${err.message}`
  const e = err as { name?: string; message?: string; code?: unknown }
  return `${e?.name ?? 'Error'}${typeof e?.code === 'string' ? ` ${e.code}` : ''}: ${e?.message ?? String(err)}`
}

function short(v: unknown): string {
  const s = JSON.stringify(v) ?? 'undefined'
  return s.length > 120 ? `${s.slice(0, 117)}...` : s
}

function formatDifference(d: JsonDifference): string {
  const side = (x: unknown) => (x === undefined ? '(absent)' : short(x))
  return `${d.path}: ${side(d.before)} → ${side(d.after)}`
}
