/**
 * Who may use the inspector: a wrong token, a foreign Host (DNS rebinding) and a cross-origin POST are refused
 * (TR_INSPECT_REFUSED), a POST needs the token in a header (the cookie alone is not enough); a page on another
 * origin in a real browser cannot fork; the page can rerun only a trace's recorded command, and a command that
 * came with an imported trace file runs only once confirmed with its digest.
 */
import assert from 'node:assert/strict'
import { existsSync } from 'node:fs'
import { createServer, request } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { openStore, writeTraceFile } from 'tool-replay/store'
import { bodyFromBytes, type Trace } from 'tool-replay/trace'
import { browserMissing, launchBrowser } from './support/browser.ts'
import { type RunningInspector, startInspectCli } from './support/inspector-harness.ts'
import { tempDir } from './support/proxy-harness.ts'

const work = tempDir('tr-inspector-sec-')
const store = join(work, 'store')
const marker = join(work, 'ran.txt')
let inspector: RunningInspector

/** A one-exchange trace whose app command writes `marker`: it stands for a trace file written elsewhere. */
function foreignTrace(name: string, marker: string): Trace {
  const body = bodyFromBytes(new TextEncoder().encode('{"ok":true}'))
  return {
    meta: {
      name,
      format: 1,
      app: {
        command: [process.execPath, '-e', `require('fs').writeFileSync(${JSON.stringify(marker)}, 'ran')`],
        cwd: work,
        exit: { code: 0, stdout: { text: '', bytes: 0 }, stderr: { text: '', bytes: 0 } },
      },
    },
    exchanges: [
      {
        seq: 0,
        request: { method: 'GET', url: 'https://api.test/x', headers: [], body: null },
        outcome: {
          kind: 'response',
          response: { status: 200, statusText: 'OK', headers: [['content-type', 'application/json']], body: body.ref, trailers: [] },
        },
        timing: { startMs: 0, headersMs: 1 },
      },
    ],
    bodies: new Map([[body.ref.digest, body.bytes]]),
  }
}

before(async () => {
  await (await openStore(store)).close()
  const { spawnSync } = await import('node:child_process')
  for (const [name, file] of [
    ['imported', marker],
    ['imported-too', join(work, 'ran-too.txt')],
  ] as const) {
    const path = join(work, `${name}.trace.json`)
    await writeTraceFile(path, foreignTrace(name, file))
    const imported = spawnSync(process.execPath, [new URL('../bin/tr-proxy.js', import.meta.url).pathname, 'import', path, '--store', store], {
      encoding: 'utf8',
    })
    assert.equal(imported.status, 0, imported.stderr)
  }
  inspector = await startInspectCli(store, work)
})
after(async () => {
  await inspector?.stop()
})

/** A raw HTTP request to the inspector, with any Host and headers. */
function raw(
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: string,
): Promise<{ status: number; json: { ok: boolean; error?: { code: string; message: string; details?: Record<string, unknown> } } }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port: inspector.origin.split(':')[2], method, path, headers, setHost: false }, (res) => {
      let text = ''
      res.on('data', (c: Buffer) => (text += c))
      res.on('end', () => resolve({ status: res.statusCode ?? 0, json: JSON.parse(text) }))
    })
    req.on('error', reject)
    req.end(body)
  })
}

const host = () => inspector.origin.replace('http://', '')

describe('the guard', () => {
  test('the right token and Host are served', async () => {
    const r = await raw('GET', `/api/runs?token=${inspector.token}`, { host: host() })
    assert.equal(r.status, 200)
    assert.ok(r.json.ok)
  })
  test('a wrong or missing token is refused', async () => {
    for (const path of ['/api/runs?token=wrong', '/api/runs', '/']) {
      const r = await raw('GET', path, { host: host() })
      assert.equal(r.status, 401, path)
      assert.equal(r.json.error?.code, 'TR_INSPECT_REFUSED')
    }
  })
  test('a foreign Host is refused even with the token (DNS rebinding)', async () => {
    const r = await raw('GET', `/api/runs?token=${inspector.token}`, { host: `evil.test:${inspector.origin.split(':')[2]}` })
    assert.equal(r.status, 403)
    assert.equal(r.json.error?.code, 'TR_INSPECT_REFUSED')
    assert.match(r.json.error?.message ?? '', /DNS rebinding/)
  })
  test('a cross-origin POST is refused, and so is a POST with only the cookie', async () => {
    const json = { 'content-type': 'application/json' }
    const body = JSON.stringify({ source: 'imported', to: 'x', patches: ['#0 status=500'] })
    const foreign = await raw('POST', '/api/fork', { host: host(), origin: 'http://evil.test', 'x-tool-replay-token': inspector.token, ...json }, body)
    assert.equal(foreign.status, 403)
    assert.equal(foreign.json.error?.code, 'TR_INSPECT_REFUSED')
    const cookieOnly = await raw('POST', '/api/fork', { host: host(), origin: inspector.origin, cookie: `tr_inspect=${inspector.token}`, ...json }, body)
    assert.equal(cookieOnly.status, 401)
    const ok = await raw('POST', '/api/fork', { host: host(), origin: inspector.origin, 'x-tool-replay-token': inspector.token, ...json }, body)
    assert.equal(ok.status, 200, JSON.stringify(ok.json))
  })
})

describe('rerun', () => {
  const post = (body: unknown) =>
    raw(
      'POST',
      '/api/rerun',
      { host: host(), origin: inspector.origin, 'x-tool-replay-token': inspector.token, 'content-type': 'application/json' },
      JSON.stringify(body),
    )

  test('the page names a trace, never a command: an imported command needs confirming with its digest', async () => {
    const r = await post({ trace: 'imported', command: ['sh', '-c', 'echo not this'] })
    assert.equal(r.status, 409)
    assert.equal(r.json.error?.code, 'TR_COMMAND_UNCONFIRMED')
    const d = r.json.error?.details as { command: string[]; cwd: string; confirm: string }
    assert.equal(d.command[0], process.execPath)
    assert.equal(d.cwd, work)
    assert.ok(!existsSync(marker), 'nothing ran')
    const wrong = await post({ trace: 'imported', confirm: 'f'.repeat(64) })
    assert.equal(wrong.status, 409)
    const confirmed = await post({ trace: 'imported', confirm: d.confirm })
    assert.equal(confirmed.status, 200, JSON.stringify(confirmed.json))
    for (let i = 0; i < 200 && !existsSync(marker); i++) await new Promise((r) => setTimeout(r, 100))
    assert.ok(existsSync(marker), 'the confirmed command ran')
  })
})

describe('in a browser', () => {
  const skip = browserMissing()
  test('a page on another origin cannot fork, even though the browser holds the cookie', { skip, timeout: 60_000 }, async () => {
    const evil = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html' })
      res.end('<!doctype html><title>evil</title>')
    })
    await new Promise<void>((r) => evil.listen(0, '127.0.0.1', () => r()))
    const browser = await launchBrowser()
    try {
      const page = await browser.context.newPage()
      await page.goto(inspector.url)
      await page.getByTestId('run-row').first().waitFor()
      // An imported command, shown in full before anything runs (the other one was confirmed and ran above:
      // a run of this store made it known).
      await page.goto(`${inspector.url}#/run/imported-too?rerun=1`)
      await page.getByTestId('rerun-start').click()
      await page.getByTestId('confirm-command').waitFor()
      assert.match((await page.getByTestId('confirm-command-line').textContent()) ?? '', /writeFileSync/)
      assert.ok(!existsSync(join(work, 'ran-too.txt')), 'shown, not run')
      await page.goto(`http://127.0.0.1:${(evil.address() as AddressInfo).port}/`)
      const result = await page.evaluate(async (target) => {
        const r = await fetch(`${target}/api/fork`, {
          method: 'POST',
          credentials: 'include',
          headers: { 'content-type': 'text/plain' },
          body: JSON.stringify({ source: 'imported', to: 'evil', patches: ['#0 status=500'] }),
        }).catch((e: Error) => ({ status: -1, error: e.message }))
        return 'status' in r ? r.status : -1
      }, inspector.origin)
      assert.ok(result === 403 || result === -1, `cross-origin fork answered ${result}`)
      const runs = await raw('GET', `/api/runs?token=${inspector.token}`, { host: host() })
      assert.ok(!JSON.stringify(runs.json).includes('"evil"'), 'no branch was made')
    } finally {
      await browser.close()
      evil.close()
    }
  })
})
