/**
 * The proxy imports undici (its HTTP client for forwarding, ~110 modules) when it first forwards, or at start
 * when its default session records: a strict replay through the proxy never loads it, and answers all the
 * same. Each side runs in a fresh process (what is loaded is the point); a real upstream on loopback, a real
 * LevelDB store, node:http as the client.
 */
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..')

/** Runs `body` as an ES module in a fresh Node inside this package and returns what it puts in `out`, as JSON. */
async function inFreshProcess(body: string, env: Record<string, string>): Promise<Record<string, unknown>> {
  const prelude = `
    import { createRequire } from 'node:module'
    import http from 'node:http'
    const undiciLoaded = () => Object.keys(createRequire(process.cwd() + '/').cache).some((f) => /[\\\\/]undici[\\\\/]index\\.js$/.test(f))
    const { openStore } = await import('tool-replay/store')
    const { openSession } = await import('tool-replay/engine')
    const { loadCertificateAuthority, startProxy } = await import('tool-replay/proxy')
    /** GET url through the proxy at proxyUrl (absolute-form), with node:http: status and body. */
    const viaProxy = (proxyUrl, url) => new Promise((resolve, reject) => {
      const p = new URL(proxyUrl)
      const req = http.request({ host: p.hostname, port: p.port, path: url, method: 'GET', timeout: 10000 }, (res) => {
        let body = ''
        res.setEncoding('utf8')
        res.on('data', (c) => (body += c))
        res.on('end', () => resolve({ status: res.statusCode, body }))
      })
      req.on('timeout', () => req.destroy(new Error('timeout')))
      req.on('error', reject)
      req.end()
    })
    const out = {}
  `
  const { stdout } = await promisify(execFile)(
    process.execPath,
    ['--conditions=tool-replay-source', '--input-type=module', '-e', `${prelude}\n${body}\nconsole.log(JSON.stringify(out))`],
    { cwd: ROOT, env: { ...process.env, ...env }, timeout: 60_000 },
  )
  return JSON.parse(stdout.trim().split('\n').at(-1) ?? '{}') as Record<string, unknown>
}

test('a strict replay through the proxy never loads undici; a recording proxy loads it at start', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tr-proxy-lazy-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  const env = { STORE_DIR: join(dir, 'store') }
  const recorded = await inFreshProcess(
    `
    const server = http.createServer((req, res) => res.end('hello ' + req.url))
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
    const url = 'http://127.0.0.1:' + server.address().port + '/item/1'
    const store = await openStore(process.env.STORE_DIR)
    const session = await openSession({ mode: 'record', trace: 'lazy', store })
    const proxy = await startProxy({ session, ca: await loadCertificateAuthority(process.env.STORE_DIR) })
    // Loading runs beside the start, not before it: wait for it (at most 10 s), with no request made yet.
    for (let i = 0; i < 1000 && !undiciLoaded(); i++) await new Promise((resolve) => setTimeout(resolve, 10))
    out.loadedAtStart = undiciLoaded()
    out.answer = await viaProxy(proxy.url, url)
    await proxy.close()
    await store.close()
    await new Promise((resolve) => server.close(resolve))
    out.url = url
  `,
    env,
  )
  assert.equal(recorded.loadedAtStart, true, 'a recording proxy loads undici from its start, before any request')
  assert.deepEqual(recorded.answer, { status: 200, body: 'hello /item/1' })

  // The upstream is gone now: the answer can only come from the recording.
  const replayed = await inFreshProcess(
    `
    const store = await openStore(process.env.STORE_DIR)
    const session = await openSession({ mode: 'replay', trace: 'lazy', store })
    const proxy = await startProxy({ session, ca: await loadCertificateAuthority(process.env.STORE_DIR) })
    out.answer = await viaProxy(proxy.url, ${JSON.stringify(recorded.url)})
    out.miss = await viaProxy(proxy.url, ${JSON.stringify(`${recorded.url}/unrecorded`)})
    out.loaded = undiciLoaded()
    await proxy.close().catch(() => {})
    await store.close()
  `,
    env,
  )
  assert.deepEqual(replayed.answer, { status: 200, body: 'hello /item/1' })
  assert.equal((replayed.miss as { status: number }).status, 403, 'a strict miss is refused, not forwarded')
  assert.equal(replayed.loaded, false, 'undici was loaded by a strict replay through the proxy')
})
