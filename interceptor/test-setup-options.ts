/**
 * What the ready-made test setups (node:test, vitest) share: reading TOOL_REPLAY_* variables, naming the
 * trace after the test file, opening the store, and judging the session at the end.
 */
import {
  FAULTS_FILE_ENV,
  FAULTS_SEED_ENV,
  type FaultVerdict,
  faultVerdict,
  faultVerdictError,
  formatFaultVerdict,
  judgeTestReplay,
  type Mode,
  rerunWithSeedEnv,
  resolveTestTrace,
  type SessionSummary,
} from '../engine/index.ts'
import { openStore, type TraceStore } from '../store/index.ts'
import { type InstallOptions, type InterceptorSession, install } from './install.ts'

export { traceNameForTestFile } from '../engine/index.ts'

/** Options for the ready-made setups; anything unset comes from TOOL_REPLAY_* variables or defaults. */
export interface TestSetupOptions extends Partial<Omit<InstallOptions, 'store'>> {
  /** Store directory; default TOOL_REPLAY_STORE, else `.tool-replay/store` under the working directory. */
  storeDir?: string
  /** An open store to use instead of opening `storeDir` (it is not closed at the end). */
  store?: TraceStore
  /** The test file, for the default trace name. */
  testFile?: string
  /** Variables to read; default process.env. */
  env?: Record<string, string | undefined>
}

/** Resolves mode, trace and store directory from options, then TOOL_REPLAY_* variables, then defaults. */
export function resolveTestSetup(options: TestSetupOptions = {}): { mode: Mode; trace: string; storeDir: string | undefined } {
  const { mode, trace } = resolveTestTrace(options)
  return { mode, trace, storeDir: options.storeDir ?? (options.env ?? process.env).TOOL_REPLAY_STORE }
}

/** An installed setup: the interceptor plus what `finish` must close. */
export interface TestSetup {
  interceptor: InterceptorSession
  /** The command that reruns this test process with the same faults seed. */
  rerun?: string
  /** Closes the session; with faults, judges coverage and contracts before the store closes. */
  finish(): Promise<{ summary: SessionSummary; faults?: FaultVerdict }>
}

/** Opens the store and installs the interceptor as the options and environment say. */
export async function startTestSetup(options: TestSetupOptions = {}): Promise<TestSetup> {
  const { mode, trace, storeDir } = resolveTestSetup(options)
  const ownsStore = options.store === undefined
  const store = options.store ?? (await openStore(storeDir))
  let interceptor: InterceptorSession
  try {
    const { storeDir: _dir, store: _store, testFile: _file, env: _env, ...rest } = options
    // The same redaction settings file as `tr-proxy` and install(): TOOL_REPLAY_CONFIG or .tool-replay/config.json.
    const config = options.config ?? ((options.env ?? process.env).TOOL_REPLAY_CONFIG || undefined)
    const env = options.env ?? process.env
    // TOOL_REPLAY_FAULTS names a faults file for every test file; its seed can be overridden per run.
    const faults = options.faults ?? (env[FAULTS_FILE_ENV] || undefined)
    // install() reads TOOL_REPLAY_FAULTS_SEED from the process itself (so the seed line says where it came from).
    const faultsSeed = options.faultsSeed ?? (options.env ? options.env[FAULTS_SEED_ENV] || undefined : undefined)
    interceptor = await install({
      ...rest,
      mode,
      trace,
      store,
      ...(config !== undefined ? { config } : {}),
      ...(faults !== undefined ? { faults } : {}),
      ...(faultsSeed !== undefined ? { faultsSeed } : {}),
    })
  } catch (err) {
    if (ownsStore) await store.close()
    throw err
  }
  const faults = interceptor.faults
  const rerun = faults && rerunWithSeedEnv([process.argv0, ...process.execArgv, ...process.argv.slice(1)], faults.seed)
  // Printed on every run, so a failing chaos run can be rerun with its seed (strict replay: the trace's seed).
  if (faults && mode !== 'replay') process.stderr.write(`tool-replay: ${faults.seedLine(rerun)}\n`)
  return {
    interceptor,
    ...(rerun !== undefined ? { rerun } : {}),
    async finish() {
      try {
        const summary = await interceptor.close()
        const verdict = await faultVerdict(interceptor.dispatcher.session)
        return verdict ? { summary, faults: verdict } : { summary }
      } finally {
        if (ownsStore) await store.close()
      }
    },
  }
}

/**
 * Ends a setup: closes everything, and for strict replay that saw a miss, an overrun or an unused
 * recording, prints the summary, sets process.exitCode = 1 and throws TR_REPLAY_INCOMPLETE. With faults,
 * a rule that never fired (TR_FAULT_NOT_FIRED) or a broken contract (TR_CONTRACT_VIOLATED) fails the same
 * way, with the seed and the command that reruns it.
 */
export async function finishTestSetup(setup: TestSetup): Promise<SessionSummary> {
  const { summary, faults } = await setup.finish()
  const seed = faults ? `\n${faults.seedLine}${setup.rerun ? `; rerun: ${setup.rerun}` : ''}` : ''
  judgeTestReplay(summary, 'Fix the app or re-record the trace (TOOL_REPLAY_MODE=record).', seed)
  const failed = faults && faultVerdictError(faults, setup.rerun)
  if (faults && failed) {
    process.stderr.write(`${formatFaultVerdict(faults)}\n${failed.code}: ${failed.message}\n`)
    process.exitCode = 1
    throw failed
  }
  return summary
}
