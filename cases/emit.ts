/**
 * `emitCase`: promotes a trace to a self-contained regression case directory:
 *   manifest.json            canonical (see manifest.ts)
 *   <sha256>.trace.json      the trace, every body inline, named by the SHA-256 of its bytes
 *   <name>.test.mjs          the generated test (node:test, vitest or jest)
 * The case is written to a staging directory beside the destination, verified there (strict replay and
 * expectation, unless `verify: false`), then published with one rename. An existing destination is refused.
 */
import { randomBytes } from 'node:crypto'
import { lstat, mkdir, rename, rm, writeFile } from 'node:fs/promises'
import { join, relative, resolve, sep } from 'node:path'
import { exportTrace } from '../store/index.ts'
import { ErrorCodes, sha256, ToolReplayError, type Trace } from '../trace/index.ts'
import { DEFAULT_CASES_IMPORT, renderTest, testFileName } from './generated-test.ts'
import {
  CASE_FORMAT,
  CASE_NAME,
  CASE_VERSION,
  type CaseExpectation,
  type CaseFramework,
  type CaseManifest,
  type CaseRun,
  FRAMEWORKS,
  isPortableModulePath,
  MANIFEST_FILE,
  renderManifest,
  traceFileName,
} from './manifest.ts'
import { type VerifyResult, verifyCase } from './verify.ts'

/** Options for `emitCase`. Give exactly one of `runner` and `command`. */
export interface EmitCaseOptions {
  /** The trace to promote (a branch, usually). */
  trace: Trace
  /** Directory the case directory is created in. */
  out: string
  /** Case name: the directory name and the test name. */
  name: string
  /** Library runner: a module path (absolute, or relative to the working directory) and the export to call. */
  runner?: { module: string; export: string }
  /** Command case: argv, run in `cwd` (default: the working directory) under the proxy in strict replay. */
  command?: { argv: string[]; cwd?: string }
  expect: CaseExpectation
  /** Default 'node'. */
  framework?: CaseFramework
  /** Module the generated test imports `verifyCase` from. Default 'tool-replay/cases'. */
  importFrom?: string
  /** Verify the staged case before publishing it. Default true. */
  verify?: boolean
}

/** The published case. */
export interface EmittedCase {
  dir: string
  manifest: CaseManifest
  /** The staged case's verification, unless `verify: false`. */
  verified?: VerifyResult
}

/** Writes, verifies and atomically publishes a case directory. Throws TR_CASE_EXISTS when the destination exists. */
export async function emitCase(options: EmitCaseOptions): Promise<EmittedCase> {
  const { name } = options
  const framework = checkEmitOptions(options)
  const out = resolve(options.out)
  const dest = join(out, name)
  const exists = async (p: string) => (await lstat(p).catch(() => undefined)) !== undefined
  if (await exists(dest)) throw caseExists(dest)

  const run = caseRun(options, dest)

  const traceText = exportTrace(caseTrace(options.trace, name), { inlineLimit: Number.MAX_SAFE_INTEGER }).text
  const traceSha = sha256(traceText)
  const testText = renderTest(name, framework, options.importFrom ?? DEFAULT_CASES_IMPORT)
  const manifest: CaseManifest = {
    format: CASE_FORMAT,
    version: CASE_VERSION,
    name,
    run,
    expect: options.expect,
    trace: { file: traceFileName(traceSha), sha256: traceSha, size: Buffer.byteLength(traceText), exchanges: options.trace.exchanges.length },
    test: { file: testFileName(name), framework, sha256: sha256(testText) },
  }

  // Staged beside the destination: same filesystem (rename is atomic) and same depth (relative paths hold).
  await mkdir(out, { recursive: true })
  const staging = join(out, `.${name}.staging-${randomBytes(6).toString('hex')}`)
  await mkdir(staging)
  try {
    await writeFile(join(staging, manifest.trace.file), traceText, { flag: 'wx' })
    await writeFile(join(staging, manifest.test.file), testText, { flag: 'wx' })
    await writeFile(join(staging, MANIFEST_FILE), renderManifest(manifest), { flag: 'wx' })
    const verified = options.verify === false ? undefined : await verifyCase(staging)
    // mkdir fails if anything appeared at the destination meanwhile; rename then replaces our empty dir.
    try {
      await mkdir(dest)
    } catch (err) {
      if ((err as { code?: string }).code === 'EEXIST') throw caseExists(dest)
      throw err
    }
    await rename(staging, dest)
    return verified ? { dir: dest, manifest, verified } : { dir: dest, manifest }
  } finally {
    await rm(staging, { recursive: true, force: true })
  }
}

/** Refuses what cannot make a case (a bad name or framework, both or neither of runner and command, unanswered exchanges); returns the framework. */
function checkEmitOptions(options: EmitCaseOptions): CaseFramework {
  const { name } = options
  if (!CASE_NAME.test(name)) {
    throw new ToolReplayError(ErrorCodes.INVALID_OPTION, `Invalid case name "${name}": use letters, digits, '.', '_' and '-', starting with a letter or digit.`)
  }
  const framework = options.framework ?? 'node'
  if (!FRAMEWORKS.includes(framework))
    throw new ToolReplayError(ErrorCodes.INVALID_OPTION, `Unknown framework "${framework}". Use one of: ${FRAMEWORKS.join(', ')}.`)
  if (Boolean(options.runner) === Boolean(options.command)) {
    throw new ToolReplayError(
      ErrorCodes.INVALID_OPTION,
      'A case runs either a library runner (--runner module#export) or a command (--command); give exactly one.',
    )
  }
  // A trace observed with --record-as keeps the requests strict replay refused as TR_* outcomes: they were
  // never answered by anything real, so a case built on them would enshrine a miss as expected behaviour.
  const unanswered = options.trace.exchanges.filter((x) => x.outcome.kind === 'error' && x.outcome.error.code.startsWith('TR_'))
  if (unanswered.length > 0) {
    throw new ToolReplayError(
      ErrorCodes.INVALID_OPTION,
      `Cannot emit a case from trace "${options.trace.meta.name}": ${unanswered.length} exchange(s) were never answered (${unanswered
        .slice(0, 3)
        .map((x) => `#${x.seq} ${x.request.method} ${x.request.url}: ${x.outcome.kind === 'error' ? x.outcome.error.code : ''}`)
        .join('; ')}). Record them first (\`tr-proxy record --mode update\`), or emit from the trace the run replayed.`,
    )
  }
  return framework
}

/** How the case runs, relative to its directory `dest`: a library runner (a module's export) or a command. */
function caseRun(options: EmitCaseOptions, dest: string): CaseRun {
  let run: CaseRun
  if (options.runner) {
    if (!/^[A-Za-z_$][\w$]*$/.test(options.runner.export)) {
      throw new ToolReplayError(
        ErrorCodes.INVALID_OPTION,
        `Invalid runner export "${options.runner.export}": give module#exportName, e.g. src/app.ts#decideCustomer42.`,
      )
    }
    run = { kind: 'runner', module: portable(relative(dest, resolve(options.runner.module))), export: options.runner.export }
    if (!isPortableModulePath(run.module))
      throw new ToolReplayError(ErrorCodes.INVALID_OPTION, `Runner module ${options.runner.module} cannot be referenced relatively from ${dest}.`)
    if (!('json' in options.expect))
      throw new ToolReplayError(ErrorCodes.INVALID_OPTION, 'A runner case expects a JSON value: give --expect-json or --expect-file.')
  } else {
    const command = options.command as { argv: string[]; cwd?: string }
    if (command.argv.length === 0) throw new ToolReplayError(ErrorCodes.INVALID_OPTION, 'The command of a command case is empty.')
    const cwd = portable(relative(dest, resolve(command.cwd ?? process.cwd()))) || '.'
    run = { kind: 'command', command: [...command.argv], cwd: cwd.startsWith('./') ? cwd.slice(2) || '.' : cwd }
    if (
      'json' in options.expect ||
      (options.expect.exitCode === undefined && options.expect.stdout === undefined && options.expect.stdoutExact === undefined)
    ) {
      throw new ToolReplayError(
        ErrorCodes.INVALID_OPTION,
        'A command case expects an exit code and/or stdout: give --expect-exit-code and/or --expect-stdout (or --expect-stdout-file).',
      )
    }
  }
  return run
}

function caseExists(dest: string): ToolReplayError {
  return new ToolReplayError(ErrorCodes.CASE_EXISTS, `Cannot emit case ${dest}: it already exists. Pick another --name, or delete the old case first.`)
}

function portable(p: string): string {
  const s = p.split(sep).join('/')
  return s.startsWith('.') ? s : `./${s}`
}

/** The trace as the case keeps it: named after the case, without source trace names, store labels or the app's directory. */
function caseTrace(trace: Trace, name: string): Trace {
  const meta: Trace['meta'] = { name, format: trace.meta.format }
  if (trace.meta.lineage) meta.lineage = { sourceDigest: trace.meta.lineage.sourceDigest, patches: trace.meta.lineage.patches }
  // The app's command and outcome travel with the case; the machine's directory does not (the manifest keeps a portable one).
  if (trace.meta.app) {
    const { cwd: _cwd, ...app } = trace.meta.app
    meta.app = app
  }
  return { meta, exchanges: trace.exchanges, bodies: trace.bodies }
}
