/**
 * The wrapper as a shell sees it: Node 22's "[UNDICI-EHPA] EnvHttpProxyAgent is experimental" warning stays
 * out of the wrapped command's stderr (and only that warning), and the exit code survives a reader that
 * closed the pipe (`2>&1 | head -1` must still give 69 for a failed strict replay, not 1).
 */
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { openStore } from 'tool-replay/store'
import { bodyFromBytes, type Trace } from 'tool-replay/trace'
import { EXIT_CODES } from '../cli/index.ts'

const REPLAY_EXIT = EXIT_CODES.TR_REPLAY_INCOMPLETE
const BIN = fileURLToPath(new URL('../bin/tr-proxy.js', import.meta.url))
// A name that resolves nowhere: replay must not need it.
const URL_HELLO = 'http://hello.test/hello'
let dir: string

function helloTrace(): Trace {
  const body = bodyFromBytes(new TextEncoder().encode('hello'))
  return {
    meta: { name: 'hello', format: 1 },
    exchanges: [
      {
        seq: 0,
        request: { method: 'GET', url: URL_HELLO, headers: [], body: null },
        outcome: { kind: 'response', response: { status: 200, statusText: 'OK', headers: [['content-type', 'text/plain']], body: body.ref, trailers: [] } },
        timing: { startMs: 0, headersMs: 1 },
      },
    ],
    bodies: new Map([[body.ref.digest, body.bytes]]),
  }
}

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'tr-pipes-'))
  const store = await openStore(join(dir, 'store'))
  await store.putTrace(helloTrace())
  await store.close()
  writeFileSync(
    join(dir, 'app.mjs'),
    `process.emitWarning('the app keeps its own warnings', { code: 'APP-WARN' })\nconst res = await fetch(${JSON.stringify(URL_HELLO)})\nconsole.log(await res.text())\n`,
  )
})
after(() => rmSync(dir, { recursive: true, force: true }))

function sh(script: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const { NODE_TEST_CONTEXT: _, NODE_OPTIONS: __, ...env } = process.env
    const child = spawn('bash', ['-c', script], { cwd: dir, env: { ...env, TR: BIN, NODE: process.execPath }, stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (c: Buffer) => (stdout += c))
    child.stderr.on('data', (c: Buffer) => (stderr += c))
    child.on('close', (code) => resolve({ code, stdout, stderr }))
  })
}

const replay = '"$NODE" --conditions=tool-replay-source "$TR" replay --store store --trace hello'

test('the wrapped command gets no UNDICI-EHPA warning, and keeps its own', async () => {
  const r = await sh(`${replay} -- "$NODE" app.mjs`)
  assert.equal(r.code, 0, r.stderr)
  assert.equal(r.stdout, 'hello\n')
  assert.match(r.stderr, /\[APP-WARN\] Warning: the app keeps its own warnings/)
  assert.doesNotMatch(r.stderr, /UNDICI-EHPA|EnvHttpProxyAgent is experimental/)
  if (process.versions.node.startsWith('22.')) {
    // Control: without the flag this Node prints the warning, so the assertion above can fail.
    const control = await sh(`${replay} -- env NODE_OPTIONS= "$NODE" app.mjs`)
    assert.equal(control.code, 0, control.stderr)
    assert.match(control.stderr, /\[UNDICI-EHPA\] Warning: EnvHttpProxyAgent is experimental/)
  }
})

test('exit codes survive a closed stdout/stderr pipe: 69 through `| head -1` and `| true`', async () => {
  const direct = await sh(`${replay} -- "$NODE" -e 0`)
  assert.equal(direct.code, REPLAY_EXIT, direct.stderr)
  assert.ok(direct.stderr.split('\n').length > 2, 'the summary takes several lines, so the reader closes before it ends')
  const head = await sh(`set -o pipefail; ${replay} -- "$NODE" -e 0 2>&1 | head -1`)
  assert.equal(head.code, REPLAY_EXIT, head.stdout + head.stderr)
  const closed = await sh(`set -o pipefail; ${replay} -- "$NODE" -e 0 2>&1 | true`)
  assert.equal(closed.code, REPLAY_EXIT, closed.stdout + closed.stderr)
  const ls = await sh(`set -o pipefail; "$NODE" --conditions=tool-replay-source "$TR" ls --store store | true`)
  assert.equal(ls.code, 0, ls.stderr)
})
