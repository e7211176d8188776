/**
 * A sealed run's namespace, from Tool Replay's side: `prepareSeal` checks the machine, writes the resolver files
 * and gives the argv that starts the helper (namespace-helper.ts) in new network and mount namespaces (and a user
 * namespace when not root); `attach` takes the helper's sockets as they arrive over the IPC channel and serves
 * what needs no proxy (DNS, bridges), handing every other connection to the caller with where it was going.
 *
 * As root: `unshare --net --mount -- node helper`; the command runs as root, as it would unsealed.
 * Not root: `unshare --user --map-root-user -- unshare --net --mount -- node helper`. The network namespace is
 * made after the user namespace has its mapping, so its connection-tracking table is readable by this user
 * (made in one step, it stays the host root's). The helper is root there (it needs that to set the namespace up);
 * the command runs in a user namespace of its own as the caller's uid and gid: what it sees as its uid is what it
 * sees unsealed, and it holds no capability over the namespace.
 */
import type { ChildProcess } from 'node:child_process'
import type { Socket as DatagramSocket, RemoteInfo } from 'node:dgram'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import type { Server, Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { ErrorCodes, ToolReplayError } from '../trace/index.ts'
import { type Bridge, bridgeForName, relay } from './bridges.ts'
import { ConntrackReader, type OriginalDestination } from './conntrack.ts'
import { answerQuery, FakeNames, serveDnsStream } from './dns-answers.ts'
import { COMMAND_ENV_ENV, type GoMessage, HELPER_CLEARED_ENV, type HelperConfig, type HelperMessage, type ReadyMessage } from './helper-protocol.ts'
import { writeResolverFiles } from './resolver-files.ts'
import { assertSealable, findExecutable, refusalError, SEAL_SIMULATE_ENV, type SealSupport } from './support.ts'

/** Where a redirected connection or datagram was going: the address and port the client used, and the name it resolved. */
export interface SealedDestination {
  address: string
  port: number
  /** The name Tool Replay's DNS gave this address to; absent for an address the command had (a literal IP). */
  name?: string
}

/** What the caller does with the sealed command's traffic. */
export interface SealHandlers {
  /** A connection to the proxy port inside the namespace (clients that honour the proxy variables). */
  proxy(socket: Socket): void
  /** A connection redirected from anywhere else (no DNS, no bridge): the caller reads it. */
  connection(socket: Socket, to: SealedDestination): void
  /** UDP other than DNS, once per destination: nothing answers it. */
  datagram(to: SealedDestination): void
  /** Status lines (a bridge that could not connect). */
  log(line: string): void
}

/** Options of `prepareSeal`. */
export interface SealOptions {
  bridges?: readonly Bridge[]
  /** The CA bundle (system roots + the proxy CA) mounted over the system's. */
  caBundle?: string
  /** The command (argv); none for a probe. */
  command?: readonly string[]
  /** The command's PATH, to find it before anything starts. */
  path?: string
}

/**
 * A prepared sealed run: the argv to spawn (with an IPC channel), then `attach` the child; once `started`, `go`
 * starts the command. The helper sets the namespace up while the caller opens its session and proxy.
 */
export interface SealPlan {
  /** What to spawn instead of the command. */
  file: string
  args: string[]
  /** Added to the spawned process's environment: the helper starts without NODE_OPTIONS and the like, kept for the command. */
  env(commandEnv: NodeJS.ProcessEnv): Record<string, string>
  /** Takes the spawned helper and the sockets it sends (nothing connects to them before `go`). */
  attach(child: ChildProcess): void
  /** Resolves once the helper is ready (undefined) or failed before the command started (the typed error). */
  readonly started: Promise<ToolReplayError | undefined>
  /** The proxy listener's port inside the namespace, for the proxy variables (once started). */
  readonly proxyPort: number | undefined
  /** Serves the sockets with `handlers` and starts the command with Tool Replay's variables `env` added (once started). */
  go(handlers: SealHandlers, env: Record<string, string>): void
  /** How long the helper took to set the namespace up, in ms (once started). */
  readonly setupMs: number | undefined
  /** Closes every socket and removes the resolver files. */
  close(): Promise<void>
}

/** How long the helper may take to set the namespace up before the run fails. */
const SETUP_TIMEOUT_MS = 15_000

/** The helper's file: beside this one from the sources, dist/seal/namespace-helper.js from the package (a build entry of its own). */
function helperPath(): string {
  const self = import.meta.url
  return fileURLToPath(new URL(self.endsWith('.ts') ? './namespace-helper.ts' : '../seal/namespace-helper.js', self))
}

/**
 * Checks this machine (throws TR_SEAL_UNAVAILABLE naming the cause and fix), writes the resolver files and
 * returns the plan of the sealed run. Nothing has started yet.
 * @example
 * const plan = await prepareSeal({ command: ['npm', 'test'] })
 * const child = spawn(plan.file, plan.args, { stdio: ['inherit', 'pipe', 'pipe', 'ipc'], env: { ...env, ...plan.env(env) } })
 * plan.attach(child)
 * if (!(await plan.started)) plan.go(handlers, { HTTPS_PROXY: `http://127.0.0.1:${plan.proxyPort}` })
 */
export async function prepareSeal(options: SealOptions): Promise<SealPlan> {
  const support = assertSealable()
  const command = options.command && options.command.length > 0 ? [...options.command] : undefined
  if (command && !findExecutable(command[0] as string, options.path)) {
    throw new ToolReplayError(
      ErrorCodes.COMMAND_FAILED,
      `Failed to start command "${command.join(' ')}": ENOENT. Check it is installed and on PATH (the command goes after \`--\`).`,
    )
  }
  const dir = await mkdtemp(join(tmpdir(), 'tr-seal-'))
  const fstab = await writeResolverFiles(dir, options.caBundle ? { caBundle: options.caBundle } : {})
  const bridges = options.bridges ?? []
  const config: HelperConfig = {
    tools: support.tools,
    bridgePorts: bridges.flatMap((b) => (b.kind === 'port' ? [b.port] : [])),
    fstab,
    ...(support.unprivileged ? { commandUser: { uid: process.getuid?.() ?? 0, gid: process.getgid?.() ?? 0 } } : {}),
    ...(command ? { command } : {}),
  }
  const helper = [process.execPath, '--disable-warning=ExperimentalWarning', helperPath(), JSON.stringify(config)]
  const { unshare } = support.tools
  const argv =
    process.env[SEAL_SIMULATE_ENV] === 'refuse'
      ? simulatedRefusal()
      : support.unprivileged
        ? [unshare, '--user', '--map-root-user', '--', unshare, '--net', '--mount', '--', ...helper]
        : [unshare, '--net', '--mount', '--', ...helper]
  return new SealRun(argv, dir, bridges, support)
}

/** A stand-in for `unshare` that fails as the kernel's refusal does (SEAL_SIMULATE_ENV=refuse). */
function simulatedRefusal(): string[] {
  const message = `unshare: unshare failed: Operation not permitted (simulated by ${SEAL_SIMULATE_ENV}=refuse)`
  return [process.execPath, '-e', `process.stderr.write(${JSON.stringify(`${message}\n`)}); process.exit(1)`]
}

class SealRun implements SealPlan {
  readonly file: string
  readonly args: string[]
  readonly started: Promise<ToolReplayError | undefined>
  readonly #dir: string
  readonly #bridges: readonly Bridge[]
  readonly #support: SealSupport
  readonly #names = new FakeNames()
  readonly #handles: Array<Server | DatagramSocket> = []
  readonly #reportedDatagrams = new Set<string>()
  #settle: (error: ToolReplayError | undefined) => void = () => {}
  #conntrack: ConntrackReader | undefined
  #ready: ReadyMessage | undefined
  #child: ChildProcess | undefined
  #handlers: SealHandlers | undefined
  #proxyPort: number | undefined
  #tableLost = false
  #stderr = ''

  constructor(argv: string[], dir: string, bridges: readonly Bridge[], support: SealSupport) {
    ;[this.file, ...this.args] = argv as [string, ...string[]]
    this.#dir = dir
    this.#bridges = bridges
    this.#support = support
    this.started = new Promise((resolve) => {
      this.#settle = resolve
    })
  }

  get setupMs(): number | undefined {
    return this.#ready?.setupMs
  }

  get proxyPort(): number | undefined {
    return this.#ready ? this.#proxyPort : undefined
  }

  go(handlers: SealHandlers, env: Record<string, string>): void {
    if (!this.#ready || !this.#child) throw new Error('go() before the sealed run started')
    this.#handlers = handlers
    const go: GoMessage = { kind: 'go', env }
    this.#child.send(go)
  }

  env(commandEnv: NodeJS.ProcessEnv): Record<string, string> {
    const kept = Object.fromEntries(HELPER_CLEARED_ENV.map((name) => [name, commandEnv[name] ?? null]))
    return { ...Object.fromEntries(HELPER_CLEARED_ENV.map((name) => [name, ''])), [COMMAND_ENV_ENV]: JSON.stringify(kept) }
  }

  attach(child: ChildProcess): void {
    this.#child = child
    const timer = setTimeout(() => {
      child.kill('SIGKILL')
      this.#settle(new ToolReplayError(ErrorCodes.SEAL_UNAVAILABLE, `Failed to seal the command: the namespace was not set up within ${SETUP_TIMEOUT_MS} ms.`))
    }, SETUP_TIMEOUT_MS)
    timer.unref()
    // unshare's own refusal goes to stderr before any helper runs: kept to say why.
    child.stderr?.on('data', (d: Buffer) => {
      if (!this.#ready && this.#stderr.length < 4096) this.#stderr += d.toString('utf8')
    })
    child.on('message', (message: HelperMessage, handle: unknown) => {
      if (message.kind === 'listener') this.#listener(message, handle as Server)
      else if (message.kind === 'udp') this.#datagrams(message, handle as DatagramSocket)
      else if (message.kind === 'failed') {
        clearTimeout(timer)
        this.#settle(message.step === 'command' ? commandError(message.detail) : refusalError(message, this.#support))
      } else if (message.kind === 'ready') {
        clearTimeout(timer)
        void this.#start(child, message)
      }
    })
    child.once('exit', (_code, signal) => {
      clearTimeout(timer)
      if (this.#ready) return
      this.#settle(
        signal
          ? new ToolReplayError(ErrorCodes.SEAL_UNAVAILABLE, `Failed to seal the command: its set-up was stopped by ${signal} before the command started.`)
          : refusalError({ stderr: this.#stderr }, this.#support),
      )
    })
  }

  /** The helper is ready: the table must be readable from here before the command may start. */
  async #start(child: ChildProcess, ready: ReadyMessage): Promise<void> {
    const table = `/proc/${child.pid}/net/nf_conntrack`
    try {
      await readFile(table, 'utf8')
    } catch (err) {
      child.kill('SIGKILL')
      this.#settle(refusalError({ kind: 'failed', step: 'conntrack', detail: `${table}: ${(err as Error).message}` }, this.#support))
      return
    }
    this.#conntrack = new ConntrackReader(table)
    this.#ready = ready
    this.#settle(undefined)
  }

  #listener(m: Extract<HelperMessage, { kind: 'listener' }>, server: Server): void {
    this.#handles.push(server)
    if (m.role === 'proxy' && m.family === 4) this.#proxyPort = m.port
    server.on('connection', (socket: Socket) => {
      socket.on('error', () => socket.destroy())
      // Nothing inside runs before go(); a connection without handlers is a bug, closed rather than served.
      const handlers = this.#handlers
      if (!handlers) {
        socket.destroy()
        return
      }
      if (m.role === 'proxy') handlers.proxy(socket)
      else if (m.role === 'dns-tcp') serveDnsStream(socket, this.#names)
      else if (m.role === 'bridge') {
        const bridge = this.#bridges.find((b) => b.kind === 'port' && b.port === m.port)
        if (bridge) relay(socket, bridge.to, (err) => handlers.log(bridgeFailure(`127.0.0.1:${m.port}`, bridge.to, err)))
        else socket.destroy()
      } else void this.#redirected(socket, m.port, handlers)
    })
  }

  async #redirected(socket: Socket, listenerPort: number, handlers: SealHandlers): Promise<void> {
    const client = { address: socket.remoteAddress ?? '', port: socket.remotePort ?? 0 }
    const found = await this.#conntrack?.lookup({ protocol: 'tcp', listenerPort, client }).catch((err: Error) => {
      // Read once when ready, so this is the table going away (the namespace ending): said once, served by its bytes.
      if (!this.#tableLost) handlers.log(`the connection-tracking table could not be read (${err.message}): connections are served by what they send`)
      this.#tableLost = true
      return undefined
    })
    if (socket.destroyed) return
    const to = destination(found, this.#names)
    if (to.port === 53) return serveDnsStream(socket, this.#names)
    const bridge = bridgeForName(this.#bridges, to.name, to.port)
    if (bridge) return relay(socket, bridge.to, (err) => handlers.log(bridgeFailure(`${to.name}:${to.port}`, bridge.to, err)))
    handlers.connection(socket, to)
  }

  #datagrams(m: Extract<HelperMessage, { kind: 'udp' }>, socket: DatagramSocket): void {
    this.#handles.push(socket)
    socket.on('error', () => {})
    socket.on('message', (payload: Buffer, from: RemoteInfo) => {
      const handlers = this.#handlers
      if (!handlers) return
      if (m.role === 'dns') {
        const answer = answerQuery(payload, this.#names)
        if (answer) socket.send(answer, from.port, from.address)
        return
      }
      const client = { address: from.address, port: from.port }
      void this.#conntrack?.lookup({ protocol: 'udp', listenerPort: m.port, client }).then(
        (found) => {
          const to = destination(found, this.#names)
          const key = `${to.address}:${to.port}`
          if (this.#reportedDatagrams.has(key)) return
          this.#reportedDatagrams.add(key)
          handlers.datagram(to)
        },
        () => {},
      )
    })
  }

  async close(): Promise<void> {
    for (const h of this.#handles) {
      try {
        h.close()
      } catch {
        // Already closed.
      }
    }
    this.#handles.length = 0
    await rm(this.#dir, { recursive: true, force: true })
  }
}

/** The destination with its name, or an unknown one (the table had no entry: a bug or a race, named as such). */
function destination(found: OriginalDestination | undefined, names: FakeNames): SealedDestination {
  if (!found) return { address: 'unknown', port: 0 }
  const name = names.nameOf(found.address)
  return name ? { ...found, name } : found
}

function bridgeFailure(from: string, to: { host: string; port: number }, err: Error): string {
  return `bridge ${from} → ${to.host}:${to.port}: ${(err as NodeJS.ErrnoException).code ?? err.message}; the command's connection was closed. Check that the service runs on the host.`
}

function commandError(detail: string): ToolReplayError {
  return new ToolReplayError(
    ErrorCodes.COMMAND_FAILED,
    `Failed to start the sealed command: ${detail}. Check it is installed and on PATH (the command goes after \`--\`).`,
  )
}

/** What a probe of sealing found: it works (with its set-up time), or the typed error saying why not. */
export type SealProbe = { ok: true; setupMs: number; totalMs: number } | { ok: false; error: ToolReplayError }

/**
 * Tries a sealed run's set-up for real, without a command (what `tr-proxy doctor` reports): the namespaces, the
 * routes, the nft rules, the mounts, and the connection-tracking table read from this process.
 */
export async function probeSeal(): Promise<SealProbe> {
  const { spawn } = await import('node:child_process')
  const t0 = performance.now()
  let plan: SealPlan
  try {
    plan = await prepareSeal({})
  } catch (err) {
    if (err instanceof ToolReplayError) return { ok: false, error: err }
    throw err
  }
  const child = spawn(plan.file, plan.args, { stdio: ['ignore', 'ignore', 'pipe', 'ipc'], env: { ...process.env, ...plan.env(process.env) } })
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  const ignore = () => {}
  plan.attach(child)
  const error = await plan.started
  if (!error) plan.go({ proxy: (s) => s.destroy(), connection: (s) => s.destroy(), datagram: ignore, log: ignore }, {})
  const totalMs = Math.round(performance.now() - t0)
  await exited
  await plan.close()
  return error ? { ok: false, error } : { ok: true, setupMs: plan.setupMs ?? 0, totalMs }
}
