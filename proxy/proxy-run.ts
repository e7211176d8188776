/**
 * One proxy run as the CLI does it: open the session, start the proxy (and the control API for serve),
 * then either run a command through it or serve until SIGINT/SIGTERM, and close the trace cleanly.
 */
import { type FaultVerdict, faultVerdict, openSession, type PaceOption, type SessionOptions, type SessionSummary } from '../engine/index.ts'
import type { TraceStore } from '../store/index.ts'
import { loadCertificateAuthority } from './certificate-authority.ts'
import { type CommandExit, runCommand } from './command-wrapper.ts'
import { controlSocketPath, startControlApi } from './control-api.ts'
import { proxyEnvironment, writeCaBundle } from './proxy-env.ts'
import { type ProxyLimits, startProxy } from './proxy-server.ts'
import type { UpstreamOptions } from './upstream.ts'

/** Options for `runProxySession`. */
export interface ProxyRunOptions {
  store: TraceStore
  /** Store directory: the CA and the control socket live there. */
  storeDir: string
  session: Omit<SessionOptions, 'store'>
  host?: string
  /** Port; with a command the default is a free loopback port. */
  port?: number
  upstream?: UpstreamOptions
  pace?: PaceOption
  /** See ProxyServerOptions. */
  limits?: ProxyLimits
  maxBodyBytes?: number
  chunkGapMs?: number
  /** Run this command (argv) through the proxy, then stop. Without one, serve until SIGINT/SIGTERM. */
  command?: string[]
  /** Start the control API (serve). */
  control?: boolean
  /** Status lines (stderr in the CLI). */
  log: (line: string) => void
  /** Stops a command-less run when it resolves (tests); SIGINT/SIGTERM always do. */
  stop?: Promise<void>
}

/** How a run ended. */
export interface ProxyRunResult {
  summary: SessionSummary
  /** The wrapped command's exit, when there was one. */
  command?: CommandExit
  /** With faults: coverage per rule and the contracts checked on the run's trace. */
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
  const session = await openSession({
    onWarning: (m) => o.log(`WARNING: ${m}`),
    ...o.session,
    store: o.store,
    labels: { recordedWith: 'proxy', ...o.session.labels },
  })
  if (o.session.tail === 'live') {
    o.log(
      `WARNING: --tail live: after the first unmatched request, requests go to the real upstreams and are recorded into "${o.session.recordAs}". This run is NOT offline.`,
    )
  }
  let proxy: Awaited<ReturnType<typeof startProxy>>
  try {
    proxy = await startProxy({
      session,
      ca,
      ...(o.host ? { host: o.host } : {}),
      port: o.port ?? 0,
      ...(o.upstream ? { upstream: o.upstream } : {}),
      ...(o.pace !== undefined ? { pace: o.pace } : {}),
      ...(o.limits ? { limits: o.limits } : {}),
      ...(o.maxBodyBytes !== undefined ? { maxBodyBytes: o.maxBodyBytes } : {}),
      ...(o.chunkGapMs !== undefined ? { chunkGapMs: o.chunkGapMs } : {}),
    })
  } catch (err) {
    // Nothing ran: keep the previous trace rather than replace it with an empty recording.
    await session.discard().catch(() => {})
    throw err
  }
  const env = proxyEnvironment({ proxyUrl: proxy.url, caPath: ca.certPath, bundlePath })
  let control: Awaited<ReturnType<typeof startControlApi>> | undefined
  if (o.control) {
    try {
      control = await startControlApi(proxy, controlSocketPath(o.storeDir, proxy.port), (s) =>
        o.log(`session ended via the control API: ${s.ok ? 'ok' : 'NOT ok'}`),
      )
    } catch (err) {
      // Refused (another serve owns this socket): nothing ran, keep the previous trace.
      await session.discard().catch(() => {})
      await proxy.close().catch(() => {})
      throw err
    }
  }
  try {
    if (o.command && o.command.length > 0) {
      const [cmd, ...args] = o.command as [string, ...string[]]
      let exit: CommandExit
      try {
        exit = await runCommand(cmd, args, env)
      } catch (err) {
        // The command never started: discard the recording so the previous trace stays in place.
        await session.discard().catch(() => {})
        await proxy.close().catch(() => {})
        throw err
      }
      const summary = await proxy.close()
      return { summary, command: exit, ...(await verdictOf(session)) }
    }
    o.log(`tr-proxy ${session.mode} of trace "${session.trace}" listening on ${proxy.url}`)
    o.log(`CA: ${ca.certPath}; CA bundle: ${bundlePath}`)
    if (control) o.log(`control API: unix socket ${control.socketPath} (GET /status, POST /session/end)`)
    o.log(`Route a shell through it: eval "$(tr-proxy env --port ${proxy.port}${o.host ? ` --host ${o.host}` : ''})". Stop with Ctrl-C.`)
    await waitForStop(o.stop)
    const summary = await proxy.close()
    return { summary, ...(await verdictOf(session)) }
  } finally {
    await control?.close()
  }
}

async function verdictOf(session: Awaited<ReturnType<typeof openSession>>): Promise<{ faults?: FaultVerdict }> {
  const faults = await faultVerdict(session)
  return faults ? { faults } : {}
}

function waitForStop(stop: Promise<void> | undefined): Promise<void> {
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
