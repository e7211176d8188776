/**
 * What a redirected connection speaks, read from its first bytes (a sealed run's transparent listener; the
 * client never said where it was going, so its first bytes say how to serve it). Pure.
 * - TLS: a handshake record (0x16); the server name of its ClientHello (SNI), when it sends one.
 * - HTTP/1.x: a request line; a CONNECT or an absolute-form target is a proxy request (a client configured with
 *   a proxy that is not ours); else the Host header of the first request.
 * - HTTP/2 with prior knowledge (h2c): its connection preface.
 * - anything else: not something a trace can hold.
 */

/** What the first bytes say; `more` when they cannot tell yet. */
export type FirstBytes =
  | { kind: 'tls'; serverName: string | undefined }
  | { kind: 'http'; proxyForm: boolean; host: string | undefined }
  | { kind: 'h2c' }
  | { kind: 'other' }
  | { kind: 'more' }

/** Past this many bytes a head that is still incomplete is judged as it stands. */
export const FIRST_BYTES_LIMIT = 16 * 1024

const H2_PREFACE = 'PRI * HTTP/2.0\r\n'
const REQUEST_LINE = /^([A-Z][A-Z0-9_-]{0,31}) (\S+) HTTP\/1\.[01]\r?\n/
/** A method token so far, before the line ends: it may still become a request line. */
const METHOD_SO_FAR = /^[A-Z][A-Z0-9_-]{0,31}( \S*( H(T(T(P(\/(1(\.[01]?)?)?)?)?)?)?)?)?$/

/**
 * Classifies a connection by the bytes it sent first. `complete`: no more will come within the wait (judge what
 * is there).
 * @example classifyFirstBytes(Buffer.from('GET / HTTP/1.1\r\nHost: api.test\r\n\r\n'), false) // { kind: 'http', proxyForm: false, host: 'api.test' }
 */
export function classifyFirstBytes(bytes: Buffer, complete: boolean): FirstBytes {
  if (bytes.byteLength === 0) return complete ? { kind: 'other' } : { kind: 'more' }
  const judge = complete || bytes.byteLength >= FIRST_BYTES_LIMIT
  if (bytes[0] === 0x16) {
    const hello = clientHelloServerName(bytes)
    if (hello === 'more' && !judge) return { kind: 'more' }
    return { kind: 'tls', serverName: hello === 'more' ? undefined : hello }
  }
  const text = bytes.subarray(0, FIRST_BYTES_LIMIT).toString('latin1')
  if (H2_PREFACE.startsWith(text.slice(0, H2_PREFACE.length))) {
    if (text.length >= H2_PREFACE.length) return { kind: 'h2c' }
    return judge ? { kind: 'other' } : { kind: 'more' }
  }
  const line = REQUEST_LINE.exec(text)
  if (!line) {
    const firstLine = text.split('\n', 1)[0] as string
    return !judge && !text.includes('\n') && METHOD_SO_FAR.test(firstLine) ? { kind: 'more' } : { kind: 'other' }
  }
  const [, method, target] = line as unknown as [string, string, string]
  const proxyForm = method === 'CONNECT' || /^[a-z][a-z0-9+.-]*:\/\//i.test(target)
  if (proxyForm) return { kind: 'http', proxyForm, host: undefined }
  const headEnd = text.indexOf('\r\n\r\n')
  if (headEnd < 0 && !judge) return { kind: 'more' }
  const head = headEnd < 0 ? text : text.slice(0, headEnd)
  const host = /\r?\nhost:[ \t]*([^\r\n]*)/i.exec(head)?.[1]?.trim()
  return { kind: 'http', proxyForm: false, host: host || undefined }
}

/**
 * The SNI host name of a TLS ClientHello at the start of `bytes` (RFC 8446 §4.1.2, RFC 6066 §3); undefined when
 * the hello has none (or is not one); `more` when its first record is not all there yet.
 */
export function clientHelloServerName(bytes: Buffer): string | undefined | 'more' {
  if (bytes.byteLength < 5) return 'more'
  const recordLength = bytes.readUInt16BE(3)
  const record = bytes.subarray(5, 5 + recordLength)
  const found = serverNameIn(record)
  if (found !== undefined) return found
  return record.byteLength < recordLength ? 'more' : undefined
}

/** The server name in (the start of) a handshake record holding a ClientHello; undefined if not found in what is there. */
function serverNameIn(record: Buffer): string | undefined {
  if (record[0] !== 0x01) return undefined
  let at = 4 + 2 + 32 // handshake header, client_version, random
  // session_id (1-byte length), cipher_suites (2), compression_methods (1)
  for (const lengthBytes of [1, 2, 1]) {
    if (at + lengthBytes > record.byteLength) return undefined
    at += lengthBytes + (lengthBytes === 1 ? (record[at] as number) : record.readUInt16BE(at))
  }
  if (at + 2 > record.byteLength) return undefined
  const end = at + 2 + record.readUInt16BE(at)
  at += 2
  while (at + 4 <= Math.min(end, record.byteLength)) {
    const type = record.readUInt16BE(at)
    const length = record.readUInt16BE(at + 2)
    at += 4
    if (type !== 0x0000) {
      at += length
      continue
    }
    // server_name_list: its length (2), then entries of type (1; 0 = host_name), length (2) and name.
    for (let p = at + 2; p + 3 <= at + length && p + 3 <= record.byteLength; ) {
      const nameLength = record.readUInt16BE(p + 1)
      if (p + 3 + nameLength > record.byteLength) return undefined
      if (record[p] === 0)
        return record
          .subarray(p + 3, p + 3 + nameLength)
          .toString('latin1')
          .toLowerCase()
      p += 3 + nameLength
    }
    return undefined
  }
  return undefined
}
