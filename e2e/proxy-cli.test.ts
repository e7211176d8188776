/**
 * The `tr-proxy` proxy commands as a user runs them: wrapping a command (record, strict replay with
 * exit 69), signals, `env`, `ca`, and `serve` with its control API while another CLI reads the store.
 */
import assert from 'node:assert/strict'
import { type ChildProcess, spawn } from 'node:child_process'
import { once } from 'node:events'
import { readFileSync } from 'node:fs'
import { request as httpRequest } from 'node:http'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { controlSocketPath } from '../proxy/index.ts'
import { tempDir } from './support/proxy-harness.ts'
import { createTestPki, HELLO, JSON_BODY, startUpstream, type TestUpstream } from './support/proxy-upstream.ts'

const BIN = fileURLToPath(new URL('../bin/tr-proxy.js', import.meta.url))
const REPLAY_CONTRACT_EXIT = 69

let pki: Awaited<ReturnType<typeof createTestPki>>
let up: TestUpstream
const work = tempDir('tr-proxy-cli-')
const store = join(work, 'store')
let upstreamCa: string

before(async () => {
  pki = await createTestPki(['api.test'])
  upstreamCa = pki.caPath
  up = await startUpstream(pki.certs['api.test'])
})
after(async () => {
  await up?.close()
})

function cli(
  args: string[],
  env: NodeJS.ProcessEnv = {},
  detached = false,
): { child: ChildProcess; done: Promise<{ code: number | null; stdout: string; stderr: string }> } {
  const child = spawn(process.execPath, [BIN, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'], detached })
  let stdout = ''
  let stderr = ''
  child.stdout?.on('data', (c: Buffer) => (stdout += c))
  child.stderr?.on('data', (c: Buffer) => (stderr += c))
  const done = once(child, 'exit').then(([code]) => ({ code: code as number | null, stdout, stderr }))
  return { child, done }
}

function proxyArgs(): string[] {
  return ['--store', store, '--resolve', `api.test=127.0.0.1:${up.port}`, '--upstream-ca', upstreamCa]
}

const NODE_FETCH = 'const r = await fetch(process.argv[1]); process.stdout.write(await r.text())'

function unixRequest(socketPath: string, method: string, path: string): Promise<{ status: number; body: unknown }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ socketPath, method, path }, (res) => {
      let text = ''
      res.on('data', (c: Buffer) => (text += c))
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) }))
    })
    req.on('error', reject)
    req.end()
  })
}

describe('tr-proxy record/replay -- command', { timeout: 120_000 }, () => {
  test('records curl and Node fetch through the wrapper, replays them strictly offline, exits 69 on a miss', async () => {
    const script = `curl -sS https://api.test/hello && "${process.execPath}" --input-type=module -e "${NODE_FETCH}" https://api.test/json`
    // A proxy environment around tr-proxy itself must not loop its own upstream calls back into a proxy.
    const hostile = { HTTP_PROXY: 'http://127.0.0.1:9', HTTPS_PROXY: 'http://127.0.0.1:9', https_proxy: 'http://127.0.0.1:9', NODE_USE_ENV_PROXY: '1' }
    const rec = await cli(['record', ...proxyArgs(), '--trace', 'wrapped', '--', 'sh', '-c', script], hostile).done
    assert.equal(rec.code, 0, rec.stderr)
    assert.equal(rec.stdout, HELLO + JSON_BODY)
    assert.match(rec.stderr, /record of trace "wrapped": 0 replayed, 2 recorded/)

    const before = up.connections
    const rep = await cli(['replay', '--strict', ...proxyArgs(), '--trace', 'wrapped', '--', 'sh', '-c', script]).done
    assert.equal(rep.code, 0, rep.stderr)
    assert.equal(rep.stdout, HELLO + JSON_BODY)
    assert.equal(up.connections, before, 'replay opened an upstream connection')

    // The app asks for something else: curl itself succeeds (the 403 refusal is a response; curl -f would
    // fail) but the run fails with 6.
    const miss = await cli(['replay', '--strict', ...proxyArgs(), '--trace', 'wrapped', '--', 'curl', '-sS', '-i', 'https://api.test/other']).done
    assert.equal(miss.code, REPLAY_CONTRACT_EXIT, miss.stderr)
    // curl offers h2 first and the proxy follows the client's ALPN preference: HTTP/2 has no reason phrase,
    // the x-tool-replay-error field says who answered.
    assert.match(miss.stdout, /(^|\n)HTTP\/2 403 \r\n/)
    assert.match(miss.stdout, /\r\nx-tool-replay-error: TR_REPLAY_MISS\r\n/)
    assert.match(miss.stdout, /"message":"TR_REPLAY_MISS: Failed to replay \\"GET https:\/\/api.test\/other\\"/)
    assert.match(miss.stderr, /1 unmatched, 0 over the recorded count, 2 unused/)
    assert.equal(up.connections, before)
  })

  test("exits with the command's own code, and forwards SIGINT to it", async () => {
    const plain = await cli(['record', ...proxyArgs(), '--trace', 'code', '--', 'sh', '-c', 'exit 3']).done
    assert.equal(plain.code, 3)
    // Own process group, so a failure cannot leave the looping command behind holding the test's pipes.
    const { child, done } = cli(
      ['record', ...proxyArgs(), '--trace', 'sig', '--', 'sh', '-c', 'trap "exit 42" INT; echo ready; while :; do sleep 0.05; done'],
      {},
      true,
    )
    await new Promise<void>((resolve) => child.stdout?.on('data', (c: Buffer) => c.toString().includes('ready') && resolve()))
    child.kill('SIGINT')
    const r = await done
    try {
      process.kill(-(child.pid as number), 'SIGKILL')
    } catch {}
    assert.equal(r.code, 42, r.stderr)
  })

  test('a command that does not exist is TR_COMMAND_FAILED, and no (empty) trace replaces anything', async () => {
    const r = await cli(['record', ...proxyArgs(), '--trace', 'nocmd', '--', 'definitely-not-a-command-xyz']).done
    assert.equal(r.code, 74)
    assert.match(r.stderr, /TR_COMMAND_FAILED: Failed to start command "definitely-not-a-command-xyz": ENOENT/)
    const ls = await cli(['ls', '--store', store, '--json']).done
    const traces = JSON.parse(ls.stdout).traces as Array<{ name: string; status: string }>
    // Nothing ran: the command is looked up before the session opens, so no trace at all (not even a partial one).
    assert.deepEqual(
      traces.filter((t) => t.name === 'nocmd').map((t) => t.status),
      [],
    )
  })

  test('--tail live needs --record-as and warns loudly', async () => {
    const bad = await cli(['replay', ...proxyArgs(), '--trace', 'wrapped', '--tail', 'live', '--', 'true']).done
    assert.equal(bad.code, 64)
    assert.match(bad.stderr, /--tail live needs --record-as NAME/)
    const script = 'curl -sS https://api.test/hello && curl -sS https://api.test/hello'
    const r = await cli(['replay', ...proxyArgs(), '--trace', 'wrapped', '--record-as', 'observed', '--tail', 'live', '--', 'sh', '-c', script]).done
    assert.match(r.stderr, /WARNING: --tail live/)
    // Second /hello was over the recorded count: it went live (upstream up) instead of being refused, and
    // the run says so at that moment and in its summary.
    assert.equal(r.stdout, HELLO + HELLO)
    assert.match(r.stderr, /WARNING: Tool Replay: replay of trace "wrapped" went LIVE at GET https:\/\/api\.test\/hello .*NOT offline/)
    assert.match(r.stderr, /1 went LIVE \(not offline\)/)
    assert.match(r.stderr, /LIVE GET https:\/\/api\.test\/hello: went live here: the trace has no recording #2 of it/)
    // A completed run with a live tail is a first-class outcome: the command's own exit code (0), not 69.
    assert.equal(r.code, 0, r.stderr)
  })
})

describe('tr-proxy env, ca', () => {
  test('env prints export lines pointing at the proxy and the CA; ca prints the PEM', async () => {
    const env = await cli(['env', '--store', store, '--port', '9123']).done
    assert.equal(env.code, 0, env.stderr)
    const lines = env.stdout.trim().split('\n')
    assert.ok(lines.includes("export HTTPS_PROXY='http://127.0.0.1:9123'"))
    assert.ok(lines.includes("export https_proxy='http://127.0.0.1:9123'"))
    assert.ok(lines.includes("export NO_PROXY=''"))
    assert.ok(lines.includes("export NODE_USE_ENV_PROXY='1'"))
    assert.ok(lines.includes(`export NODE_EXTRA_CA_CERTS='${join(store, 'ca', 'ca.pem')}'`))
    assert.ok(lines.includes(`export CURL_CA_BUNDLE='${join(store, 'ca', 'bundle.pem')}'`))
    const ca = await cli(['ca', '--store', store]).done
    assert.equal(`${ca.stdout.trim()}\n`, readFileSync(join(store, 'ca', 'ca.pem'), 'utf8'))
    const bundle = readFileSync(join(store, 'ca', 'bundle.pem'), 'utf8')
    assert.ok(bundle.endsWith(readFileSync(join(store, 'ca', 'ca.pem'), 'utf8')))
  })
})

describe('tr-proxy serve', { timeout: 60_000 }, () => {
  test('control API on a Unix socket; `tr-proxy ls` works while serve owns the store; SIGTERM closes cleanly', async () => {
    const { child, done } = cli(['serve', ...proxyArgs(), '--mode', 'replay', '--trace', 'wrapped', '--port', '0'])
    const url = await new Promise<string>((resolve, reject) => {
      let text = ''
      child.stderr?.on('data', (c: Buffer) => {
        text += c
        const m = /listening on (http:\/\/\S+)/.exec(text)
        if (m) resolve(m[1] as string)
      })
      child.once('exit', () => reject(new Error(`serve exited: ${text}`)))
    })
    const socketPath = controlSocketPath(store, Number(new URL(url).port))
    const status = await unixRequest(socketPath, 'GET', '/status')
    assert.equal(status.status, 200)
    assert.equal((status.body as { mode: string }).mode, 'replay')
    assert.equal((status.body as { proxy: string }).proxy, url)

    // The control API is not reachable through the proxy port.
    const viaProxy = await new Promise<number>((resolve) => {
      const u = new URL(url)
      httpRequest({ host: u.hostname, port: u.port, path: '/status' }, (res) => {
        res.resume()
        resolve(res.statusCode ?? 0)
      }).end()
    })
    assert.equal(viaProxy, 400)

    const ls = await cli(['ls', '--store', store]).done
    assert.equal(ls.code, 0, `tr-proxy ls while serve runs: ${ls.stderr}`)
    assert.match(ls.stdout, /wrapped/)

    const curl = await new Promise<string>((resolve) => {
      const c = spawn('curl', ['-sS', '--proxy', url, '--cacert', join(store, 'ca', 'ca.pem'), 'https://api.test/hello'])
      let out = ''
      c.stdout.on('data', (d: Buffer) => (out += d))
      c.on('exit', () => resolve(out))
    })
    assert.equal(curl, HELLO)

    const end = await unixRequest(socketPath, 'POST', '/session/end')
    assert.equal(end.status, 200)
    const body = end.body as { ok: boolean; unused: Array<{ request: string }> }
    assert.equal(body.ok, false)
    assert.deepEqual(
      body.unused.map((u) => u.request),
      ['GET https://api.test/json #0'],
    )
    child.kill('SIGTERM')
    const r = await done
    // Strict replay left a recording unused: serve exits with the replay-contract code, like `replay`.
    assert.equal(r.code, REPLAY_CONTRACT_EXIT, r.stderr)
    assert.match(r.stderr, /1 unused/)
  })
})
