/**
 * What the ready-made test setups (node:test, vitest) share: reading TOOL_REPLAY_* variables, naming the
 * trace after the test file, opening the store, and judging the session at the end.
 */
import { type FaultVerdict, faultVerdict, faultVerdictError, formatFaultVerdict, type Mode, openSession, type SessionSummary } from '../engine/index.ts'
import { FAULTS_FILE_ENV, FAULTS_SEED_ENV, rerunWithSeedEnv } from '../faults/index.ts'
import { createRecordReplayDispatcher, type InstallOptions, type InterceptorSession, install, installUndiciGlobal, loadUndici } from '../interceptor/index.ts'
import { createMemoryStore, openStore, type TraceStore } from '../store/index.ts'
import { ErrorCodes, ToolReplayError } from '../trace/index.ts'

import { judgeTestReplay } from './test-hooks.ts'
import { insideProxyRun, parentCommandLine, resolveTestTrace, type TestRunner, testRunCommand } from './test-trace.ts'

export { traceNameForTestFile } from './test-trace.ts'

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
  /** True under `tr-proxy record|replay -- <command>`: the proxy captures, nothing is installed here. */
  standsAside?: true
  /** Closes the session; with faults, judges coverage and contracts before the store closes. */
  finish(): Promise<{ summary: SessionSummary; faults?: FaultVerdict }>
}

/**
 * Opens the store and installs the interceptor as the options and environment say. The recording keeps the
 * command that runs the test file again (runner, file, test name pattern) as its `meta.app`, so the inspector
 * can rerun it: `tr-proxy replay --trace BRANCH --record-as RUN -- <that command>`, where this setup stands
 * aside (see `insideProxyRun`) and the proxy replays the file's requests and keeps its outcome.
 */
export async function startTestSetup(options: TestSetupOptions = {}, runner: TestRunner = 'node:test'): Promise<TestSetup> {
  const env = options.env ?? process.env
  if (insideProxyRun(env)) return standAside(runner)
  const { mode, trace, storeDir } = resolveTestSetup(options)
  const ownsStore = options.store === undefined
  const store = options.store ?? (await openStore(storeDir))
  const rerun = testRunCommand({
    runner,
    testFile: options.testFile ?? process.argv[1] ?? trace,
    cwd: process.cwd(),
    execArgv: process.execArgv,
    env,
    runnerCommandLine: parentCommandLine,
  })
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
      labels: { ...rerun.labels, ...rest.labels },
      ...(config !== undefined ? { config } : {}),
      ...(faults !== undefined ? { faults } : {}),
      ...(faultsSeed !== undefined ? { faultsSeed } : {}),
    })
  } catch (err) {
    if (ownsStore) await store.close()
    throw err
  }
  // Stored when the recording closes (record, update, replay with recordAs); no effect otherwise.
  interceptor.session.setAppRun({ command: rerun.command, cwd: process.cwd() })
  const faults = interceptor.faults
  const seeded = faults && rerunWithSeedEnv([process.argv0, ...process.execArgv, ...process.argv.slice(1)], faults.seed)
  // Printed on every run, so a failing chaos run can be rerun with its seed (strict replay: the trace's seed).
  if (faults && mode !== 'replay') process.stderr.write(`tool-replay: ${faults.seedLine(seeded)}\n`)
  return {
    interceptor,
    ...(seeded !== undefined ? { rerun: seeded } : {}),
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
 * Inside `tr-proxy record|replay -- <command>` the proxy records or replays this test file's requests (its
 * environment routes Node's fetch and http through it) and keeps the run's outcome: the setup installs
 * nothing globally and stores nothing, so one run is one trace, the proxy's.
 */
async function standAside(runner: TestRunner): Promise<TestSetup> {
  const [major = 0, minor = 0] = process.versions.node.split('.').map(Number)
  // NODE_USE_ENV_PROXY (Node >= 22.21, 24) is what sends fetch through the proxy: without it, requests would go straight out.
  if (!((major === 22 && minor >= 21) || major >= 24)) {
    throw new ToolReplayError(
      ErrorCodes.CAPTURE_UNAVAILABLE,
      `This ${runner} test file runs under tr-proxy, whose proxy captures its requests only on Node >= 22.21 or 24 (NODE_USE_ENV_PROXY); this is Node ${process.versions.node}. Upgrade Node, or run the file without tr-proxy (the setup captures it in-process).`,
    )
  }
  process.stderr.write(
    `tool-replay: this ${runner} test file runs under tr-proxy: its proxy records or replays the requests; the in-process setup stands aside.\n`,
  )
  // Explicitly, not left to NODE_USE_ENV_PROXY: Node sets its proxy agent up at the first fetch, and undici
  // loaded before that (by this setup or the app) would fill the global slot with a plain Agent that goes
  // straight out. node:http follows NODE_USE_ENV_PROXY, which tr-proxy sets.
  const undici = await loadUndici()
  installUndiciGlobal(undici, new undici.EnvHttpProxyAgent())
  // Not install(): it would also share its session, and a child that captures on its own (`tr-proxy mcp`) must
  // find the proxy's session, not this one. The session is never installed; it replays an empty trace, so a
  // request sent to `tr.dispatcher` by hand is refused (and fails the file) rather than going out unseen.
  const store = createMemoryStore()
  const trace = 'tr-proxy-run'
  await store.putTrace({ meta: { name: trace, format: 1 }, exchanges: [], bodies: new Map() })
  const session = await openSession({ mode: 'replay', trace, store })
  const dispatcher = createRecordReplayDispatcher({ session })
  const close = async () => {
    const summary = await session.close()
    await dispatcher.close()
    return summary
  }
  const interceptor: InterceptorSession = {
    mode: 'replay',
    trace,
    dispatcher,
    faults: undefined,
    session,
    summary: () => session.summary(),
    assertDone: () => session.assertDone(),
    uninstall: () => {},
    close,
  }
  return { interceptor, standsAside: true, finish: async () => ({ summary: await close() }) }
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
