/**
 * One proxy run as the CLI does it: open the session, start the proxy (and the control API for serve),
 * then either run a command through it or serve until SIGINT/SIGTERM, and close the trace cleanly.
 */

import type { PathOptions } from '../capture/index.ts'
import {
  type FaultVerdict,
  faultVerdict,
  formatSummary,
  openSession,
  redactText,
  SESSION_SOCKET_ENV,
  type Session,
  type SessionOptions,
  type SessionSummary,
  type SharedSessionHost,
  secretEnvValues,
  shareSession,
} from '../engine/index.ts'
import type { TraceStore } from '../store/index.ts'
import { type AppRun, ErrorCodes, OUTPUT_TAIL_BYTES, type OutputTail, ToolReplayError } from '../trace/index.ts'
import { caRejectionLine } from './ca-rejection.ts'
import { type CertificateAuthority, loadCertificateAuthority } from './certificate-authority.ts'
import { type CapturedTail, type CommandExit, type RunCommandOptions, runCommand } from './command-wrapper.ts'
import { controlSocketPath, startControlApi } from './control-api.ts'
import { wrappedCommandEnvironment, writeCaBundle } from './proxy-env.ts'
import type { ProxyLimits } from './proxy-limits.ts'
import { type ProxyServer, startProxy } from './proxy-server.ts'
import type { ClosedSession, SessionRefusals } from './proxy-sessions.ts'
import { type ReverseMount, reverseEnvironment } from './reverse-routes.ts'
import { type SealedOptions, type SealedStart, startSealedCommand } from './sealed-run.ts'
import { sessionOptionsOf } from './session-spec.ts'
import { assertCommandFound } from './start-checks.ts'
import type { UpstreamOptions } from './upstream.ts'

/**
 * Loopback bypasses the proxy in a sealed run: it is the namespace's, the command's own (a test's local server),
 * which the proxy, outside the namespace, cannot reach.
 */

/** Options for `runProxySession`. */
export interface ProxyRunOptions extends Pick<PathOptions, 'pace'> {
  store: TraceStore
  /** Store directory: the CA and the control socket live there. */
  storeDir: string
  /**
   * The default session; with `sessionsOnly`, only the shared options (redaction, identity, maxBodyBytes) of
   * named sessions. Its `maxBodyBytes` is the proxy's too: one limit for the request body buffered for matching
   * and for what the session holds whole (a body redacted by JSON path).
   */
  session: Omit<SessionOptions, 'store'>
  /** No default session: every request must name a session opened through the control API. */
  sessionsOnly?: boolean
  /** Reverse mode: upstreams served on the proxy port; a wrapped command gets their base URLs beside the proxy variables. */
  reverse?: readonly ReverseMount[]
  host?: string
  /** Port; with a command the default is a free loopback port. */
  port?: number
  upstream?: UpstreamOptions
  /** See ProxyServerOptions. */
  limits?: ProxyLimits
  /** See PROXY_OPTIONS.chunkGapMs. */
  chunkGapMs?: number
  /** See ProxyServerOptions.h2c. */
  h2c?: boolean
  /** Run this command (argv) through the proxy, then stop. Without one, serve until SIGINT/SIGTERM. */
  command?: string[]
  /** Where the command runs and where its output goes (default: this process's directory, stdout and stderr). */
  commandOptions?: RunCommandOptions
  /**
   * Run the command sealed (Linux): in its own network namespace whose only way out is this proxy, so clients
   * that ignore the proxy variables are captured too (proxy/sealed-run.ts). Needs `command`.
   */
  sealed?: SealedOptions
  /** Start the control API (serve). */
  control?: boolean
  /** Status lines (stderr in the CLI). */
  log: (line: string) => void
  /** Stops a command-less run when it resolves (tests); SIGINT/SIGTERM always do. */
  stop?: Promise<void>
}

/** How a run ended. */
export interface ProxyRunResult {
  /** The default session's summary (none on a sessions-only serve). */
  summary: SessionSummary | undefined
  /** Named sessions still open when the proxy stopped, closed then. */
  sessions: readonly ClosedSession[]
  /** The wrapped command's exit, when there was one. */
  command?: CommandExit
  /** Requests refused for their session: naming none, one never opened here (a typo), or one already closed. */
  sessionRefusals: SessionRefusals
  /** With faults (default session): coverage per rule and the contracts checked on the run's trace. */
  faults?: FaultVerdict
}

/**
 * Runs the proxy for one session.
 * @example
 * const { summary, command } = await runProxySession({ store, storeDir, session: { mode: 'replay', trace: 'ci' }, command: ['npm', 'test'], log: console.error })
 */
export async function runProxySession(o: ProxyRunOptions): Promise<ProxyRunResult> {
  const ca = await loadCertificateAuthority(o.storeDir)
  const bundlePath = await writeCaBundle(o.storeDir, ca)
  const open = (options: Omit<SessionOptions, 'store'>) =>
    openSession({ onWarning: (m) => o.log(`WARNING: ${m}`), ...options, store: o.store, labels: { recordedWith: 'proxy', ...options.labels } })
  if (o.sealed && (!o.command || o.command.length === 0 || o.sessionsOnly)) {
    throw new ToolReplayError(ErrorCodes.INVALID_OPTION, '--sealed seals a command: give one after `--` (tr-proxy record|replay --sealed -- <command>).')
  }
  // A missing command fails the run with its own error before a session opens or a namespace is set up.
  if (o.command?.[0]) await assertCommandFound(o.command[0], o.commandOptions?.cwd ?? process.cwd())
  // Before the session opens: a machine that cannot seal fails the run before anything is written. The namespace
  // is then set up while the session and the proxy open (it is most of what sealing adds to a start).
  const sealed = o.sealed ? await startSealedCommand(o.command ?? [], { ...o.sealed, caBundle: bundlePath, ...commandOptionsOf(o) }) : undefined
  let session: Session | undefined
  let proxy: ProxyServer<Session | undefined>
  try {
    session = o.sessionsOnly ? undefined : await open(o.session)
    if (o.session.tail === 'live' && session) {
      o.log(
        `WARNING: --tail live: after the first unmatched request, requests go to the real upstreams and are recorded into "${o.session.recordAs}". This run is NOT offline.`,
      )
    }
    proxy = await startRunProxy(o, ca, session, bundlePath)
  } catch (err) {
    await sealed?.abort()
    throw err
  }
  const envFor = (proxyUrl: string) => commandEnvironment(o, proxy, proxyUrl, ca.certPath, bundlePath)
  let control: Awaited<ReturnType<typeof startControlApi>> | undefined
  if (o.control) {
    try {
      control = await startControlApi(proxy, controlSocketPath(o.storeDir, proxy.port), {
        onEnd: (s) => o.log(`session ended via the control API: ${s.ok ? 'ok' : 'NOT ok'}`),
        openSession: (spec) => open(sessionOptionsOf(spec, o.session)),
        onSession: (e) => o.log(e.opened ? `session "${e.name}" opened` : `session "${e.name}" closed: ${e.summary ? formatSummary(e.summary) : ''}`),
      })
    } catch (err) {
      // Refused (another serve owns this socket): nothing ran, keep the previous trace.
      await sealed?.abort()
      await session?.discard().catch(() => {})
      await proxy.close().catch(() => {})
      throw err
    }
  }
  const finish = async (command?: CommandExit): Promise<ProxyRunResult> => {
    const summary = await proxy.close()
    const sessions = proxy.sessions.leftOpen()
    for (const s of sessions) o.log(`session "${s.name}" was still open when the proxy stopped: ${formatSummary(s.summary)}`)
    const faults = session && (await faultVerdict(session))
    return { summary, sessions, sessionRefusals: proxy.sessions.refusals(), ...(command ? { command } : {}), ...(faults ? { faults } : {}) }
  }
  try {
    if (o.command && o.command.length > 0) return await finish(await runWrapped(o, proxy, session, envFor, sealed))
    logListening(o, proxy, bundlePath, control?.socketPath)
    await waitForStop(o.stop)
    return await finish()
  } finally {
    await control?.close()
  }
}

/**
 * What Tool Replay adds to the command's environment (the proxy variables pointing at `proxyUrl`). Reverse mode adds base URLs to the proxy variables, not instead of them: a request to a host no mount
 * serves must still go through the proxy (recorded, or refused in strict replay), never straight out.
 */
function commandEnvironment(
  o: ProxyRunOptions,
  proxy: ProxyServer<Session | undefined>,
  proxyUrl: string,
  caPath: string,
  bundlePath: string,
): Record<string, string> {
  const forward = wrappedCommandEnvironment({ proxyUrl, caPath, bundlePath, sealed: o.sealed !== undefined })
  return proxy.reverse ? { ...forward, ...reverseEnvironment(proxy.reverse, proxyUrl) } : forward
}

function commandOptionsOf(o: ProxyRunOptions): { commandOptions?: RunCommandOptions } {
  return o.commandOptions ? { commandOptions: o.commandOptions } : {}
}

/** The run's proxy around `session`; a proxy that fails to start discards the session (the previous trace stays). */
async function startRunProxy(
  o: ProxyRunOptions,
  ca: CertificateAuthority,
  session: Session | undefined,
  bundlePath: string,
): Promise<ProxyServer<Session | undefined>> {
  try {
    return await startProxy({
      ...(session ? { session } : {}),
      ca,
      onCaRejected: (rejection) => o.log(caRejectionLine(rejection, ca.certPath, bundlePath)),
      ...(o.reverse ? { reverse: o.reverse } : {}),
      ...(o.host ? { host: o.host } : {}),
      port: o.port ?? 0,
      ...(o.upstream ? { upstream: o.upstream } : {}),
      ...(o.pace !== undefined ? { pace: o.pace } : {}),
      ...(o.limits ? { limits: o.limits } : {}),
      ...(o.session.maxBodyBytes !== undefined ? { maxBodyBytes: o.session.maxBodyBytes } : {}),
      ...(o.chunkGapMs !== undefined ? { chunkGapMs: o.chunkGapMs } : {}),
      ...(o.h2c ? { h2c: true } : {}),
    })
  } catch (err) {
    // Nothing ran: keep the previous trace rather than replace it with an empty recording.
    await session?.discard().catch(() => {})
    throw err
  }
}

/**
 * Runs the command behind the proxy (sealed when asked), sharing the session with its children that capture on
 * their own; a command that never started discards the recording. The app run is stored with the recording.
 */
async function runWrapped(
  o: ProxyRunOptions,
  proxy: ProxyServer<Session | undefined>,
  session: Session | undefined,
  envFor: (proxyUrl: string) => Record<string, string>,
  sealed: SealedStart | undefined,
): Promise<CommandExit> {
  const command = o.command ?? []
  const [cmd, ...args] = command as [string, ...string[]]
  let exit: CommandExit
  // Child processes of the command that capture on their own (`tr-proxy mcp`) join this session's trace.
  let shared: SharedSessionHost | undefined
  try {
    shared = session && (await shareSession(session))
    const socket: Record<string, string> = shared ? { [SESSION_SOCKET_ENV]: shared.socketPath } : {}
    // Sealed, the proxy is reached on the namespace's loopback (its port there); loopback itself is the command's own.
    exit = sealed
      ? await sealed.run(proxy, (inside) => ({ ...envFor(inside), ...socket }), { upstream: o.upstream ?? {}, log: o.log })
      : await runCommand(cmd, args, { ...envFor(proxy.url), ...socket }, o.commandOptions)
  } catch (err) {
    // The command never started: discard the recording so the previous trace stays in place.
    await shared?.close(0)
    await session?.discard().catch(() => {})
    await proxy.close().catch(() => {})
    throw err
  }
  await shared?.close()
  // Stored with the recording (record, replay --record-as) when it closes: what the app made of the exchanges.
  session?.setAppRun(appRun(command, o.commandOptions?.cwd ?? process.cwd(), exit, session.redactedValues()))
  return exit
}

function logListening(o: ProxyRunOptions, proxy: ProxyServer<Session | undefined>, bundlePath: string, controlSocket: string | undefined): void {
  const what = proxy.session ? `${proxy.session.mode} of trace "${proxy.session.trace}"` : 'serve (sessions only)'
  o.log(`tr-proxy ${what} listening on ${proxy.url}`)
  if (proxy.reverse) {
    for (const m of proxy.reverse.describe(proxy.url)) o.log(`reverse: ${m.url} → ${m.upstream}`)
    const env = reverseEnvironment(proxy.reverse, proxy.url)
    o.log(
      `Point clients at it: ${Object.entries(env)
        .map(([k, v]) => `${k}=${v}`)
        .join(' ')}`,
    )
  }
  o.log(`CA: ${proxy.ca.certPath}; CA bundle: ${bundlePath}`)
  if (controlSocket) o.log(`control API: unix socket ${controlSocket} (GET /status, POST /session/end, POST /sessions, DELETE /sessions/NAME)`)
  o.log(`Route a shell through it: eval "$(tr-proxy env --port ${proxy.port}${o.host ? ` --host ${o.host}` : ''})". Stop with Ctrl-C.`)
}

/** Resolves on SIGINT or SIGTERM, or once `stop` settles (when given). */
export function waitForStop(stop?: Promise<void>): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      process.off('SIGINT', done)
      process.off('SIGTERM', done)
      resolve()
    }
    process.on('SIGINT', done)
    process.on('SIGTERM', done)
    void stop?.then(done)
  })
}

/** The command and how it ended, as the trace keeps it: the command line and output tails redacted. */
export function appRun(command: readonly string[], cwd: string, exit: CommandExit, redacted: readonly string[] = []): AppRun {
  // What the session redacted from the exchanges must not come back through the app's own output.
  const secrets = [...secretEnvValues(), ...redacted]
  const tail = (t: CapturedTail): OutputTail => {
    let text = redactText(Buffer.from(t.tail).toString('utf8'), secrets)
    // Bytes that are not UTF-8 decode to U+FFFD (3 bytes each): keep the text within what a trace accepts.
    while (Buffer.byteLength(text) > 2 * OUTPUT_TAIL_BYTES) text = text.slice(Math.ceil((Buffer.byteLength(text) - 2 * OUTPUT_TAIL_BYTES) / 3))
    return { text, bytes: t.bytes }
  }
  return {
    command: command.map((a) => redactText(a, secrets)),
    cwd,
    exit: { code: exit.code, ...(exit.signal ? { signal: exit.signal } : {}), stdout: tail(exit.stdout), stderr: tail(exit.stderr) },
  }
}
