/**
 * Leaf certificates by hand-written DER. Every leaf of a CA shares issuer, key, algorithm and most
 * extensions; only serial, validity, subject and SAN change. Encoding those few fields directly and
 * signing with node:crypto takes well under a millisecond, where a general X.509 builder took ~10 ms:
 * the difference is the whole of a new host's handshake budget.
 * @note RFC 5280 profile: v3, ecdsa-with-SHA256, SAN (dNSName or iPAddress), serverAuth EKU,
 * digitalSignature key usage, CA:false, AKI/SKI. Checked against `openssl verify -x509_strict` in tests.
 */
import { type KeyObject, randomBytes, sign } from 'node:crypto'
import { isIPv4, isIPv6 } from 'node:net'

/** What stays the same for every leaf of one CA. */
export interface LeafTemplate {
  /** DER of the issuer Name (the CA's subject). */
  issuerName: Uint8Array
  /** DER SubjectPublicKeyInfo of the shared leaf key. */
  subjectPublicKeyInfo: Uint8Array
  /** DER Extension entries computed once (authority and subject key identifiers). */
  keyIdExtensions: Uint8Array[]
  /** The CA's private key (EC P-256). */
  caKey: KeyObject
}

const ECDSA_SHA256 = Buffer.from('300a06082a8648ce3d040302', 'hex')
const VERSION_3 = Buffer.from('a003020102', 'hex')
const OID_CN = Buffer.from('0603550403', 'hex')
// basicConstraints critical CA:false; keyUsage critical digitalSignature; extKeyUsage serverAuth.
const BASIC_CONSTRAINTS = Buffer.from('300c0603551d130101ff04023000', 'hex')
const KEY_USAGE = Buffer.from('300e0603551d0f0101ff040403020780', 'hex')
const EXT_KEY_USAGE = Buffer.from('30130603551d25040c300a06082b06010505070301', 'hex')
const OID_SAN = Buffer.from('0603551d11', 'hex')
const DAY_MS = 86_400_000

function len(n: number): Buffer {
  if (n < 0x80) return Buffer.from([n])
  if (n < 0x100) return Buffer.from([0x81, n])
  return Buffer.from([0x82, n >> 8, n & 0xff])
}

function tlv(tag: number, ...content: Uint8Array[]): Buffer {
  const body = Buffer.concat(content)
  return Buffer.concat([Buffer.from([tag]), len(body.byteLength), body])
}

function time(ms: number): Buffer {
  const d = new Date(ms)
  const p = (n: number) => String(n).padStart(2, '0')
  const y = d.getUTCFullYear()
  const s = `${p(d.getUTCMonth() + 1)}${p(d.getUTCDate())}${p(d.getUTCHours())}${p(d.getUTCMinutes())}${p(d.getUTCSeconds())}Z`
  // UTCTime through 2049, GeneralizedTime after (RFC 5280 4.1.2.5).
  return y < 2050 ? tlv(0x17, Buffer.from(`${p(y % 100)}${s}`)) : tlv(0x18, Buffer.from(`${y}${s}`))
}

function ipBytes(ip: string): Buffer {
  if (isIPv4(ip)) return Buffer.from(ip.split('.').map(Number))
  const [head, tail] = ip.includes('::') ? (ip.split('::') as [string, string]) : [ip, undefined]
  const words = (s: string | undefined) => (s ? s.split(':') : [])
  const h = words(head)
  const t = words(tail)
  const all = [...h, ...Array(8 - h.length - t.length).fill('0'), ...t]
  return Buffer.concat(all.map((w) => Buffer.from(w.padStart(4, '0'), 'hex')))
}

/** DER of a leaf certificate for `host` (DNS name or IP literal), valid from a day ago for 365 days. */
export function buildLeafCertificate(template: LeafTemplate, host: string, now = Date.now()): Buffer {
  const serial = randomBytes(16)
  // Positive and minimally encoded: top bit clear, second-highest set.
  serial[0] = ((serial[0] as number) & 0x7f) | 0x40
  // A name without ':' is no IPv6 literal: Node's IPv6 check compiles a large regular expression on first use
  // (~20 ms of a proxy's start, which makes a leaf for a DNS name before it listens).
  const ip = host.includes(':') ? isIPv6(host) : isIPv4(host)
  const san = ip ? tlv(0x87, ipBytes(host)) : tlv(0x82, Buffer.from(host, 'ascii'))
  // CN is limited to 64 characters; SAN carries the name either way (and is critical when the subject is empty).
  const cn = !ip && host.length <= 64
  const subject = cn ? tlv(0x30, tlv(0x31, tlv(0x30, OID_CN, tlv(0x0c, Buffer.from(host, 'utf8'))))) : tlv(0x30)
  const sanExt = tlv(0x30, OID_SAN, ...(cn ? [] : [Buffer.from('0101ff', 'hex')]), tlv(0x04, tlv(0x30, san)))
  const tbs = tlv(
    0x30,
    VERSION_3,
    tlv(0x02, serial),
    ECDSA_SHA256,
    template.issuerName,
    tlv(0x30, time(now - DAY_MS), time(now + 365 * DAY_MS)),
    subject,
    template.subjectPublicKeyInfo,
    tlv(0xa3, tlv(0x30, BASIC_CONSTRAINTS, KEY_USAGE, EXT_KEY_USAGE, sanExt, ...template.keyIdExtensions)),
  )
  const signature = sign('sha256', tbs, { key: template.caKey, dsaEncoding: 'der' })
  return tlv(0x30, tbs, ECDSA_SHA256, tlv(0x03, Buffer.from([0]), signature))
}

/** PEM armour for DER bytes. */
export function toPem(label: string, der: Uint8Array): string {
  const b64 = Buffer.from(der).toString('base64')
  return `-----BEGIN ${label}-----\n${b64.match(/.{1,64}/g)?.join('\n')}\n-----END ${label}-----\n`
}
