/**
 * Servers and peers the proxy benchmarks share: the bare limit servers, talkback and mockttp set up in their
 * replay modes, a test CA for HTTPS upstreams, bench traces, and child processes run to completion.
 */
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { writeFileSync } from 'node:fs'
import { createServer as createHttpServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import { createServer as createHttpsServer } from 'node:https'
import { type AddressInfo, createServer as createNetServer } from 'node:net'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import { getLocal, type Mockttp } from 'mockttp'
import talkbackModule from 'talkback'
import type { Exchange, SessionSummary, Trace } from 'tool-replay'
import { loadCertificateAuthority } from 'tool-replay/proxy'
import { bodyFromBytes, TRACE_FORMAT_VERSION } from 'tool-replay/trace'

/** talkback's factory. Its typings declare an ES default export, but the module is `module.exports = talkback`. */
export const talkback = talkbackModule as unknown as (typeof talkbackModule)['default']

/** The conditions flag, so children import `tool-replay/*` from the sources as this process does. */
export const NODE_ARGS = ['--conditions=tool-replay-source']

/** A free loopback port (for servers that take a port and cannot listen on 0, like talkback). */
export async function freePort(): Promise<number> {
  const server = createNetServer()
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const { port } = server.address() as AddressInfo
  await new Promise((resolve) => server.close(resolve))
  return port
}

export async function listen(server: Server): Promise<number> {
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  return (server.address() as AddressInfo).port
}

/** Closes a server and its idle keep-alive connections. */
export function closeServer(server: Server): void {
  server.closeAllConnections()
  server.close()
}

/** A test CA (made with our CA code, as the e2e tests do) and a leaf for 127.0.0.1 as PEM strings and files. */
export async function testPki(dir: string): Promise<{ caPem: string; caPath: string; cert: string; key: string; certPath: string; keyPath: string }> {
  const ca = await loadCertificateAuthority(join(dir, 'test-ca'))
  const leaf = await ca.issueLeaf('127.0.0.1')
  const certPath = join(dir, 'leaf.pem')
  const keyPath = join(dir, 'leaf-key.pem')
  writeFileSync(certPath, leaf.cert)
  writeFileSync(keyPath, leaf.key)
  return { caPem: ca.certPem, caPath: ca.certPath, cert: leaf.cert, key: leaf.key, certPath, keyPath }
}

/** A bare node:http(s) server answering every request with `handler`: the limit a proxy is measured against. */
export async function startBare(handler: (req: IncomingMessage, res: ServerResponse) => void, tls?: { cert: string; key: string }) {
  const server = tls ? createHttpsServer(tls, handler) : createHttpServer(handler)
  const port = await listen(server)
  return { port, close: () => closeServer(server) }
}

/**
 * talkback in its replay mode: `record: DISABLED` (answer from tapes, never proxy), `fallbackMode: NOT_FOUND`,
 * tapes loaded from `tapes` at start; `allowHeaders: []` so a tape matches on method, URL and body as ours
 * does (talkback's default also compares most request headers). `record: 'NEW'` records tapes instead.
 */
export async function startTalkback(options: { host: string; tapes: string; record?: 'NEW' | 'DISABLED'; https?: { keyPath: string; certPath: string } }) {
  const port = await freePort()
  const server = talkback({
    host: options.host,
    port,
    path: options.tapes,
    record: talkback.Options.RecordMode[options.record ?? 'DISABLED'],
    fallbackMode: talkback.Options.FallbackMode.NOT_FOUND,
    allowHeaders: [],
    silent: true,
    summary: false,
    ...(options.https ? { https: { enabled: true, ...options.https } } : {}),
  })
  await server.start()
  // talkback exits the process with code 0 on 'exit', SIGINT and SIGTERM, which would turn a failed bench
  // into a passing one (and hide its error): the bench closes it itself.
  const onExit = (server as unknown as { closeSignalHandler: () => void }).closeSignalHandler
  for (const event of ['exit', 'SIGINT', 'SIGTERM'] as const) process.removeListener(event, onExit)
  return { url: `${options.https ? 'https' : 'http'}://127.0.0.1:${port}`, port, close: () => server.close() }
}

/**
 * mockttp as an intercepting proxy (HTTP and CONNECT + TLS with its own generated CA), `recordTraffic: false`
 * (its documented switch for heavy traffic: no per-request history kept), rules preloaded with the recording.
 */
export async function startMockttp(): Promise<{ server: Mockttp; caPem: string }> {
  const { generateCACertificate } = await import('mockttp')
  const ca = await generateCACertificate()
  const server = getLocal({ https: { key: ca.key, cert: ca.cert }, recordTraffic: false, http2: false })
  await server.start()
  return { server, caPem: ca.cert }
}

/** A bench-only trace: `n` recordings of GET `url`, answered with `body` and `headers`. */
export function repeatedGetTrace(name: string, url: string, n: number, body: Uint8Array, headers: Array<[string, string]>): Trace {
  const b = bodyFromBytes(body)
  const exchanges: Exchange[] = []
  for (let i = 0; i < n; i++) {
    exchanges.push({
      seq: i,
      request: { method: 'GET', url, headers: [], body: null },
      outcome: { kind: 'response', response: { status: 200, statusText: 'OK', headers, body: b.ref, trailers: [] } },
      timing: { startMs: 0, headersMs: 0 },
    })
  }
  return { meta: { name, format: TRACE_FORMAT_VERSION }, exchanges, bodies: new Map([[b.ref.digest, b.bytes]]) }
}

/** Runs a Node script of bench/ in a child process and parses the JSON it prints. */
export async function runChild<T>(script: string, args: string[], env?: NodeJS.ProcessEnv): Promise<T> {
  const path = fileURLToPath(new URL(`../${script}`, import.meta.url))
  const child = spawn(process.execPath, [...NODE_ARGS, path, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: env ?? process.env })
  let out = ''
  let err = ''
  child.stdout.on('data', (c: Buffer) => (out += c))
  child.stderr.on('data', (c: Buffer) => (err += c))
  const [code] = await once(child, 'exit')
  if (code !== 0) throw new Error(`bench: ${script} exited ${code}: ${err}`)
  try {
    return JSON.parse(out) as T
  } catch {
    throw new Error(`bench: ${script} printed no JSON: ${out}\n${err}`)
  }
}

/**
 * A bench script kept running for a whole suite (`--serve`: a JSON job per line in, a JSON result per line out),
 * so its code stays compiled between runs. Each job waits at most `timeoutMs` for its answer.
 */
export function serveChild<J, T>(script: string, timeoutMs = 180_000): { run(job: J): Promise<T>; close(): Promise<void> } {
  const path = fileURLToPath(new URL(`../${script}`, import.meta.url))
  const child = spawn(process.execPath, [...NODE_ARGS, path, '--serve'], { stdio: ['pipe', 'pipe', 'pipe'] })
  const lines = createInterface({ input: child.stdout })
  let err = ''
  child.stderr.on('data', (c: Buffer) => (err += c))
  const waiting: Array<{ resolve(line: string): void; reject(e: Error): void }> = []
  lines.on('line', (line) => waiting.shift()?.resolve(line))
  child.on('exit', (code) => {
    for (const w of waiting.splice(0)) w.reject(new Error(`bench: ${script} exited ${code}: ${err}`))
  })
  return {
    async run(job) {
      let timer: NodeJS.Timeout | undefined
      const line = new Promise<string>((resolve, reject) => {
        waiting.push({ resolve, reject })
        timer = setTimeout(() => reject(new Error(`bench: ${script} gave no answer in ${timeoutMs} ms: ${err}`)), timeoutMs)
      })
      child.stdin.write(`${JSON.stringify(job)}\n`)
      try {
        return JSON.parse(await line) as T
      } finally {
        clearTimeout(timer)
      }
    },
    async close() {
      child.stdin.end()
      if (child.exitCode === null) await once(child, 'exit')
    },
  }
}

/** Throws unless a strict replay's summary is clean: every recording used once, no miss, no overrun. */
export function assertCleanReplay(summary: SessionSummary, what: string): void {
  if (summary.ok) return
  const counts = { misses: summary.misses.length, exhausted: summary.exhausted.length, unused: summary.unused.length }
  throw new Error(`bench: strict replay of ${what} was not clean: ${JSON.stringify(counts)}`)
}
