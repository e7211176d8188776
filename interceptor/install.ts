/**
 * `install()`: one call for tests. Opens a session, builds the dispatcher, makes it global, starts the
 * node:http capture on the same session, and hands back what a test needs at the end (assertDone, close,
 * uninstall).
 */
import type { Dispatcher } from 'undici'
import { checkPathOptions, type PathOptions } from '../capture/index.ts'
import {
  type FaultClock,
  type FaultsInput,
  loadConfig,
  loadSessionFaults,
  type Mode,
  mergeRedaction,
  openSession,
  REDACTION_OPTIONS,
  type RedactionOptions,
  SESSION_OPTIONS,
  type Session,
  type SessionFaults,
  type SessionOptions,
  type SessionSummary,
  type SharedSessionHost,
  shareSession,
} from '../engine/index.ts'
import { openStore, type TraceStore } from '../store/index.ts'
import { ErrorCodes, IDENTITY_OPTIONS, type IdentityOptions, isToolReplayError, type OptionInputs, optionsFromCode, ToolReplayError } from '../trace/index.ts'
import { wrapGlobalFetch } from './fetch-answer.ts'
import { globalFetchIsCapturable, installGlobalDispatcher } from './global-dispatcher.ts'
import { installHttp2Capture } from './http2-capture.ts'
import type { NodeHttpCapture } from './node-http-capture.ts'
import { createRecordReplayDispatcher, type RecordReplayDispatcher } from './record-replay-dispatcher.ts'
import { loadUndici } from './undici-loader.ts'

/**
 * Options for install(). The declared ones take their types, defaults and checks from their declarations
 * (docs/reference.md: the session's `mode` (here default 'replay'), `recordAs`, `tail`, `keepUnused`,
 * `maxBodyBytes`, `durability`; `pace`; `identity`; `redaction`): a bad value is the TR_INVALID_OPTION its
 * flag gives, naming the option as code spells it, before anything opens. `drainAfterAbortMs` as for every
 * capture path (capture/path-options.ts).
 */
export interface InstallOptions extends PathOptions, Pick<OptionInputs<typeof SESSION_OPTIONS>, 'mode' | 'recordAs' | 'tail' | 'keepUnused' | 'durability'> {
  /** Trace name. */
  trace: string
  /** Where traces live. Default: the LevelDB store at $TOOL_REPLAY_STORE, else ./.tool-replay/store (opened here, closed by close()). */
  store?: TraceStore
  identity?: IdentityOptions
  /** Extra redaction, merged (as a union) with the settings file's and the defaults. */
  redaction?: RedactionOptions
  /**
   * The settings file whose `redaction` also applies (the same file `tr-proxy` reads): a path, or false to
   * read none. Default: $TOOL_REPLAY_CONFIG, else `.tool-replay/config.json` in the working directory if present.
   */
  config?: string | false
  /** Where forwarded fetch requests go; default a new undici Agent. (node:http requests go out as the app's would.) */
  upstream?: Dispatcher
  /** Install as the process-wide dispatcher (Node's fetch and undici). Default true. */
  global?: boolean
  /**
   * Also capture node:http/https clients (axios, got, SDKs on `http.request`) into the same trace, through
   * @mswjs/interceptors. Default true when `global` is; false leaves them to the network.
   */
  nodeHttp?: boolean
  /**
   * Also capture node:http2 clients (`http2.connect`: the AWS SDK's default handler, gRPC) into the same trace:
   * each stream is one exchange. Default true when `global` is; false leaves node:http2 alone (an HTTP/2
   * connection then also needs `nodeHttp: false`: the node:http capture reads client sockets as HTTP/1.1).
   */
  http2?: boolean
  /** Labels stored with a recorded trace. */
  labels?: Record<string, string>
  /** 'none' replays through the store even for small traces (see SessionOptions.preload). */
  preload?: 'auto' | 'none'
  /** Fault rules for requests that go live: a faults file (JSON or YAML), or the rules as an object. See docs/faults.md. */
  faults?: FaultsInput
  /** The faults seed; default TOOL_REPLAY_FAULTS_SEED, then the file's seed, then a random one. */
  faultsSeed?: string | number
  /** The clock fault schedules and waits follow (the lab's virtual clock); default the wall clock. */
  faultsClock?: FaultClock
}

/** A running interceptor: the dispatcher, its session, and the end-of-test operations. */
export interface InterceptorSession {
  readonly mode: Mode
  readonly trace: string
  /** Pass as `dispatcher:` to route single requests here without installing globally. */
  readonly dispatcher: RecordReplayDispatcher
  /** The faults of this session (seed, coverage), when `faults` was given. */
  readonly faults: SessionFaults | undefined
  /** The engine session itself: what other capture paths of this process join (`wrapMcpTransport(t, { session })`). */
  readonly session: Session
  /** The summary so far (replayed, recorded, misses, overruns, unused). */
  summary(): SessionSummary
  /** Throws TR_REPLAY_INCOMPLETE when strict replay saw a miss, an overrun or an unused recording. */
  assertDone(): void
  /** Restores the previous global dispatcher and stops the node:http capture. Idempotent. */
  uninstall(): void
  /** Uninstalls, waits for pending writes, completes the recording and returns the summary. Idempotent. */
  close(): Promise<SessionSummary>
}

/**
 * Starts recording or replaying every fetch and node:http request in this process, into one trace.
 * @example
 * const tr = await install({ mode: 'replay', trace: 'checkout', store })
 * await runCheckout()
 * tr.assertDone()
 * await tr.close()
 */
export async function install(options: InstallOptions): Promise<InterceptorSession> {
  if (options.global !== false && typeof globalThis.fetch === 'function' && !globalFetchIsCapturable()) throw captureUnavailable()
  // Checked before anything opens: a typo must not leave a store open or a trace half-recorded.
  const declared = optionsFromCode(SESSION_OPTIONS, options)
  const path = checkPathOptions(options)
  optionsFromCode(REDACTION_OPTIONS, options.redaction, 'redaction.')
  optionsFromCode(IDENTITY_OPTIONS, options.identity, 'identity.')
  const mode = declared.mode ?? 'replay'
  // Before the dispatcher exists: it goes where an app reaches it (the global slots, `tr.dispatcher`), and
  // there it is a whole undici Dispatcher (`request()`, `stream()`, ... come with undici) as it always was.
  // Importing the interceptor does not load undici (~110 ms); installing it does.
  await loadUndici()
  const sessionOptions = await installSessionOptions(options, { ...declared, mode, trace: options.trace })
  const ownStore = options.store === undefined
  const store = options.store ?? (await openStore(process.env.TOOL_REPLAY_STORE || undefined))
  let session: Session
  try {
    session = await openSession({ ...sessionOptions, store })
  } catch (err) {
    if (ownStore) await store.close()
    throw err
  }
  const dispatcher = createRecordReplayDispatcher({ session, ...(options.upstream ? { upstream: options.upstream } : {}), ...path })
  const uninstallDispatcher = options.global === false ? () => {} : both(installGlobalDispatcher(dispatcher), wrapGlobalFetch(dispatcher))
  const nodeHttp = await captureNodeHttp(options, { session, ...path }, async () => {
    // Nothing half-installed: the app's fetch must not keep going to a session that is gone.
    uninstallDispatcher()
    await session.discard().catch(() => {})
    await dispatcher.close().catch(() => {})
    if (ownStore) await store.close()
  })
  const uninstallHttp2 =
    options.global !== false && options.http2 !== false ? installHttp2Capture({ session, ...path, appSocketsHeld: nodeHttp !== undefined }) : () => {}
  // Processes the app starts that capture on their own (`tr-proxy mcp` as an MCP server command) join this trace.
  let shared: SharedSessionHost | undefined
  try {
    shared = await shareSession(session)
  } catch (err) {
    process.emitWarning(`Tool Replay: child processes cannot join this session: ${(err as Error).message}`, { type: 'ToolReplayWarning' })
  }
  const uninstall = () => {
    uninstallDispatcher()
    nodeHttp?.uninstall()
    uninstallHttp2()
  }
  let closing: Promise<SessionSummary> | undefined
  return {
    mode,
    trace: options.trace,
    dispatcher,
    faults: session.faults,
    session,
    summary: () => session.summary(),
    assertDone: () => session.assertDone(),
    uninstall,
    close() {
      closing ??= (async () => {
        uninstall()
        try {
          await shared?.close()
          return await session.close()
        } finally {
          nodeHttp?.close()
          await dispatcher.close()
          if (ownStore) await store.close()
        }
      })()
      return closing
    },
  }
}

/**
 * The session's options from the install's: the declared ones as checked (`declared`), redaction merged with
 * the config file's, the faults file loaded.
 */
async function installSessionOptions(
  options: InstallOptions,
  declared: Pick<SessionOptions, 'mode' | 'trace' | 'recordAs' | 'tail' | 'keepUnused' | 'maxBodyBytes' | 'durability'>,
): Promise<Omit<SessionOptions, 'store'>> {
  const fromFile = options.config === false ? undefined : (await loadConfig(options.config === undefined ? {} : { file: options.config })).config.redaction
  const redaction = mergeRedaction(fromFile, options.redaction)
  const faults =
    options.faults === undefined
      ? undefined
      : await loadSessionFaults(options.faults, {
          env: process.env,
          ...(options.faultsSeed !== undefined ? { seed: options.faultsSeed } : {}),
          ...(options.faultsClock ? { clock: options.faultsClock } : {}),
        })
  return {
    ...declared,
    labels: { recordedWith: 'interceptor', ...options.labels },
    ...(options.identity ? { identity: options.identity } : {}),
    redaction,
    ...(options.preload ? { preload: options.preload } : {}),
    ...(faults ? { faults } : {}),
  }
}

/** Captures node:http when the install is global and asks for it; on failure `undo` runs, then the typed error. */
async function captureNodeHttp(
  options: InstallOptions,
  path: PathOptions & { session: Session },
  undo: () => Promise<void>,
): Promise<NodeHttpCapture | undefined> {
  if (options.global === false || options.nodeHttp === false) return undefined
  try {
    // @mswjs/interceptors is loaded only when node:http is captured (not on `import`).
    return (await import('./node-http-capture.ts')).installNodeHttpCapture({ ...path, ...(options.tail ? { tail: options.tail } : {}) })
  } catch (err) {
    await undo()
    throw isToolReplayError(err)
      ? err
      : new ToolReplayError(ErrorCodes.CAPTURE_UNAVAILABLE, `Cannot capture node:http requests: ${err instanceof Error ? err.message : String(err)}`, {
          cause: err,
        })
  }
}

/** Runs both undo steps, the last one first. */
function both(first: () => void, second: () => void): () => void {
  return () => {
    second()
    first()
  }
}

/** Fail closed: a global install that the app's fetch would never see would let every request go live. */
function captureUnavailable(): ToolReplayError {
  return new ToolReplayError(
    ErrorCodes.CAPTURE_UNAVAILABLE,
    "Cannot install the Tool Replay interceptor globally here: this realm's fetch comes from another JavaScript realm (jest's test environments and vitest's vm pools copy Node's fetch into a vm context), so it reads that realm's dispatcher and every request would reach the network. Run these tests under node --test or vitest's threads/forks pool, pass `global: false` and route requests with `dispatcher: tr.dispatcher`, run the app under `tr-proxy replay`, or promote the run to a case (verifyCase runs the app in a child Node process there).",
  )
}
