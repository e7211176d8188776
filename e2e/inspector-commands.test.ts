/**
 * One rule for running recorded commands from the inspector's page: nothing recorded runs without the same
 * confirmation, on every endpoint. The server's route table says what each POST runs; a route that runs a
 * trace's recorded command (rerun, promote to test) answers 409 TR_COMMAND_UNCONFIRMED for a command no
 * recording of this store ran, until the page sends back the digest of what it showed; a label inside an
 * imported trace never picks what runs; the lab runs only its bundled scenarios; a fork never replaces its own
 * source or a recording.
 */
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { existsSync, readdirSync } from 'node:fs'
import { request } from 'node:http'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { openStore, traceDigest, writeTraceFile } from 'tool-replay/store'
import { bodyFromBytes, type Trace } from 'tool-replay/trace'
import { API_POST_ROUTES } from '../inspector/server.ts'
import { type RunningInspector, startInspectCli } from './support/inspector-harness.ts'
import { tempDir } from './support/proxy-harness.ts'

const BIN = fileURLToPath(new URL('../bin/tr-proxy.js', import.meta.url))
const work = tempDir('tr-inspector-commands-')
const store = join(work, 'store')
const cases = join(work, 'cases')
const marker = (name: string) => join(work, `${name}.ran`)
let inspector: RunningInspector

/** A node command that leaves a marker file behind when it runs. */
const leaves = (name: string) => [process.execPath, '-e', `require('fs').writeFileSync(${JSON.stringify(marker(name))}, 'ran')`]

/** A one-exchange trace with an app command, standing for a trace file written on another machine. */
function foreign(name: string, command: string[], labels?: Record<string, string>): Trace {
  const body = bodyFromBytes(new TextEncoder().encode('{"ok":true}'))
  return {
    meta: {
      name,
      format: 1,
      ...(labels ? { labels } : {}),
      app: { command, cwd: work, exit: { code: 0, stdout: { text: '', bytes: 0 }, stderr: { text: '', bytes: 0 } } },
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

function cli(args: string[]): { status: number | null; stdout: string; stderr: string } {
  return spawnSync(process.execPath, [BIN, ...args], { cwd: work, encoding: 'utf8' })
}

before(async () => {
  await (await openStore(store)).close()
  // "local": a recording of this store, made by `tr-proxy record -- <command>` (its command ran here).
  const rec = cli(['record', '--store', store, '--trace', 'local', '--', ...leaves('local-recording')])
  assert.equal(rec.status, 0, rec.stderr)
  // "imported": a trace file from elsewhere whose command would leave a marker; "imported-run": an imported
  // trace whose label claims it is a run of the app against "local".
  for (const t of [foreign('imported', leaves('imported')), foreign('imported-run', leaves('imported-run'), { observedAgainst: 'local' })]) {
    const file = join(work, `${t.meta.name}.trace.json`)
    await writeTraceFile(file, t)
    const imported = cli(['import', file, '--store', store])
    assert.equal(imported.status, 0, imported.stderr)
  }
  inspector = await startInspectCli(store, work, ['--cases', cases])
})
after(async () => {
  await inspector?.stop()
})

type Answer = { status: number; json: { ok: boolean; error?: { code: string; message: string; details?: Record<string, unknown> } } & Record<string, unknown> }

function post(path: string, body: unknown): Promise<Answer> {
  const origin = new URL(inspector.origin)
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port: origin.port,
        method: 'POST',
        path,
        headers: { host: origin.host, origin: inspector.origin, 'x-tool-replay-token': inspector.token, 'content-type': 'application/json' },
      },
      (res) => {
        let text = ''
        res.on('data', (c: Buffer) => (text += c))
        res.on('end', () => resolve({ status: res.statusCode ?? 0, json: JSON.parse(text) }))
      },
    )
    req.on('error', reject)
    req.end(JSON.stringify(body))
  })
}

/** Waits up to 20 s for a file. */
async function appears(path: string): Promise<boolean> {
  for (let i = 0; i < 200 && !existsSync(path); i++) await new Promise((r) => setTimeout(r, 100))
  return existsSync(path)
}

describe('every POST route says what it runs', () => {
  test('the route table classifies each POST, and only rerun and emit run a recorded command', () => {
    const kinds = Object.fromEntries(API_POST_ROUTES.map((r) => [r.path, r.runs]))
    assert.deepEqual(kinds, {
      '/api/fork': 'nothing',
      '/api/answer': 'nothing',
      '/api/emit': 'recorded-command',
      '/api/rerun': 'recorded-command',
      '/api/lab': 'bundled-scenario',
    })
  })
})

describe('rerun', () => {
  test('an imported command is refused until confirmed with its digest', async () => {
    const r = await post('/api/rerun', { trace: 'imported' })
    assert.equal(r.status, 409)
    assert.equal(r.json.error?.code, 'TR_COMMAND_UNCONFIRMED')
    assert.ok(!existsSync(marker('imported')), 'nothing ran')
    const wrong = await post('/api/rerun', { trace: 'imported', confirm: 'f'.repeat(64) })
    assert.equal(wrong.status, 409)
    assert.ok(!existsSync(marker('imported')), 'nothing ran')
  })
})

describe('promote to test (POST /api/emit)', () => {
  test('an imported trace: its command does not run to verify the case until confirmed', async () => {
    const r = await post('/api/emit', { trace: 'imported', name: 'from-imported' })
    assert.equal(r.status, 409, JSON.stringify(r.json))
    assert.equal(r.json.error?.code, 'TR_COMMAND_UNCONFIRMED')
    const d = r.json.error?.details as { command: string[]; cwd: string; confirm: string }
    assert.deepEqual(d.command, leaves('imported'))
    assert.equal(d.cwd, work)
    await new Promise((res) => setTimeout(res, 500))
    assert.ok(!existsSync(marker('imported')), 'the case was not verified by running the command')
    assert.ok(!existsSync(join(cases, 'from-imported')), 'no case written')
    // Confirmed, the command runs to verify the case (it makes none of the recorded requests, so the case fails).
    const confirmed = await post('/api/emit', { trace: 'imported', name: 'from-imported', confirm: d.confirm })
    assert.equal(confirmed.json.error?.code, 'TR_REPLAY_INCOMPLETE', JSON.stringify(confirmed.json))
    assert.ok(await appears(marker('imported')), 'confirmed: the command ran to verify the case')
  })

  test("an imported run's label does not pick the trace whose command runs", async () => {
    // "imported-run" claims (a label written by whoever made the file) to be a run against "local".
    const r = await post('/api/emit', { trace: 'local', name: 'from-label', expectFrom: 'imported-run' })
    assert.equal(r.status, 400, JSON.stringify(r.json))
    assert.equal(r.json.error?.code, 'TR_INVALID_OPTION')
    assert.match(r.json.error?.message ?? '', /"imported-run" is not a run of the app recorded by this store against "local"/)
    assert.ok(!existsSync(join(cases, 'from-label')))
  })
})

describe('the lab', () => {
  test('runs only its bundled scenarios: a trace name is not a scenario', async () => {
    const r = await post('/api/lab', { scenario: 'imported' })
    assert.equal(r.status, 400)
    assert.ok(!existsSync(marker('imported-lab')))
  })
})

describe('fork', () => {
  const digestOf = async (name: string) => {
    const s = await openStore(store, { readOnly: true })
    try {
      return traceDigest(await s.readTrace(name))
    } finally {
      await s.close()
    }
  }

  test('force onto its own source is refused and the recording is left as it was', async () => {
    const before = await digestOf('local')
    const r = await post('/api/fork', { source: 'local', to: 'local', force: true, patches: ['#0 status=500'] })
    assert.equal(r.status, 400, JSON.stringify(r.json))
    assert.equal(r.json.error?.code, 'TR_INVALID_OPTION')
    assert.match(r.json.error?.message ?? '', /its own source/)
    assert.equal(await digestOf('local'), before)
  })

  test('force never replaces a recording (only a branch made by a fork)', async () => {
    const before = await digestOf('local')
    const r = await post('/api/fork', { source: 'imported', to: 'local', force: true, patches: ['#0 status=500'] })
    assert.equal(r.status, 409, JSON.stringify(r.json))
    assert.equal(r.json.error?.code, 'TR_TRACE_EXISTS')
    assert.equal(await digestOf('local'), before)
    // A branch may be replaced by a new fork of the same name.
    assert.equal((await post('/api/fork', { source: 'imported', to: 'branch', patches: ['#0 status=500'] })).status, 200)
    assert.equal((await post('/api/fork', { source: 'imported', to: 'branch', force: true, patches: ['#0 status=502'] })).status, 200)
  })
})

test('nothing ran that was not confirmed', () => {
  const ran = readdirSync(work).filter((f) => f.endsWith('.ran'))
  assert.deepEqual(ran.sort(), ['imported.ran', 'local-recording.ran'])
})
