/**
 * Bridges: host services a sealed command reaches live, in every mode (a database the tests use, say), as raw
 * TCP relayed by Tool Replay. Nothing on a bridge is recorded or replayed: it is a hole the user opens on purpose,
 * named on the command line.
 *   --bridge 5432                     loopback port 5432 inside → 127.0.0.1:5432 on the host
 *   --bridge 5432=10.0.0.7:5432       loopback port 5432 inside → that address
 *   --bridge db=127.0.0.1:5432        the name `db` (any port) → 127.0.0.1:5432
 *   --bridge db:5432=127.0.0.1:6432   the name `db`, port 5432 only → 127.0.0.1:6432
 */
import { connect, type Socket } from 'node:net'
import { ErrorCodes, ToolReplayError } from '../trace/index.ts'

/** Where a bridge leads on the host. */
export interface BridgeTarget {
  host: string
  port: number
}

/** One `--bridge`: a loopback port inside, or a name (and optionally one port of it). */
export type Bridge = { kind: 'port'; port: number; to: BridgeTarget } | { kind: 'name'; name: string; port?: number; to: BridgeTarget }

function port(text: string | undefined): number | undefined {
  if (text === undefined || !/^\d{1,5}$/.test(text)) return undefined
  const n = Number(text)
  return n >= 1 && n <= 65535 ? n : undefined
}

/**
 * Parses `--bridge` values (see the file header).
 * @example parseBridges(['5432', 'cache=127.0.0.1:6379'])
 */
export function parseBridges(values: readonly string[]): Bridge[] {
  return values.map((value) => {
    const bad = () =>
      new ToolReplayError(
        ErrorCodes.INVALID_OPTION,
        `Invalid --bridge "${value}": expected PORT (loopback port inside → the same port on the host), PORT=ADDRESS:PORT, or NAME[:PORT]=ADDRESS:PORT, e.g. --bridge 5432 or --bridge db=127.0.0.1:5432.`,
      )
    const [left = '', right] = value.split('=', 2) as [string, string | undefined]
    let to: BridgeTarget | undefined
    if (right !== undefined) {
      const m = /^(\[[^\]]+\]|[^:\s[\]]+):(\d+)$/.exec(right)
      const p = port(m?.[2])
      if (!m || p === undefined) throw bad()
      to = { host: (m[1] as string).replace(/^\[|\]$/g, ''), port: p }
    }
    const loopback = port(left)
    if (loopback !== undefined) return { kind: 'port', port: loopback, to: to ?? { host: '127.0.0.1', port: loopback } }
    const m = /^([a-z0-9]([a-z0-9.-]*[a-z0-9])?)(?::(\d+))?$/i.exec(left)
    if (!m || !to) throw bad()
    const namePort = m[3] === undefined ? undefined : port(m[3])
    if (m[3] !== undefined && namePort === undefined) throw bad()
    return { kind: 'name', name: (m[1] as string).toLowerCase(), ...(namePort !== undefined ? { port: namePort } : {}), to }
  })
}

/** The name bridge a connection to `name`:`port` takes, if any. */
export function bridgeForName(bridges: readonly Bridge[], name: string | undefined, port: number): Bridge | undefined {
  if (name === undefined) return undefined
  return bridges.find((b) => b.kind === 'name' && b.name === name && (b.port === undefined || b.port === port))
}

/**
 * Relays one connection to a bridge's target, both ways, until either side closes; `onError` hears a target that
 * cannot be reached (the client's connection is then closed, as the service's refusal would be).
 */
export function relay(client: Socket, to: BridgeTarget, onError: (err: Error) => void): void {
  const upstream = connect({ host: to.host, port: to.port })
  client.on('error', () => upstream.destroy())
  upstream.once('error', (err) => {
    onError(err)
    client.destroy()
  })
  upstream.once('connect', () => {
    upstream.setNoDelay(true)
    client.setNoDelay(true)
    client.pipe(upstream)
    upstream.pipe(client)
  })
  client.once('close', () => upstream.destroy())
  upstream.once('close', () => client.destroy())
}
