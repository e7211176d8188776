/**
 * The case manifest: what a case runs, what it expects, and the exact files it is made of.
 * Canonical: keys sorted, 2-space JSON, trailing newline, and nothing machine- or time-specific
 * (no timestamps, no absolute paths, no source trace names), so emitting the same case twice gives the
 * same bytes and a case can be committed and reviewed.
 */
import { ErrorCodes, parseJson, sortKeysDeep, ToolReplayError, type Trace } from '../trace/index.ts'

export const CASE_FORMAT = 'tool-replay-case'
export const CASE_VERSION = 1 as const
export const MANIFEST_FILE = 'manifest.json'

/** Test frameworks a generated test file can target. */
export type CaseFramework = 'node' | 'vitest' | 'jest'
export const FRAMEWORKS: readonly CaseFramework[] = ['node', 'vitest', 'jest']

/** How the case exercises the app. */
export type CaseRun =
  /** A library runner: `export` of `module` (relative to the case directory) is called with no arguments. */
  | { kind: 'runner'; module: string; export: string }
  /** A command run under the proxy in strict replay; `cwd` is relative to the case directory. */
  | { kind: 'command'; command: string[]; cwd: string }

/**
 * What the run must produce: the runner's return value as JSON, or a command's exit code and/or stdout.
 * `stdout` ignores one trailing newline of the output (`echo rejected` matches "rejected"); `stdoutExact`
 * (from `--expect-stdout-file`) compares every byte.
 */
export type CaseExpectation = { json: unknown } | { exitCode?: number; stdout?: string; stdoutExact?: string }

export interface CaseManifest {
  format: typeof CASE_FORMAT
  version: typeof CASE_VERSION
  name: string
  run: CaseRun
  expect: CaseExpectation
  /** The trace file, named by the SHA-256 of its bytes. */
  trace: { file: string; sha256: string; size: number; exchanges: number }
  /** The generated test file and the SHA-256 of its bytes. */
  test: { file: string; framework: CaseFramework; sha256: string }
}

/** A case whose integrity checked out (`checkCaseIntegrity` in verify.ts): its manifest and its trace, nothing run yet. */
export interface IntactCase {
  dir: string
  manifest: CaseManifest
  trace: Trace
}

/** Case names: also the directory name, so plain and portable. */
export const CASE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/
const SHA256 = /^[0-9a-f]{64}$/
const TEST_FILE = /^[A-Za-z0-9][A-Za-z0-9._-]*\.test\.(?:mjs|js|ts)$/
const EXPORT_NAME = /^[A-Za-z_$][\w$]*$/

/** The manifest as canonical text: sorted keys at every depth, 2-space indent, trailing newline. */
export function renderManifest(manifest: CaseManifest): string {
  return `${JSON.stringify(sortKeysDeep(manifest), null, 2)}\n`
}

/** The trace file name for a trace file's SHA-256. */
export function traceFileName(sha256: string): string {
  return `${sha256}.trace.json`
}

/**
 * A module reference that stays portable: relative ("./x.ts", "../../src/app.ts"), forward slashes,
 * no scheme, never absolute. It is the one reference out of a case: the app code under test.
 */
export function isPortableModulePath(p: string): boolean {
  return /^\.\.?\//.test(p) && !p.includes('\\') && !p.includes('\0') && !/^[A-Za-z]+:/.test(p) && !p.split('/').includes('')
}

/** A relative working directory for a command case: "." or a relative path, no backslashes, not absolute. */
function isPortableDir(p: string): boolean {
  return p === '.' || (!p.startsWith('/') && !p.includes('\\') && !p.includes('\0') && !/^[A-Za-z]+:/.test(p) && !p.split('/').includes(''))
}

/**
 * Parses manifest text strictly: exact keys, types and formats, and canonical bytes.
 * Throws TR_CASE_INTEGRITY naming the field.
 */
export function parseManifest(text: string, where: string): CaseManifest {
  const fail = (field: string, why: string): never => {
    throw new ToolReplayError(
      ErrorCodes.CASE_INTEGRITY,
      `Case ${where} is not intact: manifest ${field} ${why}. Re-emit the case with \`tr-proxy emit-test\` rather than editing it.`,
      { details: { case: where, field } },
    )
  }
  let raw: unknown
  try {
    raw = parseJson(text)
  } catch (err) {
    return fail('(file)', `is not valid JSON (${(err as Error).message})`)
  }
  const obj = (v: unknown, field: string, keys: string[], optional: string[] = []): Record<string, unknown> => {
    if (v === null || typeof v !== 'object' || Array.isArray(v)) fail(field, 'must be an object')
    const o = v as Record<string, unknown>
    for (const k of Object.keys(o)) if (!keys.includes(k) && !optional.includes(k)) fail(`${field}.${k}`, 'is not a known field')
    for (const k of keys) if (!Object.hasOwn(o, k)) fail(`${field}.${k}`, 'is missing')
    return o
  }
  const str = (v: unknown, field: string, re?: RegExp): string => {
    if (typeof v !== 'string' || (re && !re.test(v))) fail(field, re ? `must match ${re}` : 'must be a string')
    return v as string
  }
  const int = (v: unknown, field: string): number => {
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 0) fail(field, 'must be a non-negative integer')
    return v as number
  }
  const top = obj(raw, '(top level)', ['format', 'version', 'name', 'run', 'expect', 'trace', 'test'])
  if (top.format !== CASE_FORMAT) fail('format', `must be "${CASE_FORMAT}"`)
  if (top.version !== CASE_VERSION) fail('version', `is ${JSON.stringify(top.version)}; this Tool Replay reads version ${CASE_VERSION}`)
  const name = str(top.name, 'name', CASE_NAME)
  const r = obj(top.run, 'run', ['kind'], ['module', 'export', 'command', 'cwd'])
  let run: CaseRun
  if (r.kind === 'runner') {
    obj(r, 'run', ['kind', 'module', 'export'])
    const module = str(r.module, 'run.module')
    if (!isPortableModulePath(module)) fail('run.module', 'must be a relative path starting with "./" or "../" (no absolute paths, no schemes)')
    run = { kind: 'runner', module, export: str(r.export, 'run.export', EXPORT_NAME) }
  } else if (r.kind === 'command') {
    obj(r, 'run', ['kind', 'command', 'cwd'])
    if (!Array.isArray(r.command) || r.command.length === 0 || !r.command.every((c) => typeof c === 'string'))
      fail('run.command', 'must be a non-empty array of strings')
    const cwd = str(r.cwd, 'run.cwd')
    if (!isPortableDir(cwd)) fail('run.cwd', 'must be "." or a relative path')
    run = { kind: 'command', command: r.command as string[], cwd }
  } else {
    return fail('run.kind', 'must be "runner" or "command"')
  }
  let expect: CaseExpectation
  if (run.kind === 'runner') {
    const e = obj(top.expect, 'expect', ['json'])
    expect = { json: e.json }
  } else {
    const e = obj(top.expect, 'expect', [], ['exitCode', 'stdout', 'stdoutExact'])
    const x: { exitCode?: number; stdout?: string; stdoutExact?: string } = {}
    if (e.exitCode !== undefined) x.exitCode = int(e.exitCode, 'expect.exitCode')
    if (e.stdout !== undefined) x.stdout = str(e.stdout, 'expect.stdout')
    if (e.stdoutExact !== undefined) x.stdoutExact = str(e.stdoutExact, 'expect.stdoutExact')
    if (x.stdout !== undefined && x.stdoutExact !== undefined) fail('expect', 'names both stdout and stdoutExact; keep one')
    if (x.exitCode === undefined && x.stdout === undefined && x.stdoutExact === undefined) fail('expect', 'must name exitCode and/or stdout')
    expect = x
  }
  const t = obj(top.trace, 'trace', ['file', 'sha256', 'size', 'exchanges'])
  const sha = str(t.sha256, 'trace.sha256', SHA256)
  const file = str(t.file, 'trace.file')
  if (file !== traceFileName(sha)) fail('trace.file', `must be "${traceFileName(sha)}" (the file is named by its SHA-256)`)
  const trace = { file, sha256: sha, size: int(t.size, 'trace.size'), exchanges: int(t.exchanges, 'trace.exchanges') }
  const ts = obj(top.test, 'test', ['file', 'framework', 'sha256'])
  const framework = str(ts.framework, 'test.framework') as CaseFramework
  if (!FRAMEWORKS.includes(framework)) fail('test.framework', `must be one of ${FRAMEWORKS.join(', ')}`)
  const test = { file: str(ts.file, 'test.file', TEST_FILE), framework, sha256: str(ts.sha256, 'test.sha256', SHA256) }
  const manifest: CaseManifest = { format: CASE_FORMAT, version: CASE_VERSION, name, run, expect, trace, test }
  if (renderManifest(manifest) !== text) fail('(file)', 'is not in canonical form (sorted keys, 2-space indent, trailing newline)')
  return manifest
}
