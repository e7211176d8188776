/**
 * A command case verified sealed (`tr-proxy verify --sealed`): a case whose command ignores the proxy variables
 * (`curl --noproxy '*'`) replays strictly only when sealed. Recorded sealed, promoted without verification, then
 * verified with the upstreams STOPPED and counting listeners on their ports: sealed it passes and nothing connects.
 * A runner case refuses --sealed with the reason.
 */
import assert from 'node:assert/strict'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { before, describe, test } from 'node:test'
import { startUpstream } from './support/proxy-upstream.ts'
import { cannotSeal, cli, countingListener, has, sealedWork, URLS } from './support/sealed-harness.ts'

let work: Awaited<ReturnType<typeof sealedWork>>
let skip: string | undefined

before(async () => {
  skip = (await cannotSeal()) ?? has('curl', ['--version'])
  work = await sealedWork('tr-sealed-cases-')
})

const CURL = ['curl', '-sS', '--noproxy', '*', '-w', ' %{http_code}\\n', ...URLS]

describe('tr-proxy verify --sealed', { timeout: 300_000 }, () => {
  test("a command case of curl --noproxy '*' passes sealed with the upstreams stopped, and nothing connects", async (t) => {
    if (skip) return t.skip(skip)
    const tls = await startUpstream(work.pki.certs['api.test'])
    const plain = await startUpstream()
    const ports = [tls.port, plain.port]
    const upstream = ['--resolve', `api.test=127.0.0.1:${tls.port}`, '--resolve', `plain.test=127.0.0.1:${plain.port}`, '--upstream-ca', work.pki.caPath]
    const rec = await cli(['record', '--store', work.store, '-t', 'curl-case', '--sealed', ...upstream, '--', ...CURL])
    await tls.close()
    await plain.close()
    assert.equal(rec.code, 0, rec.stderr)
    const cases = join(work.work, 'cases')
    const emit = ['emit-test', 'curl-case', '--store', work.store, '--out', cases, '--name', 'curl-case', '--no-verify']
    const emitted = await cli([...emit, '--expect-exit-code', '0', '--expect-stdout', rec.stdout, '--', ...CURL])
    assert.equal(emitted.code, 0, emitted.stderr)
    const counting = await Promise.all(ports.map((port) => countingListener(port)))
    try {
      const sealed = await cli(['verify', join(cases, 'curl-case'), '--sealed'])
      assert.equal(sealed.code, 0, `${sealed.stdout}\n${sealed.stderr}`)
      assert.match(sealed.stdout, /Case "curl-case" passed: 2 exchange\(s\) replayed strictly/)
      assert.deepEqual(
        counting.map((c) => c.connections),
        [0, 0],
        'the sealed case opened a connection to an upstream port',
      )
      // Unsealed, curl ignores the proxy: it cannot even resolve the names, and the case fails.
      const unsealed = await cli(['verify', join(cases, 'curl-case')])
      assert.notEqual(unsealed.code, 0, unsealed.stdout)
    } finally {
      for (const c of counting) await c.close()
    }
  })

  test('--sealed on a runner case is refused, naming why (exit 64)', async (t) => {
    if (skip) return t.skip(skip)
    const app = join(work.work, 'app.mjs')
    writeFileSync(app, 'export async function run() { return "ok" }\n')
    const emitted = await cli([
      'emit-test',
      'curl-case',
      '--store',
      work.store,
      '--out',
      join(work.work, 'cases'),
      '--name',
      'runner-case',
      '--no-verify',
      '--runner',
      `${app}#run`,
      '--expect-json',
      '"ok"',
    ])
    assert.equal(emitted.code, 0, emitted.stderr)
    const r = await cli(['verify', join(work.work, 'cases', 'runner-case'), '--sealed'])
    assert.equal(r.code, 64, r.stderr)
    assert.match(r.stderr, /runs in this process \(a runner case\), so --sealed has nothing to seal/)
  })
})
