/**
 * What the shared-proxy test setups (node:test, vitest) share: every test file gets its own named session on
 * one running `tr-proxy serve` (TOOL_REPLAY_PROXY, TOOL_REPLAY_STORE), named after the file, with the trace
 * and mode the interceptor's setups would use (TOOL_REPLAY_TRACE as a group, TOOL_REPLAY_MODE). While the file
 * runs, this process's fetch goes through that session and child processes inherit proxy variables carrying
 * its name (`http://NAME:x@127.0.0.1:PORT`); at the end the session closes and strict replay judges it.
 */
import { readFile } from 'node:fs/promises'
import { rootCertificates } from 'node:tls'
import { type Dispatcher, getGlobalDispatcher, ProxyAgent, setGlobalDispatcher } from 'undici'
import { lateRequestRefusal } from '../capture/index.ts'
import type { Mode, SessionSummary } from '../engine/index.ts'
import { DispatcherShell } from '../interceptor/index.ts'
import { openSharedSession, type SharedProxyAddress, type SharedProxySession, sessionNameFrom } from '../proxy/index.ts'
import { judgeTestReplay } from './test-hooks.ts'
import { resolveTestTrace } from './test-trace.ts'

/** Options for the shared-proxy setups; anything unset comes from TOOL_REPLAY_* variables or defaults. */
export interface SharedSessionSetupOptions extends SharedProxyAddress {
  mode?: Mode
  trace?: string
  /** The session's name on the proxy; default: made from the trace name. */
  name?: string
  /** The test file, for the default trace name. */
  testFile?: string
  /** Route this process's fetch (undici's global dispatcher) through the session; default true. */
  global?: boolean
}

/** An opened setup and what `finish` undoes. */
export interface SharedSessionSetup {
  session: SharedProxySession
  /** Restores the dispatcher and variables, closes the session, resolves with its summary. */
  finish(): Promise<SessionSummary>
  /**
   * After a strict replay's judgement: this process's requests and its children's keep naming the closed
   * session, so the serve refuses them instead of letting them go out live, and each one in this process
   * fails the run (engine lateRequestRefusal).
   */
  refuseLateRequests(): Promise<void>
}

/** Opens the file's session on the shared proxy, routes this process and its children through it. */
export async function startSharedSessionSetup(options: SharedSessionSetupOptions = {}): Promise<SharedSessionSetup> {
  const { mode, trace } = resolveTestTrace(options)
  const session = await openSharedSession({ name: options.name ?? sessionNameFrom(trace), trace, mode }, options)
  let previousDispatcher: Dispatcher | undefined
  if (options.global !== false) {
    previousDispatcher = getGlobalDispatcher()
    setGlobalDispatcher(session.dispatcher)
  }
  // Children spawned by the tests inherit these: their proxy URL names this session.
  const previousEnv = new Map(Object.keys(session.env).map((k) => [k, process.env[k]]))
  Object.assign(process.env, session.env)
  return {
    session,
    async finish() {
      for (const [k, v] of previousEnv) {
        if (v === undefined) delete process.env[k]
        else process.env[k] = v
      }
      if (previousDispatcher) setGlobalDispatcher(previousDispatcher)
      return session.close()
    },
    async refuseLateRequests() {
      Object.assign(process.env, session.env)
      if (options.global === false) return
      const ca = await readFile(session.caPath, 'utf8')
      const proxy = new ProxyAgent({ uri: session.proxyUrl, requestTls: { ca: [...rootCertificates, ca] } })
      setGlobalDispatcher(new LateRequestGuard(session.trace, proxy))
    },
  }
}

/** Marks each request the run failed (it came after the judgement), then sends it to the serve, which refuses it. */
class LateRequestGuard extends DispatcherShell {
  readonly #trace: string
  readonly #proxy: Dispatcher

  constructor(trace: string, proxy: Dispatcher) {
    super()
    this.#trace = trace
    this.#proxy = proxy
  }

  override dispatch(opts: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
    lateRequestRefusal(this.#trace, opts.method, new URL(opts.path, opts.origin ?? 'http://localhost').href)
    return this.#proxy.dispatch(opts, handler)
  }

  protected override closing(): Promise<void> {
    return this.#proxy.close()
  }

  protected override destroying(err: Error | null): Promise<void> {
    return this.#proxy.destroy(err)
  }
}

/**
 * Ends a setup: closes the session, and for strict replay that saw a miss, an overrun or an unused recording,
 * prints the summary, sets process.exitCode = 1 and throws TR_REPLAY_INCOMPLETE.
 */
export async function finishSharedSessionSetup(setup: SharedSessionSetup): Promise<SessionSummary> {
  const summary = await setup.finish()
  judgeTestReplay(summary, `Session "${setup.session.name}" on the shared proxy: fix the app or re-record the trace (TOOL_REPLAY_MODE=record).`)
  return summary
}
