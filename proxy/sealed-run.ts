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

/** What `runSealedCommand` needs besides the command. */
export interface SealedCommandOptions extends SealedOptions {
  /** The CA bundle (system roots + the proxy CA), mounted over the system's inside. */
  caBundle: string
  upstream: UpstreamOptions
  log: (line: string) => void
  commandOptions?: RunCommandOptions
}

/**
 * Runs `command` sealed, its traffic served by `proxy` (whose default session decides what is not HTTP).
 * Throws TR_SEAL_UNAVAILABLE when the namespace cannot be set up: the command has then not run.
 */
export async function runSealedCommand(
  proxy: ProxyServer<Session | undefined>,
  command: readonly string[],
  env: Record<string, string>,
  o: SealedCommandOptions,
): Promise<CommandExit> {
  const session = proxy.session
  if (!session) throw new ToolReplayError(ErrorCodes.INVALID_OPTION, '--sealed needs a session for the command (record or replay with `-- <command>`).')
  const commandEnv = { ...process.env, ...env }
  const plan = await prepareSeal({
    proxyPort: proxy.port,
    ...(o.bridges ? { bridges: o.bridges } : {}),
    caBundle: o.caBundle,
    command,
    ...(commandEnv.PATH !== undefined ? { path: commandEnv.PATH } : {}),
  })
  const handlers = sealHandlers(connectionDoor(proxy), session, o.upstream, o.log)
  try {
    const exit = await runCommand(
      plan.file,
      plan.args,
      { ...env, ...plan.env(commandEnv) },
      { ...o.commandOptions, ipc: (child) => plan.attach(child, handlers) },
    )
    const failed = await plan.started
    if (failed) throw failed
    return exit
  } finally {
    await plan.close()
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
