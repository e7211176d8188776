/**
 * The shared-proxy test setups run the way users run them, against one real `tr-proxy serve --sessions-only`:
 * `node --test --import tool-replay/proxy-node-test` with several files at once, and vitest with
 * `setupFiles: ['tool-replay/proxy-vitest']`. Every file gets its own session and trace (its fetch calls and
 * the curl it spawns both land there), replay is strict and offline, and a swallowed miss fails the run.
 * vitest is a devDependency; TOOL_REPLAY_VITEST_BIN can point at another vitest binary, and without either
 * (a production install) the vitest test is skipped and says why.
 */
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { mkdir, readFile, writeFile } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { openStore } from 'tool-replay/store'
import { tempDir } from './support/proxy-harness.ts'
import { type CountingUpstream, REPO_ROOT, type ServeProcess, startCountingUpstream, startServe } from './support/session-serve.ts'

const FILES = ['orders', 'billing', 'search'] as const
const work = tempDir('tr-session-setups-')
const storeDir = join(work, 'store')
let serve: ServeProcess

before(async () => {
  serve = await startServe(['--sessions-only', '--store', storeDir, '--port', '0'])
})

after(async () => {
  const stopped = await serve?.stop()
  assert.equal(stopped?.code, 0, stopped?.stderr)
})

/**
 * One app test file: five fetch calls, a curl child and a Node child (which only know the proxy variables they inherit),
 * all under its own path; it writes what it read to OUT_DIR, and with EXTRA=1 it also sends a request that
 * was never recorded and swallows its failure.
 */
function appTest(runner: 'node' | 'vitest', name: string): string {
  const head =
    runner === 'node'
      ? "import { test } from 'node:test'\nimport assert from 'node:assert/strict'\nconst check = (a, b) => assert.equal(a, b)"
      : "import { test, expect } from 'vitest'\nconst check = (a, b) => expect(a).toBe(b)"
  return `${head}
import { execFileSync } from 'node:child_process'
import { writeFileSync } from 'node:fs'
test('${name} talks to its API', async () => {
  const read = []
  for (let n = 0; n < 5; n++) {
    const res = await fetch(process.env.APP_URL + '/${name}/' + (n % 2))
    check(res.status, 200)
    read.push(await res.text())
  }
  read.push(execFileSync('curl', ['-sS', '--fail', process.env.APP_URL + '/${name}/child'], { encoding: 'utf8' }))
  // A Node child using fetch through the inherited variables (NODE_USE_ENV_PROXY): Node 22 and 24 send the
  // proxy credentials only when the proxy URL has a password too.
  const nodeChild = "fetch(process.env.APP_URL + '/${name}/node-child').then(async (r) => { if (r.status !== 200) throw new Error(String(r.status)); process.stdout.write(await r.text()) })"
  read.push(execFileSync(process.execPath, ['-e', nodeChild], { encoding: 'utf8' }))
  if (process.env.EXTRA === '${name}') await fetch(process.env.APP_URL + '/${name}/never-recorded').catch(() => {})
  writeFileSync(process.env.OUT_DIR + '/${name}.' + process.env.TOOL_REPLAY_MODE + '.json', JSON.stringify(read))
})
`
}

function runNode(cmd: string[], cwd: string, env: Record<string, string>): Promise<{ code: number; out: string }> {
  // This file itself runs under node --test: drop the marker that would make the child skip its files.
  const { NODE_TEST_CONTEXT: _, ...parentEnv } = process.env
  return new Promise((resolve) => {
    execFile(process.execPath, cmd, { cwd, env: { ...parentEnv, NO_COLOR: '1', ...env }, timeout: 120_000 }, (err, stdout, stderr) =>
      resolve({ code: err ? Number((err as { code?: unknown }).code ?? 1) : 0, out: `${stdout}${stderr}` }),
    )
  })
}

/** The traces in the store, by name, as the URLs of their requests. */
async function traces(prefix: string): Promise<Record<string, string[]>> {
  const store = await openStore(storeDir)
  try {
    const out: Record<string, string[]> = {}
    for (const t of await store.listTraces()) {
      if (t.name.startsWith(prefix)) out[t.name] = (await store.readTrace(t.name)).exchanges.map((x) => x.request.url.replace(/^http:\/\/127\.0\.0\.1:\d+/, ''))
    }
    return out
  } finally {
    await store.close()
  }
}

/** What each file's trace must hold: its own five fetches (two paths, repeated) and its children's requests. */
const expectedTrace = (name: string) => [0, 1, 0, 1, 0].map((n) => `/${name}/${n}`).concat(`/${name}/child`, `/${name}/node-child`)

async function recordReplayMiss(o: {
  /** This test's own upstream: its connection count is this test's alone while the other runs beside it. */
  upstream: CountingUpstream
  runner: (env: Record<string, string>) => Promise<{ code: number; out: string }>
  dir: string
  prefix: string
  traceName: (file: string) => string
}): Promise<void> {
  const { upstream } = o
  const base = { APP_URL: `http://127.0.0.1:${upstream.httpPort}`, TOOL_REPLAY_PROXY: serve.url, TOOL_REPLAY_STORE: storeDir, OUT_DIR: o.dir }
  const recorded = await o.runner({ ...base, TOOL_REPLAY_MODE: 'record' })
  assert.equal(recorded.code, 0, recorded.out)
  assert.deepEqual(
    await traces(o.prefix),
    Object.fromEntries(FILES.map((f) => [o.traceName(f), expectedTrace(f)])),
    'every file recorded exactly its own exchanges into its own trace',
  )

  const connections = upstream.connections
  const replayed = await o.runner({ ...base, TOOL_REPLAY_MODE: 'replay' })
  assert.equal(replayed.code, 0, replayed.out)
  for (const f of FILES) {
    const read = async (mode: string) => JSON.parse(await readFile(join(o.dir, `${f}.${mode}.json`), 'utf8')) as string[]
    assert.deepEqual(await read('replay'), await read('record'), `${f} read in replay what it read while recording`)
  }

  const missed = await o.runner({ ...base, TOOL_REPLAY_MODE: 'replay', EXTRA: 'billing' })
  assert.equal(missed.code, 1, missed.out)
  assert.match(missed.out, /TR_REPLAY_MISS GET http:\/\/127\.0\.0\.1:\d+\/billing\/never-recorded/)
  assert.equal(upstream.connections, connections, 'replays opened no upstream connection')
}

// The two runners' suites run at once on the one serve, each with its own sessions, traces and upstream.
describe('shared-proxy test setups: a session per test file on one serve', { timeout: 240_000, concurrency: true }, () => {
  test('node --test --import tool-replay/proxy-node-test, three files at once', async (t) => {
    const upstream = await startCountingUpstream()
    t.after(() => upstream.close())
    const dir = join(work, 'node-test')
    await mkdir(dir, { recursive: true })
    for (const f of FILES) await writeFile(join(dir, `${f}.test.mjs`), appTest('node', f))
    const files = FILES.map((f) => join(dir, `${f}.test.mjs`))
    await recordReplayMiss({
      upstream,
      dir,
      prefix: 'node-suite:',
      traceName: (f) => `node-suite:${f}`,
      runner: (env) =>
        runNode(['--conditions=tool-replay-source', '--test', '--test-concurrency=3', '--import', 'tool-replay/proxy-node-test', ...files], REPO_ROOT, {
          ...env,
          TOOL_REPLAY_TRACE: 'node-suite',
        }),
    })
  })

  const bin = vitestBin()
  test('vitest setupFiles: tool-replay/proxy-vitest, three files in parallel workers', { skip: bin ? false : 'vitest is not installed' }, async (t) => {
    const upstream = await startCountingUpstream()
    t.after(() => upstream.close())
    const dir = join(work, 'vitest')
    await mkdir(dir, { recursive: true })
    for (const f of FILES) await writeFile(join(dir, `${f}.test.mjs`), appTest('vitest', f))
    await writeFile(
      join(dir, 'vitest.config.mjs'),
      `export default { test: { setupFiles: [${JSON.stringify(join(REPO_ROOT, 'setup', 'proxy-vitest.ts'))}], include: ['*.test.mjs'] } }\n`,
    )
    await recordReplayMiss({
      upstream,
      dir,
      prefix: 'vitest-suite:',
      traceName: (f) => `vitest-suite:${f}`,
      runner: (env) => runNode([bin as string, 'run'], dir, { ...env, TOOL_REPLAY_TRACE: 'vitest-suite' }),
    })
  })
})

function vitestBin(): string | undefined {
  if (process.env.TOOL_REPLAY_VITEST_BIN) return process.env.TOOL_REPLAY_VITEST_BIN
  try {
    return join(dirname(createRequire(import.meta.url).resolve('vitest/package.json')), 'vitest.mjs')
  } catch {
    return undefined
  }
}
