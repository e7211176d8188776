/**
 * Name resolution inside a sealed run: every name resolves to an address of its own from a range reserved for
 * benchmarking (198.18.0.0/15, RFC 2544), which no real service uses. Each connection to such an address is then
 * known by the name it meant, whatever the client puts (or does not put) in its SNI or Host header.
 * AAAA questions get no data (NOERROR, no answer): Node, Go, curl and Python then all connect over IPv4, and no
 * IPv6 range has to be routed.
 */
import type { Socket } from 'node:net'
import dnsPacket, { type Answer, type DecodedPacket, type Question } from 'dns-packet'

/** How many names one run can resolve: the addresses of 198.18.0.0/15 without those ending in .0 or .255. */
export const MAX_FAKE_NAMES = 2 * 256 * 254

/** The first address of the range, as a number. */
const BASE = (198 << 24) | (18 << 16)
/** How long a client may cache an answer, in seconds: the mapping holds for the whole run. */
const TTL = 60

/** Names and the fake addresses given to them, both ways. Case-insensitive; a trailing dot is ignored. */
export class FakeNames {
  readonly #max: number
  readonly #byName = new Map<string, string>()
  readonly #byAddress = new Map<string, string>()

  constructor(max = MAX_FAKE_NAMES) {
    this.#max = max
  }

  /** The address of `name`, given on first use. Throws once the range is used up. */
  addressOf(name: string): string {
    const key = normalName(name)
    const known = this.#byName.get(key)
    if (known) return known
    const n = this.#byName.size
    if (n >= this.#max) throw new Error(`a sealed run resolves at most ${this.#max} names; this one asked for more names than that`)
    // 254 usable addresses per /24 (.1 to .254).
    const address = numberToAddress(BASE + Math.floor(n / 254) * 256 + (n % 254) + 1)
    this.#byName.set(key, address)
    this.#byAddress.set(address, key)
    return address
  }

  /** The name an address was given to, or undefined for an address no answer gave out. */
  nameOf(address: string): string | undefined {
    return this.#byAddress.get(address)
  }
}

function normalName(name: string): string {
  return name.toLowerCase().replace(/\.$/, '')
}

function numberToAddress(n: number): string {
  return [(n >>> 24) & 255, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.')
}

const RCODE_SERVFAIL = 2

/**
 * The answer to one DNS query (a UDP payload or one message of a TCP stream), or undefined when it is not a
 * query (garbage, a response): the client's resolver then times out rather than being fed nonsense.
 * @example answerQuery(udpPayload, names) // → response bytes: A → the fake address, AAAA → no data
 */
export function answerQuery(message: Buffer, names: FakeNames): Buffer | undefined {
  let q: DecodedPacket
  try {
    q = dnsPacket.decode(message)
  } catch {
    return undefined
  }
  if (q.type !== 'query' || !q.questions || q.questions.length === 0) return undefined
  const answers: Answer[] = []
  let rcode = 0
  for (const question of q.questions) {
    try {
      answers.push(...answersFor(question, names))
    } catch {
      rcode = RCODE_SERVFAIL
    }
  }
  const flags = ((q.flags ?? 0) & dnsPacket.RECURSION_DESIRED) | dnsPacket.RECURSION_AVAILABLE | dnsPacket.AUTHORITATIVE_ANSWER | rcode
  return dnsPacket.encode({
    type: 'response',
    id: q.id ?? 0,
    flags,
    questions: q.questions,
    answers: rcode === 0 ? answers : [],
  })
}

function answersFor(question: Question, names: FakeNames): Answer[] {
  if (question.class !== undefined && question.class !== 'IN') return []
  const name = normalName(question.name)
  const loopback = name === 'localhost' || name.endsWith('.localhost')
  switch (question.type) {
    case 'A':
      return [{ type: 'A', class: 'IN', name: question.name, ttl: TTL, data: loopback ? '127.0.0.1' : names.addressOf(name) }]
    case 'AAAA':
      return loopback ? [{ type: 'AAAA', class: 'IN', name: question.name, ttl: TTL, data: '::1' }] : []
    case 'PTR': {
      const m = /^(\d+)\.(\d+)\.(\d+)\.(\d+)\.in-addr\.arpa$/.exec(name)
      const target = m && names.nameOf(`${m[4]}.${m[3]}.${m[2]}.${m[1]}`)
      return target ? [{ type: 'PTR', class: 'IN', name: question.name, ttl: TTL, data: target }] : []
    }
    default:
      return []
  }
}

/** Largest DNS message over TCP (its length prefix is 16 bits). */
const MAX_TCP_MESSAGE = 65_535
/** A DNS-over-TCP connection idle this long is closed. */
const TCP_IDLE_MS = 10_000

/**
 * Answers DNS over one TCP connection (each message prefixed by its 16-bit length, RFC 1035 §4.2.2) until the
 * client closes it or stays idle. Memory stays within one message.
 */
export function serveDnsStream(socket: Socket, names: FakeNames): void {
  let buffered: Buffer = Buffer.alloc(0)
  socket.setTimeout(TCP_IDLE_MS, () => socket.destroy())
  socket.on('error', () => socket.destroy())
  socket.on('data', (chunk: Buffer) => {
    buffered = buffered.byteLength === 0 ? chunk : Buffer.concat([buffered, chunk])
    while (buffered.byteLength >= 2) {
      const length = buffered.readUInt16BE(0)
      if (buffered.byteLength < 2 + length) break
      const answer = answerQuery(buffered.subarray(2, 2 + length), names)
      buffered = buffered.subarray(2 + length)
      if (!answer) {
        socket.destroy()
        return
      }
      const framed = Buffer.alloc(2 + answer.byteLength)
      framed.writeUInt16BE(answer.byteLength, 0)
      answer.copy(framed, 2)
      socket.write(framed)
    }
    if (buffered.byteLength > MAX_TCP_MESSAGE + 2) socket.destroy()
  })
}
