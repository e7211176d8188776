/**
 * A sealed run, the proxy's side: the command runs in its own network namespace (seal/), and every connection it
 * makes reaches this proxy. Connections to the proxy port are proxy connections, as today. Every other one was
 * redirected, with its original destination known: its first bytes say how to serve it (first-bytes.ts):
 * - TLS: intercepted as after a CONNECT to its server name (else the name it resolved), the original port kept;
 * - HTTP/1.x: served as plain HTTP to its Host (else the name it resolved), the original port kept;
 * - a proxy request (CONNECT, absolute form) sent to some other address: served as a proxy connection;
 * - anything else (a database, HTTP/2 without TLS, a protocol whose server speaks first and so sends nothing):
 *   the engine decides (`handleConnection`): strict replay counts a miss naming host, port and protocol and
 *   closes it; live modes relay it to its destination unrecorded. UDP other than DNS: a miss, or dropped live.
 */
import type { ChildProcess } from 'node:child_process'
import type { Socket } from 'node:net'
import type { Session } from '../engine/index.ts'
import { type Bridge, prepareSeal, type SealedDestination, type SealHandlers } from '../seal/index.ts'
import { ErrorCodes, ToolReplayError } from '../trace/index.ts'
import { type CommandExit, type RunCommandOptions, runCommand } from './command-wrapper.ts'
import { classifyFirstBytes, type FirstBytes } from './first-bytes.ts'
import type { ProxyServer } from './proxy-server.ts'
import { type ConnectionDoor, connectionDoor } from './proxy-server.ts'
import { connectRaw, type UpstreamOptions } from './upstream.ts'

/** How long a redirected connection may stay silent before it counts as a protocol whose server speaks first. */
const FIRST_BYTES_WAIT_MS = 2000

/** Options of a sealed run (`--sealed`). */
export interface SealedOptions {
  /** Host services reached live, as raw TCP (`--bridge`). */
  bridges?: readonly Bridge[]
}

/** What `startSealedCommand` needs besides the command. */
export interface SealedCommandOptions extends SealedOptions {
  /** The CA bundle (system roots + the proxy CA), mounted over the system's inside. */
  caBundle: string
  commandOptions?: RunCommandOptions
}

/** A sealed command whose namespace is being set up; `run` starts it once the proxy is up, `abort` if that fails. */
export interface SealedStart {
  /**
   * Starts the command through `proxy` with Tool Replay's variables (`envFor` the proxy's URL inside) and resolves
   * with its exit; throws the typed error when the namespace could not be set up.
   */
  run(
    proxy: ProxyServer<Session | undefined>,
    envFor: (proxyUrl: string) => Record<string, string>,
    o: { upstream: UpstreamOptions; log: (line: string) => void },
  ): Promise<CommandExit>
  /** Stops the set-up before the command ran (the session or the proxy failed to start); removes its files. */
  abort(): Promise<void>
  /** Ends a running command (a time limit): SIGTERM, passed on to it by the helper. */
  stop(): void
}

/**
 * Starts setting up a sealed run of `command` now (the helper makes the namespaces, routes, rules and mounts)
 * so it overlaps opening the session and the proxy: that set-up is most of what sealing adds to a start.
 * @example
 * const sealed = await startSealedCommand(['npm', 'test'], { caBundle })
 * const proxy = await startProxy({ session, ca })
 * const exit = await sealed.run(proxy, (url) => proxyEnvironment({ proxyUrl: url, caPath, bundlePath }), { upstream: {}, log })
 */
export async function startSealedCommand(command: readonly string[], o: SealedCommandOptions): Promise<SealedStart> {
  const plan = await prepareSeal({
    ...(o.bridges ? { bridges: o.bridges } : {}),
    caBundle: o.caBundle,
    command,
    ...(process.env.PATH !== undefined ? { path: process.env.PATH } : {}),
  })
  let helper: ChildProcess | undefined
  const exit = runCommand(plan.file, plan.args, plan.env(process.env), {
    ...o.commandOptions,
    ipc: (child) => {
      helper = child
      plan.attach(child)
    },
  })
  // A helper that could not be spawned at all fails here, not after the set-up's timeout.
  const spawned = exit.then(
    () => undefined,
    (err: unknown) => err,
  )
  const failure = Promise.race([plan.started, spawned.then((err) => (err as Error | undefined) ?? plan.started)])
  return {
    async run(proxy, envFor, options) {
      const session = proxy.session
      try {
        if (!session) throw new ToolReplayError(ErrorCodes.INVALID_OPTION, '--sealed needs a session for the command (record or replay with `-- <command>`).')
        const failed = await failure
        if (failed) throw failed
        plan.go(sealHandlers(connectionDoor(proxy), session, options.upstream, options.log), envFor(`http://127.0.0.1:${plan.proxyPort}`))
        return await exit
      } catch (err) {
        helper?.kill('SIGKILL')
        await spawned
        throw err
      } finally {
        await plan.close()
      }
    },
    async abort() {
      helper?.kill('SIGKILL')
      await spawned
      await plan.close()
    },
    stop() {
      helper?.kill('SIGTERM')
    },
  }
}

/** What the proxy does with each kind of traffic of the sealed command. */
function sealHandlers(door: ConnectionDoor, session: Session, upstream: UpstreamOptions, log: (line: string) => void): SealHandlers {
  const livePassed = new Set<string>()
  const once = (key: string, line: string) => {
    if (livePassed.has(key)) return
    livePassed.add(key)
    log(line)
  }
  return {
    proxy: (socket) => door.proxy(socket),
    connection: (socket, to) => void serveRedirected(socket, to, { door, session, upstream, once }),
    datagram: (to) => {
      const host = to.name ?? to.address
      const decision = session.handleConnection({
        transport: 'udp',
        host,
        port: to.port,
        protocol: 'UDP, not DNS',
        remedy: 'Sealed runs carry DNS and TCP only: keep this client out of the replayed run.',
      })
      if (decision.kind !== 'fail') once(`udp ${host}:${to.port}`, `sealed: UDP to ${host}:${to.port} dropped (sealed runs carry DNS and TCP only).`)
    },
    log: (line) => log(`sealed: ${line}`),
  }
}

interface ServeContext {
  door: ConnectionDoor
  session: Session
  upstream: UpstreamOptions
  once(key: string, line: string): void
}

/** Reads the first bytes of a redirected connection and serves it as they say (see the file header). */
async function serveRedirected(socket: Socket, to: SealedDestination, ctx: ServeContext): Promise<void> {
  const first = await readFirstBytes(socket, FIRST_BYTES_WAIT_MS)
  // A client that gave up before saying anything (a port probe): nothing to serve, nothing missed.
  if (first.closed && first.bytes.byteLength === 0) return
  const host = to.name ?? to.address
  const v = first.verdict
  if (v.kind === 'tls') {
    const name = v.serverName ?? host
    ctx.door.tunnel(socket, first.bytes, { hostname: name, authority: authority(name, to.port || 443) })
  } else if (v.kind === 'http' && v.proxyForm) ctx.door.proxy(socket, first.bytes)
  else if (v.kind === 'http') {
    const name = hostnameOf(v.host) ?? host
    ctx.door.tunnel(socket, first.bytes, { hostname: name, authority: authority(name, to.port || 80) })
  } else notHttp(socket, first, to, ctx)
}

/** A connection a trace cannot hold: the engine decides; strict replay closes it, live modes relay it unrecorded. */
function notHttp(socket: Socket, first: { bytes: Buffer; verdict: FirstBytes }, to: SealedDestination, ctx: ServeContext): void {
  const host = to.name ?? to.address
  const protocol = describeProtocol(first.verdict, first.bytes, to.port)
  const remedy = to.name
    ? `Bridge the service into the run (\`--bridge ${to.name}=ADDRESS:${to.port}\`), or keep this client out of the replayed run.`
    : `Reach it by a name and bridge that name into the run (\`--bridge NAME=${to.address}:${to.port}\`), or keep this client out of the replayed run.`
  const decision = ctx.session.handleConnection({ transport: 'tcp', host, port: to.port, protocol, remedy })
  if (decision.kind === 'fail' || to.port === 0) {
    socket.destroy()
    return
  }
  ctx.once(`tcp ${host}:${to.port}`, `sealed: TCP ${authority(host, to.port)} (${protocol}) passed through live, unrecorded.`)
  connectRaw(ctx.upstream, host, to.port, false).then(
    (upstream) => {
      upstream.on('error', () => socket.destroy())
      socket.on('error', () => upstream.destroy())
      if (first.bytes.byteLength > 0) upstream.write(first.bytes)
      socket.pipe(upstream)
      upstream.pipe(socket)
      socket.resume()
    },
    () => socket.destroy(),
  )
}

/** Ports whose protocol a miss names, so "5432" reads as the database it is. */
const WELL_KNOWN_PORTS: Record<number, string> = {
  21: 'FTP',
  22: 'SSH',
  25: 'SMTP',
  110: 'POP3',
  143: 'IMAP',
  465: 'SMTP',
  587: 'SMTP',
  1433: 'SQL Server',
  1521: 'Oracle',
  3306: 'MySQL',
  5432: 'PostgreSQL',
  5672: 'AMQP',
  6379: 'Redis',
  9042: 'Cassandra',
  9092: 'Kafka',
  11211: 'memcached',
  27017: 'MongoDB',
}

/** The protocol part of a miss: the port's usual protocol, then what the bytes were. */
function describeProtocol(verdict: FirstBytes, bytes: Buffer, port: number): string {
  const usual = WELL_KNOWN_PORTS[port]
  const what =
    verdict.kind === 'h2c'
      ? 'HTTP/2 without TLS (prior knowledge), which sealed runs do not capture'
      : bytes.byteLength === 0
        ? `sent nothing for ${FIRST_BYTES_WAIT_MS / 1000} s: a protocol whose server speaks first`
        : `not HTTP or TLS; first bytes ${[...bytes.subarray(0, 8)].map((b) => b.toString(16).padStart(2, '0')).join(' ')}`
  return usual ? `${usual}'s port; ${what}` : what
}

/** Waits for the first bytes until they say what the connection is, it closes, or `waitMs` passes. */
function readFirstBytes(socket: Socket, waitMs: number): Promise<{ bytes: Buffer; verdict: FirstBytes; closed: boolean }> {
  return new Promise((resolve) => {
    let bytes: Buffer = Buffer.alloc(0)
    const finish = (verdict: FirstBytes, closed: boolean) => {
      clearTimeout(timer)
      socket.off('data', onData)
      socket.off('end', onEnd)
      socket.off('close', onEnd)
      socket.pause()
      resolve({ bytes, verdict, closed })
    }
    const onData = (chunk: Buffer) => {
      bytes = bytes.byteLength === 0 ? chunk : Buffer.concat([bytes, chunk])
      const verdict = classifyFirstBytes(bytes, false)
      if (verdict.kind !== 'more') finish(verdict, false)
    }
    const onEnd = () => finish(classifyFirstBytes(bytes, true), true)
    const timer = setTimeout(() => finish(classifyFirstBytes(bytes, true), false), waitMs)
    socket.on('data', onData)
    socket.once('end', onEnd)
    socket.once('close', onEnd)
  })
}

/** The hostname of a Host header value (`api.test:8080` → `api.test`, `[::1]:80` → `::1`). */
function hostnameOf(host: string | undefined): string | undefined {
  if (!host) return undefined
  const m = /^(\[[^\]]+\]|[^:]+)(?::\d+)?$/.exec(host)
  return m ? (m[1] as string).replace(/^\[|\]$/g, '').toLowerCase() : undefined
}

function authority(host: string, port: number): string {
  return `${host.includes(':') ? `[${host}]` : host}:${port}`
}
