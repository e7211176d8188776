/**
 * Shared recordings in a git assets repository, with the real git against a bare repository served by
 * Debian's `git daemon` on loopback: push from one clone of the app, restore in another and replay strictly
 * offline (a counting upstream sees no connection), the restore shallow and sparse (the cache holds only the
 * pinned traces' files), two restores of one tag at once into one cache, a pointer to a missing tag, a
 * planted secret that blocks the push, a tag never moved.
 */
import assert from 'node:assert/strict'
import { execFileSync, spawn } from 'node:child_process'
import { once } from 'node:events'
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:https'
import type { AddressInfo, Socket } from 'node:net'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { runCli } from '../cli/index.ts'
import { type GitDaemon, startGitDaemon } from './support/git-daemon.ts'
import { tempDir } from './support/proxy-harness.ts'
import { createTestPki } from './support/proxy-upstream.ts'

const BIN = fileURLToPath(new URL('../bin/tr-proxy.js', import.meta.url))
/** A binary body over the trace file's inline limit (64 KiB): it travels as `blobs/<sha256>`. */
const IMAGE = Buffer.from(Array.from({ length: 100 * 1024 }, (_, i) => (i * 7919 + (i >> 8)) & 0xff))
/** A body over that limit that git would take for text (no NUL, LF line ends): a checkout converting line ends would change it. */
const LINES = Buffer.from(Array.from({ length: 8000 }, (_, i) => `line ${i} of a binary body\n`).join(''))
const PLANTED = `ghp_${'A1b2C3d4E5'.repeat(4)}`

interface CountingUpstream {
  port: number
  connections: number
  searchVersion: number
  close(): Promise<void>
}

async function startApi(tls: { cert: string; key: string }): Promise<CountingUpstream> {
  const u: CountingUpstream = { port: 0, connections: 0, searchVersion: 1, close: async () => {} }
  const server = createServer(tls, (req, res) => {
    const send = (type: string, body: string | Buffer) => {
      res.writeHead(200, { 'content-type': type })
      res.end(body)
    }
    if (req.url === '/items') send('application/json', JSON.stringify({ items: [{ id: 1, name: 'Ada' }] }))
    else if (req.url === '/image') send('image/png', IMAGE)
    else if (req.url === '/lines') send('application/octet-stream', LINES)
    else if (req.url === '/search') send('application/json', JSON.stringify({ version: u.searchVersion, hits: ['a', 'b'] }))
    else if (req.url === '/leaky') send('application/json', JSON.stringify({ note: 'debug', deployKey: PLANTED }))
    else send('text/plain', 'not found')
  })
  server.on('secureConnection', () => u.connections++)
  const sockets = new Set<Socket>()
  server.on('connection', (s: Socket) => {
    sockets.add(s)
    s.on('close', () => sockets.delete(s))
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  u.port = (server.address() as AddressInfo).port
  u.close = async () => {
    for (const s of sockets) s.destroy()
    await new Promise<void>((resolve) => server.close(() => resolve()))
  }
  return u
}

/**
 * The app under test: reads paths and writes what it got (sizes and a hash) to `out`, so a replay can be compared
 * byte for byte. A file, not stdout: tr-proxy runs in this process and passes the app's stdout to this one's.
 */
const app = (out: string, ...paths: string[]) => `
const { createHash } = await import('node:crypto')
const { appendFileSync } = await import('node:fs')
for (const p of ${JSON.stringify(paths)}) {
  const r = await fetch('https://api.test' + p)
  const b = Buffer.from(await r.arrayBuffer())
  appendFileSync(${JSON.stringify(out)}, [p, r.status, b.length, createHash('sha256').update(b).digest('hex').slice(0, 16)].join(' ') + '\\n')
}`
let runs = 0
/**
 * `tr-proxy record|replay ... -- node -e APP` with tr-proxy in this process (the wrapper, proxy and store are
 * what the tests below build on, not tr-proxy's own process; the app is a real child going through the proxy).
 * Returns the exit code, tr-proxy's output and what the app read.
 */
async function wrapped(args: string[], ...paths: string[]): Promise<{ code: number; stderr: string; read: string }> {
  const out = join(work, `app-${++runs}.txt`)
  writeFileSync(out, '')
  const r = await cli([...args, '--', process.execPath, '--input-type=module', '-e', app(out, ...paths)])
  return { code: r.code, stderr: r.stdout + r.stderr, read: readFileSync(out, 'utf8') }
}

let api: CountingUpstream
let daemon: GitDaemon
let upstreamCa: string
let remote: string
const work = tempDir('tr-assets-e2e-')

/** One clone of the app: its own folder, store, pointer and assets cache. */
function project(name: string, cache = join(work, name, 'cache')) {
  const root = join(work, name)
  mkdirSync(root, { recursive: true })
  return { root, store: join(root, 'store'), pointer: join(root, 'tool-replay.assets.json'), cache }
}
type Project = ReturnType<typeof project>
const A = project('a')

async function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const out: string[] = []
  const err: string[] = []
  const code = await runCli(args, { out: (t) => out.push(t), err: (t) => err.push(t) })
  return { code, stdout: out.join('\n'), stderr: err.join('\n') }
}
const assets = (p: Project, action: string, ...rest: string[]) =>
  cli(['assets', action, '--store', p.store, '--pointer', p.pointer, '--cache', p.cache, ...rest])
const proxyArgs = (p: Project) => ['--store', p.store, '--resolve', `api.test=127.0.0.1:${api.port}`, '--upstream-ca', upstreamCa]
/** tr-proxy as its own process (two restores at once, one with its own git configuration in its environment). */
async function bin(args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (c: Buffer) => (stdout += c))
  child.stderr.on('data', (c: Buffer) => (stderr += c))
  // 'close', not 'exit': the output may still be in the pipes when the process exits.
  const [code] = await once(child, 'close')
  return { code: code as number | null, stdout, stderr }
}
async function record(p: Project, trace: string, ...paths: string[]): Promise<string> {
  const r = await wrapped(['record', ...proxyArgs(p), '--trace', trace], ...paths)
  assert.equal(r.code, 0, r.stderr)
  assert.equal(r.read.split('\n').filter(Boolean).length, paths.length, r.read)
  return r.read
}
const cacheGit = (p: Project, ...args: string[]) => {
  const repos = join(p.cache, 'repos')
  const gitDir = join(repos, readdirSync(repos).find((f) => f.endsWith('.git')) as string)
  return execFileSync('git', [`--git-dir=${gitDir}`, ...args], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, GIT_NO_LAZY_FETCH: '1' },
  })
}
const remoteTags = () => execFileSync('git', ['ls-remote', '--tags', remote], { encoding: 'utf8' })
const pointerOf = (p: Project) => JSON.parse(readFileSync(p.pointer, 'utf8')) as { tag: string; traces: Record<string, string> }

before(async () => {
  const pki = await createTestPki(['api.test'])
  upstreamCa = pki.caPath
  api = await startApi(pki.certs['api.test'] as { cert: string; key: string })
  const served = join(work, 'served')
  mkdirSync(served)
  daemon = await startGitDaemon(served)
  daemon.bareRepo('recordings')
  remote = daemon.url('recordings')
})
after(async () => {
  await daemon?.close()
  await api?.close()
})

// Each test runs several CLI processes and git round trips: generous bounds for a loaded 2-core machine.
const BOUND = { timeout: 300_000 }

describe('tr-proxy assets with a real git remote (git daemon on loopback)', { timeout: 1_200_000 }, () => {
  let catalogOutput: string

  test('push from one clone, restore in another, replay strictly offline from the restored recordings', BOUND, async () => {
    catalogOutput = await record(A, 'catalog', '/items', '/image', '/lines')
    await record(A, 'search', '/search')
    const pushed = await assets(A, 'push', '--remote', remote, 'catalog', 'search')
    assert.equal(pushed.code, 0, pushed.stderr + pushed.stdout)
    const pinned = pointerOf(A)
    assert.match(pinned.tag, /^tool-replay\/[0-9a-f]{12}$/)
    assert.deepEqual(Object.keys(pinned.traces), ['catalog', 'search'])
    assert.match(remoteTags(), new RegExp(`refs/tags/${pinned.tag}$`, 'm'))
    assert.match(pushed.stdout, new RegExp(`Pushed 2 trace\\(s\\) to ${remote} as tag "${pinned.tag}"`))
    // The blob travels beside the trace files, content-addressed.
    const files = execFileSync('git', ['--git-dir', join(work, 'served', 'recordings.git'), 'ls-tree', '-r', '--name-only', pinned.tag], { encoding: 'utf8' })
    assert.match(files, /^traces\/blobs\/[0-9a-f]{64}$/m)
    assert.match(files, /^traces\/catalog\.trace\.json$/m)

    const B = project('b')
    copyFileSync(A.pointer, B.pointer)
    const before = await assets(B, 'status', '--exit-code')
    assert.equal(before.code, 1)
    assert.match(before.stdout, /missing\s+catalog\s+\S+\s+not in the store: restore it/)
    assert.equal(existsSync(B.store), false, 'status never creates a store')
    const restored = await assets(B, 'restore')
    assert.equal(restored.code, 0, restored.stderr)
    assert.match(restored.stdout, /imported\s+catalog/)
    assert.match(restored.stdout, /\(fetched\)/)
    assert.equal(cacheGit(B, 'rev-parse', '--is-shallow-repository').trim(), 'true')
    const status = await assets(B, 'status', '--exit-code')
    assert.equal(status.code, 0, status.stdout)
    assert.match(status.stdout, /same\s+catalog/)

    const connections = api.connections
    const replay = await wrapped(['replay', '--strict', ...proxyArgs(B), '--trace', 'catalog'], '/items', '/image', '/lines')
    assert.equal(replay.code, 0, replay.stderr)
    assert.equal(replay.read, catalogOutput, replay.stderr)
    assert.match(catalogOutput, /^\/image 200 102400 /m)
    assert.equal(api.connections, connections, 'the replay opened no connection to the upstream')
    // Restoring again changes nothing and downloads nothing.
    const again = await assets(B, 'restore')
    assert.match(again.stdout, /the cache already held it/)
    assert.match(again.stdout, /unchanged\s+catalog/)
  })

  test('sparse and shallow: a clone pinning one trace of a newer tag gets that trace’s files only, and one commit', BOUND, async () => {
    api.searchVersion = 2
    await record(A, 'search', '/search')
    const changed = await assets(A, 'status', '--exit-code')
    assert.equal(changed.code, 1)
    assert.match(changed.stdout, /changed\s+search\s+\S+\s+differs from the pinned one/)
    const first = pointerOf(A).tag
    assert.equal((await assets(A, 'push')).code, 0)
    const second = pointerOf(A).tag
    assert.notEqual(second, first)
    // The new tag is a child of the old one: the assets repository keeps the history.
    const parents = execFileSync('git', ['--git-dir', join(work, 'served', 'recordings.git'), 'rev-list', '--count', second], { encoding: 'utf8' })
    assert.equal(parents.trim(), '2')

    const C = project('c')
    writeFileSync(C.pointer, JSON.stringify({ ...pointerOf(A), traces: { search: pointerOf(A).traces.search } }))
    const restored = await assets(C, 'restore')
    assert.equal(restored.code, 0, restored.stderr)
    assert.equal(cacheGit(C, 'rev-list', '--count', second).trim(), '1', 'shallow: one commit')
    const objects = cacheGit(C, 'rev-list', '--objects', '--missing=print', second)
    const tree = execFileSync('git', ['--git-dir', join(work, 'served', 'recordings.git'), 'ls-tree', '-r', second], { encoding: 'utf8' })
    const oidOf = (path: string) => (tree.split('\n').find((l) => l.endsWith(`\t${path}`)) ?? '').split(/\s+/)[2] as string
    const blob = tree.split('\n').find((l) => l.includes('traces/blobs/')) ?? ''
    assert.match(objects, new RegExp(`^${oidOf('traces/search.trace.json')} `, 'm'), 'the pinned trace is in the cache')
    assert.match(objects, new RegExp(`^\\?${oidOf('traces/catalog.trace.json')}$`, 'm'), 'the unpinned trace is not')
    assert.match(objects, new RegExp(`^\\?${blob.split(/\s+/)[2]}$`, 'm'), 'nor the unpinned trace’s body blob')

    // That clone re-records its trace and pushes: the tag's other traces stay in the new tag, still not downloaded.
    api.searchVersion = 3
    await record(C, 'search', '/search')
    const fromSparse = await assets(C, 'push')
    assert.equal(fromSparse.code, 0, fromSparse.stderr)
    const third = pointerOf(C).tag
    const tree3 = execFileSync('git', ['--git-dir', join(work, 'served', 'recordings.git'), 'ls-tree', '-r', third], { encoding: 'utf8' })
    assert.ok(tree3.includes(`${oidOf('traces/catalog.trace.json')}\ttraces/catalog.trace.json`), tree3)
    assert.ok(tree3.includes(blob), 'the body blob of the other trace is kept')
    assert.match(cacheGit(C, 'rev-list', '--objects', '--missing=print', third), new RegExp(`^\\?${oidOf('traces/catalog.trace.json')}$`, 'm'))
    const onRemote = await assets(C, 'status', '--check-remote', '--exit-code')
    assert.equal(onRemote.code, 0, onRemote.stdout)
    assert.match(onRemote.stdout, new RegExp(`tag "${third}" \\(in the cache; on the remote\\)`))

    // A tag is never moved: pushing other content under an existing tag is refused.
    api.searchVersion = 4
    await record(A, 'search', '/search')
    const moved = await assets(A, 'push', '--tag', first, '--json')
    assert.equal(moved.code, 66)
    assert.match(moved.stdout, /TR_ASSETS_TAG_EXISTS/)
    assert.equal(pointerOf(A).tag, second, 'the pointer is unchanged')
  })

  test('two restores of the same tag at once into one cache: both succeed, the cache repository stays whole', BOUND, async () => {
    const cache = join(work, 'shared-cache')
    const D1 = project('d1', cache)
    const D2 = project('d2', cache)
    for (const p of [D1, D2]) copyFileSync(A.pointer, p.pointer)
    const run = (p: Project, env?: NodeJS.ProcessEnv) => bin(['assets', 'restore', '--store', p.store, '--pointer', p.pointer, '--cache', p.cache], env)
    // One of them with a git configuration that converts line endings on checkout: restored files are written
    // from git's objects as they are, so their digests still hold.
    const crlf = { GIT_CONFIG_COUNT: '1', GIT_CONFIG_KEY_0: 'core.autocrlf', GIT_CONFIG_VALUE_0: 'true' }
    const results = await Promise.all([run(D1), run(D2, crlf)])
    for (const r of results) assert.equal(r.code, 0, r.stdout + r.stderr)
    // Exactly one of them downloaded the tag; the other found it in the cache.
    assert.deepEqual(results.map((r) => /\(fetched\)/.test(r.stdout)).sort(), [false, true])
    cacheGit(D1, 'fsck', '--no-progress')
    for (const p of [D1, D2]) {
      const s = await assets(p, 'status', '--exit-code')
      assert.equal(s.code, 0, s.stdout)
    }
  })

  test('a pointer to a tag the remote does not have is TR_ASSETS_TAG_NOT_FOUND naming it; nothing is imported', BOUND, async () => {
    const E = project('e')
    writeFileSync(E.pointer, JSON.stringify({ ...pointerOf(A), tag: 'tool-replay/never-pushed' }))
    const r = await assets(E, 'restore')
    assert.equal(r.code, 66)
    assert.match(
      r.stderr,
      /error TR_ASSETS_TAG_NOT_FOUND: The assets repository git:\/\/127\.0\.0\.1:\d+\/recordings\.git has no tag "tool-replay\/never-pushed"/,
    )
    assert.equal((await cli(['ls', '--store', E.store, '--json'])).stdout.includes('catalog'), false)
  })

  test('a planted secret blocks the push: nothing reaches the remote and the pointer stays as it was', BOUND, async () => {
    await record(A, 'leaky', '/leaky')
    const tags = remoteTags()
    const pointer = readFileSync(A.pointer, 'utf8')
    const r = await assets(A, 'push', 'leaky')
    assert.equal(r.code, 77)
    assert.match(r.stdout, /traces\/leaky\.trace\.json: trace "leaky" #0 response body \$\.deployKey: github-token ghp_A1…E5 \(44 chars\)/)
    assert.match(r.stderr, /error TR_SECRET_FOUND: Not pushed: found 1 value that looks like credentials in the traces to push \(leaky\)/)
    assert.ok(!r.stdout.includes(PLANTED), 'the report never prints the secret')
    assert.equal(remoteTags(), tags)
    assert.equal(readFileSync(A.pointer, 'utf8'), pointer)
  })
})
