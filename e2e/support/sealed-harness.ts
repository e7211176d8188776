/**
 * Helpers for the sealed-run e2e tests (e2e/sealed-*.test.ts): the CLI as a user runs it, whether this machine can
 * seal (the tests skip, saying why, where it cannot), counting listeners where stopped upstreams listened, and a
 * record-then-replay cycle of one client against local HTTPS and HTTP upstreams with their own test CA.
 */
import assert from 'node:assert/strict'
import { execFileSync, spawn } from 'node:child_process'
import { once } from 'node:events'
import { createServer as createNetServer, type Server } from 'node:net'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { probeSeal } from '../../seal/index.ts'
import { tempDir } from './proxy-harness.ts'
import { createTestPki, HELLO, startUpstream, type TestUpstream } from './proxy-upstream.ts'

const BIN = fileURLToPath(new URL('../../bin/tr-proxy.js', import.meta.url))
export const REPLAY_CONTRACT_EXIT = 69
export const SEAL_UNAVAILABLE_EXIT = 74
/** What every client fetches: an HTTPS and an HTTP URL, both by name (resolved by the sealed run's DNS). */
export const URLS = ['https://api.test/hello', 'http://plain.test/hello']
/** What every client prints: "STATUS BODY" per URL. */
export const EXPECTED = URLS.map(() => `200 ${HELLO}`)

/** Why this machine cannot seal (a real set-up tried once per test file), or undefined when it can. */
let probed: Promise<string | undefined> | undefined
export function cannotSeal(): Promise<string | undefined> {
  probed ??= probeSeal().then((p) => (p.ok ? undefined : `sealing does not work here: ${p.error.message}`))
  return probed
}

/** A store in a temp directory (removed when the test process exits), and the test PKI of the upstreams. */
export async function sealedWork(prefix: string): Promise<{ work: string; store: string; pki: Awaited<ReturnType<typeof createTestPki>> }> {
  const work = tempDir(prefix)
  return { work, store: join(work, 'store'), pki: await createTestPki(['api.test']) }
}

export interface CliRun {
  code: number | null
  stdout: string
  stderr: string
}

/** Runs `tr-proxy ARGS` (from the sources, as bin/tr-proxy.js does in a checkout). */
export function cli(args: string[], env: NodeJS.ProcessEnv = {}): Promise<CliRun> {
  const child = spawn(process.execPath, [BIN, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (c: Buffer) => (stdout += c))
  child.stderr.on('data', (c: Buffer) => (stderr += c))
  return once(child, 'exit').then(([code]) => ({ code: code as number | null, stdout, stderr }))
}

/** Listens where a stopped upstream listened, counting every connection (and answering none). */
export async function countingListener(port: number): Promise<{ readonly connections: number; close(): Promise<void> }> {
  let connections = 0
  const server: Server = createNetServer((s) => {
    connections++
    s.destroy()
  })
  server.listen(port, '127.0.0.1')
  await once(server, 'listening')
  return {
    get connections() {
      return connections
    },
    close: () => new Promise<void>((r) => server.close(() => r())),
  }
}

/**
 * Records `command` sealed against live upstreams (api.test over HTTPS, plain.test over HTTP, reached with
 * --resolve), stops them, and replays it sealed and strict against counting listeners on their ports: those must
 * see no connection. Returns both runs' stdout.
 */
export async function recordThenReplay(
  store: string,
  pki: Awaited<ReturnType<typeof createTestPki>>,
  trace: string,
  command: string[],
): Promise<{ recorded: string; replayed: string }> {
  let tls: TestUpstream | undefined = await startUpstream(pki.certs['api.test'])
  let plain: TestUpstream | undefined = await startUpstream()
  const ports = [tls.port, plain.port]
  const counting: Array<Awaited<ReturnType<typeof countingListener>>> = []
  try {
    const upstream = ['--resolve', `api.test=127.0.0.1:${tls.port}`, '--resolve', `plain.test=127.0.0.1:${plain.port}`, '--upstream-ca', pki.caPath]
    const rec = await cli(['record', '--store', store, '-t', trace, '--sealed', ...upstream, '--', ...command])
    assert.equal(rec.code, 0, `record: ${rec.stderr}`)
    assert.deepEqual(tls.requests.concat(plain.requests).sort(), ['GET /hello', 'GET /hello'], 'the recording reached the upstreams')
    await tls.close()
    await plain.close()
    tls = plain = undefined
    for (const port of ports) counting.push(await countingListener(port))
    const rep = await cli(['replay', '--store', store, '-t', trace, '--sealed', '--strict', '--', ...command])
    assert.equal(rep.code, 0, `replay: ${rep.stderr}`)
    assert.match(rep.stderr, /2 replayed, 0 recorded, 0 passed through; 0 unmatched/)
    assert.deepEqual(
      counting.map((c) => c.connections),
      [0, 0],
      'the replay opened a connection to an upstream port',
    )
    return { recorded: rec.stdout, replayed: rep.stdout }
  } finally {
    await tls?.close()
    await plain?.close()
    for (const c of counting) await c.close()
  }
}

/** Why `cmd args` cannot run here, or undefined when it can (the tests that need it skip, saying why). */
export function has(cmd: string, args: string[]): string | undefined {
  try {
    execFileSync(cmd, args, { stdio: 'ignore' })
    return undefined
  } catch (err) {
    return `${cmd} ${args.join(' ')} failed: ${(err as Error).message.split('\n')[0]}`
  }
}

let emptyRecorded: Promise<void> | undefined
/** A trace of no exchange in `store`, recorded once: what a sealed replay of traffic nobody recorded runs against. */
export function emptyTrace(store: string): Promise<void> {
  emptyRecorded ??= cli(['record', '--store', store, '-t', 'empty', '--', 'true']).then((rec) => assert.equal(rec.code, 0, rec.stderr))
  return emptyRecorded
}
