/** Helpers for proxy e2e tests: a store dir with the proxy CA, a proxy per mode, and client runners. */
import { execFile } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { rootCertificates } from 'node:tls'
import { type Mode, openSession } from '../../engine/index.ts'
import { type CertificateAuthority, loadCertificateAuthority, type ProxyServer, type ReverseMount, startProxy } from '../../proxy/index.ts'
import type { TraceStore } from '../../store/index.ts'

export interface HarnessOptions {
  store: TraceStore
  storeDir: string
  mode: Mode
  trace: string
  /** The upstreams' CA and host map (tests against plain-HTTP loopback upstreams need neither). */
  upstreamCaPem?: string
  resolve?: Record<string, { host: string; port: number }>
  maxBodyBytes?: number
  recordAs?: string
  tail?: 'strict' | 'live'
  /** A CA already loaded (tests that start many proxies load it once); default: the one in storeDir. */
  ca?: CertificateAuthority
  /** Reverse-mode mounts (requests sent to the proxy as to a server). */
  reverse?: ReverseMount[]
}

/** Temp directories to remove when the test process exits (one exit listener for all of them). */
const tempDirs = new Set<string>()

/** A fresh temp directory for a test's store and CA, removed when the test process exits. */
export function tempDir(prefix = 'tr-proxy-e2e-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  if (tempDirs.size === 0) {
    process.once('exit', () => {
      for (const d of tempDirs) rmSync(d, { recursive: true, force: true })
    })
  }
  tempDirs.add(dir)
  return dir
}

/** Opens a session and starts a proxy around it. */
export async function startTestProxy(o: HarnessOptions): Promise<ProxyServer> {
  const session = await openSession({
    mode: o.mode,
    trace: o.trace,
    store: o.store,
    labels: { recordedWith: 'proxy' },
    ...(o.recordAs ? { recordAs: o.recordAs } : {}),
    ...(o.tail ? { tail: o.tail } : {}),
  })
  const ca = o.ca ?? (await loadCertificateAuthority(o.storeDir))
  return startProxy({
    session,
    ca,
    upstream: { ...(o.upstreamCaPem ? { ca: o.upstreamCaPem } : {}), ...(o.resolve ? { resolve: o.resolve } : {}) },
    ...(o.maxBodyBytes !== undefined ? { maxBodyBytes: o.maxBodyBytes } : {}),
    ...(o.reverse ? { reverse: o.reverse } : {}),
  })
}

/** Writes system roots + the proxy CA as one bundle (what clients that take one file need). */
export function writeBundle(dir: string, proxyCaPem: string): string {
  const file = join(dir, 'bundle.pem')
  writeFileSync(file, `${rootCertificates.join('\n')}\n${proxyCaPem}`)
  return file
}

/** Environment routing a child through the proxy, trusting the proxy CA. */
export function clientEnv(proxy: ProxyServer, bundle: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env }
  for (const k of ['HTTP_PROXY', 'HTTPS_PROXY', 'http_proxy', 'https_proxy']) env[k] = proxy.url
  env.NO_PROXY = ''
  env.no_proxy = ''
  env.NODE_USE_ENV_PROXY = '1'
  env.NODE_EXTRA_CA_CERTS = proxy.ca.certPath
  env.SSL_CERT_FILE = bundle
  env.REQUESTS_CA_BUNDLE = bundle
  env.CURL_CA_BUNDLE = bundle
  return env
}

/** Runs a program and resolves with its exit code and output (never rejects on a non-zero exit). */
export function run(cmd: string, args: string[], env: NodeJS.ProcessEnv, timeoutMs = 60_000): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(cmd, args, { env, timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024, encoding: 'utf8' }, (err, stdout, stderr) => {
      const code = err ? (typeof (err as { code?: unknown }).code === 'number' ? ((err as { code: number }).code as number) : 1) : 0
      resolve({ code, stdout, stderr })
    })
  })
}
