/**
 * Where a redirected connection was going. In a sealed run every TCP connection (and every UDP datagram other
 * than DNS) is redirected by an nft rule to a listener inside the namespace; the kernel's connection tracking
 * remembers the address and port the client asked for. /proc/<pid>/net/nf_conntrack lists it per entry as two
 * tuples: the original (client → where it meant to go) and the reply (listener → client). The entry whose reply
 * tuple comes from the listener's port and goes to the accepted socket's address and port is that connection.
 */
import { readFile } from 'node:fs/promises'

/** One direction of a tracked connection. */
export interface ConntrackTuple {
  src: string
  dst: string
  sport: number
  dport: number
}

/** One entry of the table. */
export interface ConntrackEntry {
  family: 4 | 6
  protocol: 'tcp' | 'udp'
  original: ConntrackTuple
  reply: ConntrackTuple
}

/** What to look up: the listener a connection (or datagram) was redirected to, and the client's own address. */
export interface ConntrackKey {
  protocol: 'tcp' | 'udp'
  listenerPort: number
  client: { address: string; port: number }
}

/** Where the client meant to go. */
export interface OriginalDestination {
  address: string
  port: number
}

const TUPLE_KEYS = new Set(['src', 'dst', 'sport', 'dport'])
/** TCP states of a connection that has ended; its entry lingers (TIME_WAIT: 2 min) and its tuple may be reused. */
const ENDED = new Set(['TIME_WAIT', 'CLOSE', 'CLOSE_WAIT', 'LAST_ACK', 'FIN_WAIT'])

/**
 * Parses one line of nf_conntrack; undefined for anything but a TCP or UDP entry with both tuples.
 * @example parseConntrackLine('ipv4 2 tcp 6 431999 ESTABLISHED src=… dst=… sport=… dport=… src=… dst=… sport=… dport=… [ASSURED] …')
 */
export function parseConntrackLine(line: string): ConntrackEntry | undefined {
  const tokens = line.trim().split(/\s+/)
  const family = tokens[0] === 'ipv4' ? 4 : tokens[0] === 'ipv6' ? 6 : undefined
  const protocol = tokens[2]
  if (family === undefined || (protocol !== 'tcp' && protocol !== 'udp')) return undefined
  const tuples: Array<Partial<Record<'src' | 'dst' | 'sport' | 'dport', string>>> = [{}, {}]
  let at = 0
  for (const token of tokens) {
    const eq = token.indexOf('=')
    if (eq < 0) continue
    const key = token.slice(0, eq) as 'src' | 'dst' | 'sport' | 'dport'
    if (!TUPLE_KEYS.has(key)) continue
    if (tuples[at]?.[key] !== undefined) at++
    const tuple = tuples[at]
    if (!tuple) break
    tuple[key] = token.slice(eq + 1)
  }
  const [original, reply] = tuples.map(toTuple)
  if (!original || !reply) return undefined
  return { family, protocol, original, reply }
}

function toTuple(t: Partial<Record<'src' | 'dst' | 'sport' | 'dport', string>>): ConntrackTuple | undefined {
  if (t.src === undefined || t.dst === undefined || t.sport === undefined || t.dport === undefined) return undefined
  const sport = Number(t.sport)
  const dport = Number(t.dport)
  if (!Number.isInteger(sport) || !Number.isInteger(dport)) return undefined
  return { src: t.src, dst: t.dst, sport, dport }
}

/** An address as one string whatever its spelling (IPv6 zeros compressed, lower case). */
function canonical(address: string): string {
  if (!address.includes(':')) return address
  try {
    return new URL(`http://[${address}]/`).hostname.slice(1, -1)
  } catch {
    return address.toLowerCase()
  }
}

function keyOf(protocol: string, listenerPort: number, clientAddress: string, clientPort: number): string {
  return `${protocol} ${listenerPort} ${canonical(clientAddress)} ${clientPort}`
}

/**
 * The original destination of each key in one read of the table (undefined where none matches). One pass over
 * the table, whatever the number of keys: lookups for connections accepted together share it.
 */
export function originalDestinations(table: string, keys: readonly ConntrackKey[]): Array<OriginalDestination | undefined> {
  const wanted = new Set(keys.map((k) => keyOf(k.protocol, k.listenerPort, k.client.address, k.client.port)))
  const listenerPorts = new Set(keys.map((k) => `sport=${k.listenerPort} `))
  const found = new Map<string, { destination: OriginalDestination; ended: boolean }>()
  for (const line of table.split('\n')) {
    // Most lines are other connections: skip them before tokenizing.
    if (![...listenerPorts].some((p) => line.includes(p))) continue
    const entry = parseConntrackLine(line)
    if (!entry) continue
    const key = keyOf(entry.protocol, entry.reply.sport, entry.reply.dst, entry.reply.dport)
    if (!wanted.has(key)) continue
    const ended = ENDED.has(line.split(/\s+/)[5] ?? '')
    if (found.has(key) && ended) continue
    found.set(key, { destination: { address: canonical(entry.original.dst), port: entry.original.dport }, ended })
  }
  return keys.map((k) => found.get(keyOf(k.protocol, k.listenerPort, k.client.address, k.client.port))?.destination)
}

/** How long to wait before looking again for an entry not in the table yet. */
const RETRY_MS = 5

interface Pending {
  key: ConntrackKey
  tries: number
  resolve(destination: OriginalDestination | undefined): void
  reject(err: unknown): void
}

/**
 * Looks up original destinations in one namespace's table, batched: lookups made in the same turn of the event
 * loop (connections accepted together) share one read. The table grows with every connection of the run (ended
 * ones linger in TIME_WAIT for two minutes), so it is read once per batch, never once per connection.
 */
export class ConntrackReader {
  readonly #path: string
  readonly #read: (path: string) => Promise<string>
  #pending: Pending[] = []
  #scheduled = false

  constructor(path: string, read: (path: string) => Promise<string> = (p) => readFile(p, 'utf8')) {
    this.#path = path
    this.#read = read
  }

  /** Where the connection (or datagram) with this key was going; undefined when the table has no such entry. */
  lookup(key: ConntrackKey): Promise<OriginalDestination | undefined> {
    return new Promise((resolve, reject) => this.#enqueue({ key, tries: 0, resolve, reject }))
  }

  #enqueue(p: Pending, delayMs = 0): void {
    this.#pending.push(p)
    if (this.#scheduled) return
    this.#scheduled = true
    const flush = () => void this.#flush()
    if (delayMs > 0) setTimeout(flush, delayMs)
    else setImmediate(flush)
  }

  async #flush(): Promise<void> {
    const batch = this.#pending
    this.#pending = []
    this.#scheduled = false
    let table: string
    try {
      table = await this.#read(this.#path)
    } catch (err) {
      for (const p of batch) p.reject(err)
      return
    }
    const found = originalDestinations(
      table,
      batch.map((p) => p.key),
    )
    batch.forEach((p, i) => {
      const destination = found[i]
      if (destination || p.tries >= 1) p.resolve(destination)
      else this.#enqueue({ ...p, tries: p.tries + 1 }, RETRY_MS)
    })
  }
}
