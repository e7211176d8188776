/**
 * The local certificate authority the proxy intercepts TLS with: an ECDSA P-256 root made on first use
 * and kept in the store directory (`<store>/ca/ca.pem`, key `<store>/ca/ca-key.pem` at mode 0600), and
 * per-host leaf certificates made in memory and cached.
 */
import { createPrivateKey, generateKeyPairSync, type KeyObject, randomBytes, webcrypto, X509Certificate } from 'node:crypto'
import { chmod, mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { createSecureContext, type SecureContext } from 'node:tls'
import type * as X509 from '@peculiar/x509'
import { ErrorCodes, ToolReplayError } from '../trace/index.ts'
import { buildLeafCertificate, type LeafTemplate, toPem } from './leaf-certificate.ts'

const ALGORITHM = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const
const DAY_MS = 86_400_000

let x509Module: Promise<typeof X509> | undefined

/**
 * @peculiar/x509 (~150 modules), loaded when a certificate is first made: making the root, or a proxy's start
 * (`warmUp`). The CLI's commands that start no proxy, and code that only imports the proxy, never load it.
 */
function x509(): Promise<typeof X509> {
  x509Module ??= (async () => {
    // @peculiar/x509 2.x reads decorator metadata at import time; reflect-metadata must load first.
    await import('reflect-metadata')
    const m = await import('@peculiar/x509')
    m.cryptoProvider.set(webcrypto as unknown as Crypto)
    return m
  })()
  return x509Module
}

/** Where a CA lives inside a store directory. */
export function caDir(storeDir: string): string {
  return join(storeDir, 'ca')
}

/** The CA certificate file inside a store directory (what clients must trust). */
export function caCertPath(storeDir: string): string {
  return join(caDir(storeDir), 'ca.pem')
}

/** A loaded CA: its PEM, and leaf TLS contexts per host, made on demand. */
export class CertificateAuthority {
  /** PEM of the root certificate; clients trust this. */
  readonly certPem: string
  /** Absolute path of the root certificate file. */
  readonly certPath: string
  readonly #keyObject: KeyObject
  // One pending promise per host so concurrent handshakes for a new host share one signing.
  readonly #contexts = new Map<string, Promise<SecureContext>>()
  #template: Promise<{ template: LeafTemplate; keyPem: string }> | undefined

  /** Use `loadCertificateAuthority`. */
  constructor(init: { certPem: string; certPath: string; key: KeyObject }) {
    this.certPem = init.certPem
    this.certPath = init.certPath
    this.#keyObject = init.key
  }

  /** Number of hosts a leaf certificate was made for (for tests and the benchmark). */
  get leafCount(): number {
    return this.#contexts.size
  }

  /** A TLS server context presenting a leaf certificate for `host` (DNS name or IP literal), cached. */
  secureContextFor(host: string): Promise<SecureContext> {
    const name = host.replace(/^\[|\]$/g, '').toLowerCase()
    let ctx = this.#contexts.get(name)
    if (!ctx) {
      ctx = this.#makeContext(name)
      // A failed signing must not poison the cache for later handshakes.
      ctx.catch(() => this.#contexts.delete(name))
      this.#contexts.set(name, ctx)
    }
    return ctx
  }

  /**
   * Prepares the shared leaf key and encodings now, so the first intercepted host does not pay for them; fails
   * with TR_PROXY_START_FAILED when the certificate library cannot use this CA.
   */
  async warmUp(): Promise<void> {
    try {
      await this.#leaf('warm-up.invalid')
    } catch (err) {
      throw caError(dirname(this.certPath), err)
    }
  }

  /** Issues a leaf certificate and its key for `host` as PEM (for test servers; not cached). */
  issueLeaf(host: string): Promise<{ cert: string; key: string }> {
    return this.#leaf(host.replace(/^\[|\]$/g, '').toLowerCase())
  }

  async #makeContext(name: string): Promise<SecureContext> {
    const { cert, key } = await this.#leaf(name)
    return createSecureContext({ cert, key, minVersion: 'TLSv1.2' })
  }

  async #leaf(name: string): Promise<{ cert: string; key: string }> {
    // One key pair for every leaf of this process: signing a certificate is cheap, making a key is not,
    // and the leaf key never leaves memory. Issuer, key and key identifiers are encoded once.
    this.#template ??= (async () => {
      const { X509Certificate: Certificate, AuthorityKeyIdentifierExtension, SubjectKeyIdentifierExtension } = await x509()
      const cert = new Certificate(this.certPem)
      const { publicKey, privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' })
      const spki = publicKey.export({ type: 'spki', format: 'der' })
      const template: LeafTemplate = {
        issuerName: new Uint8Array(cert.subjectName.toArrayBuffer()),
        subjectPublicKeyInfo: spki,
        keyIdExtensions: [
          new Uint8Array((await AuthorityKeyIdentifierExtension.create(cert, false)).rawData),
          new Uint8Array((await SubjectKeyIdentifierExtension.create(spki, false)).rawData),
        ],
        caKey: this.#keyObject,
      }
      return { template, keyPem: privateKey.export({ type: 'pkcs8', format: 'pem' }) as string }
    })()
    const { template, keyPem } = await this.#template
    return { cert: toPem('CERTIFICATE', buildLeafCertificate(template, name)), key: keyPem }
  }
}

/**
 * Loads the CA kept in `<storeDir>/ca/`, creating it on first use. Safe when several processes start at
 * once: the CA is written to a temporary directory and renamed into place; the loser loads the winner's.
 * @example
 * const ca = await loadCertificateAuthority('.tool-replay/store')
 * process.env.NODE_EXTRA_CA_CERTS = ca.certPath
 */
export async function loadCertificateAuthority(storeDir: string): Promise<CertificateAuthority> {
  const dir = caDir(storeDir)
  const certPath = join(dir, 'ca.pem')
  const keyPath = join(dir, 'ca-key.pem')
  try {
    return await readCa(certPath, keyPath)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw caError(dir, err)
  }
  try {
    await mkdir(storeDir, { recursive: true })
    const tmp = join(storeDir, `.ca-${randomBytes(6).toString('hex')}`)
    await mkdir(tmp, { mode: 0o700 })
    const { certPem, keyPem } = await createRootPem()
    await writeFile(join(tmp, 'ca-key.pem'), keyPem, { mode: 0o600 })
    await writeFile(join(tmp, 'ca.pem'), certPem, { mode: 0o644 })
    try {
      await rename(tmp, dir)
      // Readable by other users (an app container mounting the CA); the key file itself stays 0600.
      await chmod(dir, 0o755)
    } catch (err) {
      await rm(tmp, { recursive: true, force: true })
      const code = (err as NodeJS.ErrnoException).code
      if (code !== 'EEXIST' && code !== 'ENOTEMPTY') throw err
    }
    return await readCa(certPath, keyPath)
  } catch (err) {
    throw caError(dir, err)
  }
}

async function readCa(certPath: string, keyPath: string): Promise<CertificateAuthority> {
  const certPem = await readFile(certPath, 'utf8')
  const keyPem = await readFile(keyPath, 'utf8')
  const key = createPrivateKey(keyPem)
  if (key.asymmetricKeyType !== 'ec') throw new Error(`${keyPath} is not an EC key`)
  // Parsed now (Node's own parser) so a damaged ca.pem fails at load, not at the first intercepted host.
  new X509Certificate(certPem)
  return new CertificateAuthority({ certPem, certPath, key })
}

async function createRootPem(): Promise<{ certPem: string; keyPem: string }> {
  const x509Lib = await x509()
  const keys = (await webcrypto.subtle.generateKey(ALGORITHM, true, ['sign', 'verify'])) as CryptoKeyPair
  const now = Date.now()
  const cert = await x509Lib.X509CertificateGenerator.createSelfSigned({
    serialNumber: serial(),
    name: `CN=Tool Replay local CA ${randomBytes(4).toString('hex')}, O=Tool Replay`,
    notBefore: new Date(now - DAY_MS),
    notAfter: new Date(now + 10 * 365 * DAY_MS),
    signingAlgorithm: ALGORITHM,
    keys,
    extensions: [
      new x509Lib.BasicConstraintsExtension(true, 0, true),
      new x509Lib.KeyUsagesExtension(x509Lib.KeyUsageFlags.keyCertSign | x509Lib.KeyUsageFlags.cRLSign, true),
      await x509Lib.SubjectKeyIdentifierExtension.create(keys.publicKey, false),
    ],
  })
  return {
    certPem: `${cert.toString('pem').trimEnd()}\n`,
    keyPem: toPem('PRIVATE KEY', new Uint8Array(await webcrypto.subtle.exportKey('pkcs8', keys.privateKey))),
  }
}

function caError(dir: string, cause: unknown): ToolReplayError {
  return new ToolReplayError(
    ErrorCodes.PROXY_START_FAILED,
    `Failed to load or create the proxy CA in ${dir}: ${(cause as Error)?.message ?? String(cause)}. Check the directory is writable, or delete it to make a new CA (clients must then trust the new ca.pem).`,
    { cause },
  )
}

function serial(): string {
  // Positive 16-byte serial: clear the top bit.
  const b = randomBytes(16)
  b[0] = (b[0] as number) & 0x7f
  return b.toString('hex')
}
