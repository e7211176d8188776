/**
 * The control socket of `tr-proxy serve` lives where only this user can reach it (issue 16, item 6): inside the
 * store, or, when that path is too long for a Unix socket, in the per-user private temp directory the store's
 * own socket uses (`tool-replay-<uid>`, 0700) — not in the shared temp dir, where another user could open
 * sessions or read traces through it.
 */
import assert from 'node:assert/strict'
import { chmod, lstat, mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { after, before, test } from 'node:test'
import { openSession } from '../engine/index.ts'
import { controlSocketPath, getStatus, listServes, loadCertificateAuthority, type ProxyServer, startControlApi, startProxy } from '../proxy/index.ts'
import { createMemoryStore } from '../store/index.ts'

// os.tmpdir() reads TMPDIR each time: a temp dir of this test's own, so the per-user directory it checks and
// spoils is not the one other tests and processes use.
const realTmp = process.env.TMPDIR
let root: string
let proxy: ProxyServer
before(async () => {
  root = await mkdtemp(join(tmpdir(), 'tr-control-api-'))
  process.env.TMPDIR = join(root, 'tmp')
  const session = await openSession({ mode: 'passthrough', trace: 't', store: createMemoryStore() })
  proxy = await startProxy({ session, ca: await loadCertificateAuthority(join(root, 'ca')) })
})
after(async () => {
  await proxy?.close({ graceMs: 10 })
  if (realTmp === undefined) delete process.env.TMPDIR
  else process.env.TMPDIR = realTmp
  await rm(root, { recursive: true, force: true })
})

/** A store path too long for a Unix socket inside it. */
const longStore = () => join(root, 'x'.repeat(120), 'store')
const uid = process.getuid?.() ?? 'user'

test('a store path short enough keeps the control socket inside the store', () => {
  assert.equal(controlSocketPath(join(root, 'store'), 8080), join(root, 'store', 'proxy-control-8080.sock'))
})

test('a long store path puts the control socket in a directory private to this user, never in the shared temp dir', async () => {
  const socket = controlSocketPath(longStore(), proxy.port)
  assert.equal(dirname(socket), join(tmpdir(), `tool-replay-${uid}`))
  const api = await startControlApi(proxy, socket)
  try {
    const st = await lstat(dirname(socket))
    assert.equal(st.mode & 0o777, 0o700, 'only this user may enter it')
    assert.equal(st.uid, process.getuid?.())
    assert.equal((await getStatus(socket))?.pid, process.pid)
    assert.deepEqual(
      (await listServes(longStore())).map((s) => s.socket),
      [socket],
      'serve --list finds it there',
    )
  } finally {
    await api.close()
  }
})

test('a per-user directory that others can enter is refused with TR_PROXY_START_FAILED, and nothing listens', async () => {
  const socket = controlSocketPath(longStore(), proxy.port)
  await chmod(dirname(socket), 0o777)
  try {
    await assert.rejects(startControlApi(proxy, socket), {
      code: 'TR_PROXY_START_FAILED',
      message: /is not a directory private to this user \(it is open to others \(mode 777\)\), so another user could reach the socket/,
    })
    assert.equal(await getStatus(socket, 200), undefined)
  } finally {
    await chmod(dirname(socket), 0o700)
  }
})
