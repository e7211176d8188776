/**
 * Named sessions on one running `tr-proxy serve --sessions-only`, as real processes: requests pick their
 * session by the x-tool-replay-session header or by the proxy credentials (plain HTTP, CONNECT tunnels and
 * reverse mode); the header reaches neither the upstream nor the trace; each session has its own trace, mode
 * and strict ledger, opened and closed through the control API and `tr-proxy session`. Then the load test:
 * 4 worker processes x 50 requests interleaved on one proxy, each its own session, every trace exactly its own
 * exchanges, each replayed strictly with the upstream counting zero new connections.
 */
import assert from 'node:assert/strict'
import { type ChildProcess, spawn } from 'node:child_process'
import { once } from 'node:events'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { openStore } from 'tool-replay/store'
import { controlCall, controlSocketPath } from '../proxy/index.ts'
import type { Exchange } from '../trace/index.ts'
import { run, tempDir } from './support/proxy-harness.ts'
import { createTestPki } from './support/proxy-upstream.ts'
import { BIN, type CountingUpstream, REPO_ROOT, type ServeProcess, startCountingUpstream, startServe } from './support/session-serve.ts'

const HOST = 'api.sessions.test'
const work = tempDir('tr-sessions-')
const storeDir = join(work, 'store')
let pki: Awaited<ReturnType<typeof createTestPki>>
let upstream: CountingUpstream
let serve: ServeProcess
let port: number
let socket: string
let proxyCa: string

before(async () => {
  pki = await createTestPki([HOST])
  upstream = await startCountingUpstream(pki.certs[HOST])
  serve = await startServe([
    '--sessions-only',
    '--store',
    storeDir,
    '--port',
    '0',
    '--reverse',
    `http://127.0.0.1:${upstream.httpPort}`,
    '--resolve',
    `${HOST}=127.0.0.1:${upstream.httpsPort}`,
    '--upstream-ca',
    pki.caPath,
  ])
  port = Number(new URL(serve.url).port)
  socket = controlSocketPath(storeDir, port)
  proxyCa = (await controlCall(socket, 'GET', '/status')).ca as string
})

after(async () => {
  const stopped = await serve?.stop()
  await upstream?.close()
  // Every named session was closed by the tests. One request named a session never opened here (a typo the
  // app may have swallowed): the serve fails with TR_SESSION_UNKNOWN's code. The ones naming none or a closed
  // session are reported, not failed (a child still polling after its test file's session closed is normal).
  assert.equal(stopped?.code, 66, stopped?.stderr)
  assert.match(
    stopped?.stderr ?? '',
    /TR_SESSION_UNKNOWN: 4 request\(s\) refused for their session: 1 named a session never opened here .*, 1 a session already closed, 2 named none\./,
  )
  assert.match(stopped?.stderr ?? '', /never-opened +"nope" GET https:\/\/[^ ]+\/x$/m)
  assert.match(stopped?.stderr ?? '', /closed +"alpha" GET http:\/\/[^ ]+\/late$/m)
})

const cli = (args: string[]) => run(process.execPath, [BIN, ...args, '--store', storeDir], { ...process.env, NO_COLOR: '1' })

/** curl (a real client that only speaks through the proxy URL and headers it is given); prints status then body. */
async function curl(args: string[]): Promise<{ status: number; body: string }> {
  const r = await run('curl', ['-sS', '--noproxy', '', '--cacert', proxyCa, '-w', '\n%{http_code}', ...args], { ...process.env, NO_PROXY: '', no_proxy: '' })
  assert.equal(r.code, 0, r.stderr)
  const at = r.stdout.lastIndexOf('\n')
  return { status: Number(r.stdout.slice(at + 1)), body: r.stdout.slice(0, at) }
}

async function traceOf(name: string): Promise<Exchange[]> {
  // The serve owns the store; this process reads it beside the owner (store/store-rpc.ts).
  const store = await openStore(storeDir)
  try {
    return (await store.readTrace(name)).exchanges
  } finally {
    await store.close()
  }
}

/** No recorded request carries the session header or the proxy credentials. */
function assertNoSessionHeaders(exchanges: Exchange[]): void {
  for (const x of exchanges) {
    for (const [k] of x.request.headers)
      assert.ok(!['x-tool-replay-session', 'proxy-authorization'].includes(k.toLowerCase()), `${x.request.url} recorded ${k}`)
  }
}

describe('named sessions on one serve', { timeout: 120_000 }, () => {
  test('header and proxy credentials (plain HTTP, CONNECT, reverse) pick the session; the header is stripped; DELETE returns the ledger', async () => {
    const http = `http://127.0.0.1:${upstream.httpPort}`
    const opened = await cli(['session', 'open', 'alpha', '--mode', 'record', '--port', String(port)])
    assert.equal(opened.code, 0, opened.stderr)
    assert.equal(opened.stdout.trim(), `http://alpha:x@127.0.0.1:${port}`)
    await controlCall(socket, 'POST', '/sessions', { name: 'beta', trace: 'beta-trace', mode: 'record' })
    await assert.rejects(controlCall(socket, 'POST', '/sessions', { name: 'beta', trace: 'x', mode: 'record' }), { code: 'TR_SESSION_EXISTS' })
    const env = await cli(['env', '--session', 'alpha', '--port', String(port)])
    assert.match(env.stdout, new RegExp(`HTTPS_PROXY=['"]?http://alpha:x@127\\.0\\.0\\.1:${port}`))

    const proxy = `http://127.0.0.1:${port}`
    const answers = [
      await curl(['-x', `http://alpha:x@127.0.0.1:${port}`, `https://${HOST}/a1`]), // credentials on CONNECT
      await curl(['-x', proxy, '-H', 'x-tool-replay-session: beta', `${http}/b1`]), // header, forward HTTP
      await curl(['-x', `http://beta@127.0.0.1:${port}`, `${http}/b2`]), // credentials, forward HTTP
      await curl(['-H', 'x-tool-replay-session: alpha', `${proxy}/a2`]), // header, reverse mode
      await curl(['-x', `http://beta:x@127.0.0.1:${port}`, '-H', 'x-tool-replay-session: alpha', `${http}/a3`]), // the header wins
    ]
    assert.deepEqual(
      answers.map((a) => [a.status, JSON.parse(a.body).path]),
      [
        [200, '/a1'],
        [200, '/b1'],
        [200, '/b2'],
        [200, '/a2'],
        [200, '/a3'],
      ],
    )
    const unknown = await curl(['-x', `http://nope:x@127.0.0.1:${port}`, `https://${HOST}/x`])
    assert.equal(unknown.status, 403)
    assert.match(unknown.body, /TR_SESSION_UNKNOWN/)
    assert.match(unknown.body, /names session \\?"nope\\?", which is not open on this proxy \(open: \\?"alpha\\?", \\?"beta\\?"\)/)
    const unnamed = await curl(['-x', proxy, `${http}/y`])
    assert.equal(unnamed.status, 403)
    assert.match(unnamed.body, /has no default session, and the request names none/)
    // An empty header does not fall back to the credentials: it names no session (and there is no default).
    const empty = await curl(['-x', `http://beta:x@127.0.0.1:${port}`, '-H', 'x-tool-replay-session;', `${http}/z`])
    assert.equal(empty.status, 403)
    assert.match(empty.body, /TR_SESSION_UNKNOWN/)
    assert.deepEqual(
      upstream.seen.map((s) => s.path),
      ['/a1', '/b1', '/b2', '/a2', '/a3'],
      'refused requests never reach the upstream',
    )
    for (const s of upstream.seen) {
      assert.equal(s.headers['x-tool-replay-session'], undefined, `${s.path} was forwarded with the session header`)
      assert.equal(s.headers['proxy-authorization'], undefined, `${s.path} was forwarded with proxy credentials`)
    }

    const ls = await cli(['session', 'ls', '--port', String(port)])
    assert.match(ls.stdout, /^alpha +record +alpha +http:\/\/alpha:x@127\.0\.0\.1:\d+$/m)
    assert.match(ls.stdout, /^beta +record +beta-trace +http:\/\/beta:x@127\.0\.0\.1:\d+$/m)
    const closedA = await cli(['session', 'close', 'alpha', '--port', String(port), '--json'])
    assert.equal(closedA.code, 0, closedA.stderr)
    assert.equal(JSON.parse(closedA.stdout).summary.recorded, 3)
    assert.equal(((await controlCall(socket, 'DELETE', '/sessions/beta')).summary as { recorded: number }).recorded, 2)

    const alpha = await traceOf('alpha')
    const beta = await traceOf('beta-trace')
    assert.deepEqual(
      alpha.map((x) => x.request.url),
      [`https://${HOST}/a1`, `${http}/a2`, `${http}/a3`],
    )
    assert.deepEqual(
      beta.map((x) => x.request.url),
      [`${http}/b1`, `${http}/b2`],
    )
    assertNoSessionHeaders([...alpha, ...beta])

    // Strict replay of one session: a request it never recorded is refused and lands in its ledger, the one
    // it skipped is unused, and closing it says so (exit 69), with the upstream never contacted; meanwhile a
    // passthrough session beside it goes live, and its request is the only one the upstream sees.
    const seen = upstream.seen.length
    await controlCall(socket, 'POST', '/sessions', { name: 'alpha', trace: 'alpha', mode: 'replay' })
    await controlCall(socket, 'POST', '/sessions', { name: 'gamma', mode: 'passthrough' })
    const replayed = [
      await curl(['-x', `http://alpha:x@127.0.0.1:${port}`, `https://${HOST}/a1`]),
      await curl(['-H', 'x-tool-replay-session: alpha', `${proxy}/a2`]),
    ]
    const live = await curl(['-x', `http://gamma:x@127.0.0.1:${port}`, `https://${HOST}/a1`])
    assert.equal(JSON.parse(live.body).served, 6, 'the passthrough session reached the upstream')
    assert.equal(((await controlCall(socket, 'DELETE', '/sessions/gamma')).summary as { passedThrough: number }).passedThrough, 1)
    assert.deepEqual(replayed, answers.slice(0, 1).concat(answers[3] as (typeof answers)[0]))
    const missed = await curl(['-x', `http://alpha:x@127.0.0.1:${port}`, `${http}/a9`])
    assert.equal(missed.status, 403)
    assert.match(missed.body, /TR_REPLAY_MISS/)
    const closed = await cli(['session', 'close', 'alpha', '--port', String(port), '--json'])
    assert.equal(closed.code, 69, closed.stdout)
    const answer = JSON.parse(closed.stdout) as { ok: boolean; ledger: Array<{ code: string; request: string }>; unused: Array<{ request: string }> }
    assert.equal(answer.ok, false)
    assert.deepEqual(
      answer.ledger.map((e) => [e.code, e.request]),
      [['TR_REPLAY_MISS', `GET ${http}/a9`]],
    )
    assert.deepEqual(
      answer.unused.map((u) => u.request),
      [`GET ${http}/a3 #0`],
    )
    assert.deepEqual(
      upstream.seen.slice(seen).map((r) => r.path),
      ['/a1'],
      'only the passthrough session reached the upstream',
    )
    await assert.rejects(controlCall(socket, 'DELETE', '/sessions/alpha'), { code: 'TR_SESSION_UNKNOWN' })
    const late = await curl(['-x', `http://alpha:x@127.0.0.1:${port}`, `${http}/late`])
    assert.equal(late.status, 403, 'a closed session takes no more requests')
    await assert.rejects(controlCall(socket, 'DELETE', '/sessions/%E0%A4%A'), { code: 'TR_INVALID_OPTION' })
  })
})

/**
 * A worker process: waits for "go" on stdin, then sends 50 requests one after another through its session
 * the way its `via` says, and prints what it read. Paths repeat (n % 5) so occurrence order matters too.
 */
const WORKER = `
import { fetch, ProxyAgent } from 'undici'
import { readFileSync } from 'node:fs'
const { WORKER: w, VIA: via, PROXY: proxy, HTTP_BASE: http, HTTPS_BASE: https, CA_PATH } = process.env
const ca = readFileSync(CA_PATH, 'utf8')
const named = (name) => { const u = new URL(proxy); u.username = name; return u.href }
const plan = {
  'header-forward': { dispatcher: new ProxyAgent({ uri: proxy }), base: http, headers: { 'x-tool-replay-session': w } },
  'credentials-forward': { dispatcher: new ProxyAgent({ uri: named(w) }), base: http, headers: {} },
  'credentials-connect': { dispatcher: new ProxyAgent({ uri: named(w), requestTls: { ca } }), base: https, headers: {} },
  'header-reverse': { dispatcher: undefined, base: proxy.replace(/\\/$/, ''), headers: { 'x-tool-replay-session': w } },
}[via]
process.stdout.write('ready\\n')
await new Promise((resolve) => process.stdin.once('data', resolve))
const out = []
for (let n = 0; n < 50; n++) {
  const res = await fetch(plan.base + '/' + w + '/n' + (n % 5) + '?via=' + via, { dispatcher: plan.dispatcher, headers: plan.headers })
  out.push(res.status + ' ' + (await res.text()))
}
process.stdout.write(JSON.stringify(out) + '\\n')
process.exit(0)
`

const VIAS = ['header-forward', 'credentials-forward', 'credentials-connect', 'header-reverse'] as const

/** Starts the 4 workers, releases them together once all are ready, resolves with what each read. */
async function runWorkers(): Promise<string[][]> {
  const children: Array<{ child: ChildProcess; out: () => string; ready: Promise<void> }> = VIAS.map((via, i) => {
    const child = spawn(process.execPath, ['--conditions=tool-replay-source', '--input-type=module', '-e', WORKER], {
      cwd: REPO_ROOT,
      env: {
        ...process.env,
        WORKER: `w${i}`,
        VIA: via,
        PROXY: `http://127.0.0.1:${port}`,
        HTTP_BASE: `http://127.0.0.1:${upstream.httpPort}`,
        HTTPS_BASE: `https://${HOST}`,
        CA_PATH: proxyCa,
      },
      stdio: ['pipe', 'pipe', 'inherit'],
    })
    let text = ''
    child.stdout?.on('data', (c: Buffer) => (text += c))
    const ready = new Promise<void>((resolve, reject) => {
      const check = () => text.startsWith('ready\n') && resolve()
      child.stdout?.on('data', check)
      child.once('exit', (code) => reject(new Error(`worker w${i} exited ${code} before it was ready`)))
    })
    return { child, out: () => text, ready }
  })
  await Promise.all(children.map((c) => c.ready))
  const exits = children.map((c) => once(c.child, 'exit'))
  for (const c of children) c.child.stdin?.end('go\n')
  const codes = await Promise.all(exits)
  assert.deepEqual(
    codes.map(([code]) => code),
    [0, 0, 0, 0],
  )
  return children.map((c) => JSON.parse(c.out().slice('ready\n'.length)) as string[])
}

describe('4 workers x 50 requests interleaved on one proxy', { timeout: 180_000 }, () => {
  test('every trace holds exactly its own exchanges, without the session header; each replays strictly with zero upstream connections', async () => {
    for (let i = 0; i < 4; i++) await controlCall(socket, 'POST', '/sessions', { name: `w${i}`, trace: `load-w${i}`, mode: 'record' })
    const seenBefore = upstream.seen.length
    const recorded = await runWorkers()
    const summaries = await Promise.all([0, 1, 2, 3].map((i) => controlCall(socket, 'DELETE', `/sessions/w${i}`)))
    assert.deepEqual(
      summaries.map((s) => (s.summary as { recorded: number }).recorded),
      [50, 50, 50, 50],
    )

    // The four really ran at once: the upstream saw the workers' requests interleaved, not one block each.
    const order = upstream.seen.slice(seenBefore).map((s) => s.path.split('/')[1])
    assert.equal(order.length, 200)
    const switches = order.filter((w, k) => k > 0 && w !== order[k - 1]).length
    assert.ok(switches >= 30, `only ${switches} switches between workers in ${order.join(',')}`)
    for (const s of upstream.seen) assert.equal(s.headers['x-tool-replay-session'], undefined)

    for (let i = 0; i < 4; i++) {
      const exchanges = await traceOf(`load-w${i}`)
      const base = VIAS[i] === 'credentials-connect' ? `https://${HOST}` : `http://127.0.0.1:${upstream.httpPort}`
      assert.deepEqual(
        exchanges.map((x) => x.request.url),
        Array.from({ length: 50 }, (_, n) => `${base}/w${i}/n${n % 5}?via=${VIAS[i]}`),
        `trace load-w${i} holds exactly worker w${i}'s requests, in its order`,
      )
      assertNoSessionHeaders(exchanges)
      // What the worker read is what the upstream served it: 50 distinct answers, all for its own paths.
      assert.equal(new Set(recorded[i]).size, 50)
      for (const line of recorded[i] as string[]) assert.match(line, new RegExp(`^200 \\{"path":"/w${i}/`))
    }

    const connections = upstream.connections
    for (let i = 0; i < 4; i++) await controlCall(socket, 'POST', '/sessions', { name: `w${i}`, trace: `load-w${i}`, mode: 'replay' })
    const replayed = await runWorkers()
    const verdicts = await Promise.all([0, 1, 2, 3].map((i) => controlCall(socket, 'DELETE', `/sessions/w${i}`)))
    assert.deepEqual(replayed, recorded, 'each worker read in replay exactly what it read while recording')
    for (const v of verdicts) {
      const s = v.summary as { ok: boolean; replayed: number; recorded: number; passedThrough: number }
      assert.deepEqual([v.ok, s.replayed, s.recorded, s.passedThrough, v.ledger, v.unused], [true, 50, 0, 0, [], []])
    }
    assert.equal(upstream.connections, connections, 'replay opened no upstream connection')
  })
})

test('serve --sessions-only refuses --faults and --seed before anything starts (named sessions take no faults), exit 64', async () => {
  const r = await run(process.execPath, [BIN, 'serve', '--sessions-only', '--faults', 'faults.yaml', '--store', join(storeDir, 'never')], process.env)
  assert.equal(r.code, 64, r.stderr)
  assert.match(r.stderr, /TR_INVALID_OPTION: .*--faults and --seed need the default session \(drop --sessions-only\)/)
  assert.equal(existsSync(join(storeDir, 'never')), false, 'nothing was created')
})
