/**
 * The sealed run's helper: the first process inside the run's network and mount namespaces (`unshare` execs it;
 * see sealed-namespace.ts). It
 * 1. binds Tool Replay's sockets inside the namespace (the transparent listener, DNS on loopback port 53, a sink
 *    for other UDP, the proxy port, bridged ports);
 * 2. sets the namespace up, three tools at once: `ip` (loopback up, every destination routed to loopback so it
 *    reaches netfilter), `nft` (loopback stays the command's own; every other TCP connection is redirected to
 *    the transparent listener, DNS to port 53, other UDP to the sink), `mount` (resolver files, CA bundle);
 * 3. hands every socket to Tool Replay's process over the IPC channel (that process, in the host's namespace,
 *    accepts on them: recording's upstream side keeps the live network), waits for its `go`, runs the command
 *    (stdio inherited, signals forwarded) and exits as it did.
 * It imports Node's built-ins only (and types): it starts in every sealed run, so its start is the run's cost.
 */
import { spawn } from 'node:child_process'
import { createSocket, type Socket as DatagramSocket } from 'node:dgram'
import { accessSync, constants as fsConstants } from 'node:fs'
import { createServer, type Server } from 'node:net'
import { constants } from 'node:os'
import type { FailedMessage, GoMessage, HelperConfig, HelperMessage } from './helper-protocol.ts'

// Values of helper-protocol.ts, written out: importing them would load one more module at every start.
const COMMAND_ENV_ENV = 'TOOL_REPLAY_SEAL_COMMAND_ENV'
const DNS_PORT = 53
const FORWARDED_SIGNALS: NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGQUIT']

type Handle = { message: HelperMessage; handle: Server | DatagramSocket }

class StepError extends Error {
  readonly step: FailedMessage['step']
  constructor(step: FailedMessage['step'], message: string) {
    super(message)
    this.step = step
  }
}

const config = JSON.parse(process.argv[2] ?? '{}') as HelperConfig
const started = performance.now()

main().catch((err: unknown) => {
  const step = err instanceof StepError ? err.step : 'listen'
  const detail = err instanceof Error ? err.message : String(err)
  send({ kind: 'failed', step, detail }).finally(() => process.exit(1))
})

async function main(): Promise<void> {
  const handles: Handle[] = []
  // IPv4 first: it binds while loopback is still down, and the nft rules need the ports it gets.
  const [transparent, sink, , , proxyPort] = await Promise.all([
    listenTcp(handles, 'transparent', 0, '127.0.0.1'),
    bindUdp(handles, 'sink', 0, '127.0.0.1'),
    bindUdp(handles, 'dns', DNS_PORT, '127.0.0.1'),
    listenTcp(handles, 'dns-tcp', DNS_PORT, '127.0.0.1'),
    listenTcp(handles, 'proxy', 0, '127.0.0.1'),
    ...config.bridgePorts.map((port) => listenTcp(handles, 'bridge', port, '127.0.0.1')),
  ])
  await Promise.all([
    run('routes', config.tools.ip, ['-force', '-batch', '-'], ROUTES),
    run('nft', config.tools.nft, ['-f', '-'], rules(transparent, sink)),
    config.fstab ? run('mount', config.tools.mount, ['-a', '-T', config.fstab]) : undefined,
  ])
  // ::1 exists once loopback is up; without IPv6 (disabled in the kernel) the run is IPv4 only.
  const ipv6 = await listenTcp(handles, 'transparent', transparent, '::1').then(
    () => true,
    () => false,
  )
  if (ipv6) {
    await Promise.all([
      bindUdp(handles, 'sink', sink, '::1'),
      bindUdp(handles, 'dns', DNS_PORT, '::1'),
      listenTcp(handles, 'dns-tcp', DNS_PORT, '::1'),
      listenTcp(handles, 'proxy', proxyPort, '::1'),
      ...config.bridgePorts.map((port) => listenTcp(handles, 'bridge', port, '::1')),
    ])
  }
  try {
    accessSync('/proc/self/net/nf_conntrack', fsConstants.R_OK)
  } catch (err) {
    throw new StepError('conntrack', (err as Error).message)
  }
  await Promise.all(handles.map((h) => send(h.message, h.handle)))
  // Handed over: from now on only Tool Replay's process accepts on them.
  for (const h of handles) h.handle.close()
  const go = new Promise<GoMessage>((resolve) => process.once('message', (m: GoMessage) => resolve(m)))
  await send({ kind: 'ready', transparentPort: transparent, sinkPort: sink, ipv6, setupMs: Math.round(performance.now() - started) })
  const { env } = await go
  // A probe (`tr-proxy doctor`) ends here: the parent has read the connection-tracking table.
  if (!config.command) process.exit(0)
  runCommand(config.command, env)
}

const ROUTES = 'link set lo up\nroute add local 0.0.0.0/0 dev lo\nroute add local ::/0 dev lo\n'

/** The nat rules: loopback stays the command's own; everything else goes to Tool Replay's listeners. */
function rules(transparentPort: number, sinkPort: number): string {
  return `table inet tool_replay_seal {
  chain output {
    type nat hook output priority -100; policy accept;
    ip daddr 127.0.0.0/8 return
    ip6 daddr ::1 return
    meta l4proto tcp redirect to :${transparentPort}
    udp dport ${DNS_PORT} redirect to :${DNS_PORT}
    meta l4proto udp redirect to :${sinkPort}
  }
}
`
}

async function listenTcp(handles: Handle[], role: 'transparent' | 'proxy' | 'dns-tcp' | 'bridge', port: number, host: string): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen({ port, host, backlog: 511 }, resolve)
  }).catch((err: NodeJS.ErrnoException) => {
    if (host === '::1' && role === 'transparent') throw err
    throw new StepError(
      'listen',
      `cannot listen on ${host.includes(':') ? `[${host}]` : host}:${port} inside the namespace (${role}): ${err.code ?? err.message}`,
    )
  })
  const bound = (server.address() as { port: number }).port
  handles.push({ message: { kind: 'listener', role, port: bound, family: host.includes(':') ? 6 : 4 }, handle: server })
  return bound
}

async function bindUdp(handles: Handle[], role: 'dns' | 'sink', port: number, host: string): Promise<number> {
  const socket = createSocket(host.includes(':') ? 'udp6' : 'udp4')
  await new Promise<void>((resolve, reject) => {
    socket.once('error', reject)
    socket.bind(port, host, resolve)
  }).catch((err: NodeJS.ErrnoException) => {
    throw new StepError('listen', `cannot bind UDP ${host}:${port} inside the namespace (${role}): ${err.code ?? err.message}`)
  })
  const bound = socket.address().port
  handles.push({ message: { kind: 'udp', role, port: bound, family: host.includes(':') ? 6 : 4 }, handle: socket })
  return bound
}

/** Runs one set-up tool; rejects with its stderr. `ip -force` reports a failed IPv6 route (no IPv6): that one is fine. */
function run(step: FailedMessage['step'], file: string, args: string[], input?: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { stdio: [input === undefined ? 'ignore' : 'pipe', 'ignore', 'pipe'] })
    let stderr = ''
    child.stderr?.on('data', (d: Buffer) => {
      stderr += d.toString('utf8')
    })
    child.once('error', (err) => reject(new StepError(step, `${file}: ${err.message}`)))
    child.once('close', (code) => {
      // `ip -force -batch` goes on after a failed line and names it ("Command failed -:3"): line 3 is the IPv6 route.
      const failed = [...stderr.matchAll(/Command failed \S*:(\d+)/g)].map((m) => m[1])
      const onlyIpv6Route = step === 'routes' && failed.length > 0 && failed.every((line) => line === '3')
      if (code === 0 || onlyIpv6Route) resolve()
      else reject(new StepError(step, `${[file, ...args].join(' ')} exited ${code}: ${stderr.trim() || '(no output)'}`))
    })
    child.stdin?.end(input)
  })
}

function send(message: HelperMessage, handle?: Server | DatagramSocket): Promise<void> {
  return new Promise((resolve) => {
    if (!process.send) return resolve()
    process.send(message, handle, {}, () => resolve())
  })
}

/** Starts the command with its environment and Tool Replay's variables (`added`), forwards signals, and ends as it ended. */
function runCommand(argv: string[], added: Record<string, string>): void {
  const env: NodeJS.ProcessEnv = { ...process.env }
  delete env.NODE_CHANNEL_FD
  delete env.NODE_CHANNEL_SERIALIZATION_MODE
  const kept = JSON.parse(env[COMMAND_ENV_ENV] ?? '{}') as Record<string, string | null>
  delete env[COMMAND_ENV_ENV]
  for (const [name, value] of Object.entries(kept)) {
    if (value === null) delete env[name]
    else env[name] = value
  }
  // Tool Replay's variables last: they win over the user's (NODE_EXTRA_CA_CERTS names the proxy's CA).
  Object.assign(env, added)
  const user = config.commandUser
  const [file, ...args] = user
    ? [config.tools.unshare, '--user', `--map-user=${user.uid}`, `--map-group=${user.gid}`, '--', ...argv]
    : (argv as [string, ...string[]])
  const child = spawn(file as string, args, { stdio: 'inherit', env })
  const forward = (signal: NodeJS.Signals) => () => child.kill(signal)
  for (const signal of FORWARDED_SIGNALS) process.on(signal, forward(signal))
  // Tool Replay's process went away (killed): the command's only way out went with it, so it ends too.
  process.once('disconnect', () => {
    child.kill('SIGTERM')
    setTimeout(() => child.kill('SIGKILL'), 2000).unref()
  })
  process.channel?.unref()
  child.once('error', (err) => {
    send({ kind: 'failed', step: 'command', detail: err.message }).finally(() => process.exit(127))
  })
  child.once('exit', (code, signal) => {
    if (signal) {
      // Die of the same signal, so Tool Replay sees how the command ended; exit 128+n if this one is ignored here.
      for (const s of FORWARDED_SIGNALS) process.removeAllListeners(s)
      process.kill(process.pid, signal)
      setTimeout(() => process.exit(128 + (constants.signals[signal] ?? 1)), 100)
      return
    }
    process.exit(code ?? 1)
  })
}
