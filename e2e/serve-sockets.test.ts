/**
 * Several `tr-proxy serve` on one store, as real processes: each gets its own control socket (named by its
 * proxy port), `serve --list` shows the live ones, one exiting (or being killed) leaves the others theirs, and
 * a serve whose socket name another live serve answers on refuses with a clear error.
 */
import assert from 'node:assert/strict'
import { type ChildProcess, spawn } from 'node:child_process'
import { once } from 'node:events'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { controlSocketPath, getStatus, listServes } from '../proxy/index.ts'
import { tempDir } from './support/proxy-harness.ts'

const BIN = fileURLToPath(new URL('../bin/tr-proxy.js', import.meta.url))
const work = tempDir('tr-serve-sockets-')

function cli(args: string[]): { child: ChildProcess; done: Promise<{ code: number | null; stdout: string; stderr: string }> } {
  const child = spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stdout?.on('data', (c: Buffer) => (stdout += c))
  child.stderr?.on('data', (c: Buffer) => (stderr += c))
  const done = once(child, 'exit').then(([code]) => ({ code: code as number | null, stdout, stderr }))
  return { child, done }
}

/** Starts `tr-proxy serve` and resolves with its proxy URL once it listens. */
function startServe(args: string[]): { child: ChildProcess; done: ReturnType<typeof cli>['done']; url: Promise<string> } {
  const { child, done } = cli(['serve', ...args])
  const url = new Promise<string>((resolve, reject) => {
    let text = ''
    child.stderr?.on('data', (c: Buffer) => {
      text += c
      const m = /listening on (http:\/\/\S+)/.exec(text)
      if (m) resolve(m[1] as string)
    })
    child.once('exit', () => reject(new Error(`serve exited: ${text}`)))
  })
  return { child, done, url }
}

// Up to four serve processes start and stop here: minutes on a loaded machine, not seconds.
describe('several tr-proxy serve on one store', { timeout: 110_000 }, () => {
  test('two serves on one store: one control socket each, listed by `serve --list`; one exiting leaves the other its socket', async () => {
    const dir = join(work, 'two-serves')
    const args = ['--store', dir, '--mode', 'passthrough', '--port', '0']
    const a = startServe([...args, '--trace', 'first'])
    const urlA = await a.url
    const b = startServe([...args, '--trace', 'second'])
    const urlB = await b.url
    const socketA = controlSocketPath(dir, Number(new URL(urlA).port))
    const socketB = controlSocketPath(dir, Number(new URL(urlB).port))
    assert.notEqual(socketA, socketB)
    assert.deepEqual([(await getStatus(socketA))?.trace, (await getStatus(socketB))?.trace], ['first', 'second'])
    assert.equal((await getStatus(socketA))?.pid, a.child.pid)

    const listed = await cli(['serve', '--list', '--store', dir, '--json']).done
    assert.equal(listed.code, 0, listed.stderr)
    const serves = (JSON.parse(listed.stdout) as { serves: Array<{ proxy: string; pid: number; trace: string; socket: string }> }).serves
    assert.deepEqual(
      serves.map((s) => [s.proxy, s.pid, s.trace, s.socket]).sort(),
      [
        [urlA, a.child.pid, 'first', socketA],
        [urlB, b.child.pid, 'second', socketB],
      ].sort(),
    )
    const text = await cli(['serve', '--list', '--store', dir]).done
    assert.match(text.stdout, /^PROXY +PID +MODE +TRACE +CONTROL SOCKET$/m)

    b.child.kill('SIGTERM')
    assert.equal((await b.done).code, 0)
    assert.equal((await getStatus(socketA))?.proxy, urlA, 'the first serve keeps its control socket')
    assert.deepEqual(
      (await listServes(dir)).map((s) => s.proxy),
      [urlA],
    )

    // A serve killed outright leaves its socket file: the list skips it, the next serve on that port takes it over.
    const portB = new URL(urlB).port
    const c = startServe(['--store', dir, '--mode', 'passthrough', '--port', portB, '--trace', 'third'])
    await c.url
    c.child.kill('SIGKILL')
    await c.done
    assert.ok(existsSync(socketB), 'the killed serve left its socket file')
    assert.deepEqual(
      (await listServes(dir)).map((s) => s.trace),
      ['first'],
    )
    const d = startServe(['--store', dir, '--mode', 'passthrough', '--port', portB, '--trace', 'fourth'])
    await d.url
    assert.equal((await getStatus(socketB))?.trace, 'fourth')
    d.child.kill('SIGTERM')
    assert.equal((await d.done).code, 0)
    a.child.kill('SIGTERM')
    assert.equal((await a.done).code, 0)
    assert.deepEqual(await listServes(dir), [])
    const none = await cli(['serve', '--list', '--store', dir]).done
    assert.match(none.stdout, /No `tr-proxy serve` is running on/)
  })

  test('a second serve whose control socket is taken (same port, another loopback address) refuses with a clear error', async () => {
    const dir = join(work, 'same-port')
    const a = startServe(['--store', dir, '--mode', 'passthrough', '--port', '0', '--trace', 'first'])
    const urlA = await a.url
    const port = new URL(urlA).port
    // All of 127.0.0.0/8 is loopback on Linux: the port is free on 127.0.0.2, its control socket name is not.
    const b = cli(['serve', '--store', dir, '--mode', 'passthrough', '--host', '127.0.0.2', '--port', port, '--trace', 'second'])
    const r = await b.done
    assert.equal(r.code, 74, r.stderr)
    assert.match(
      r.stderr,
      new RegExp(
        `TR_PROXY_START_FAILED: Failed to start the control API on .*proxy-control-${port}\\.sock: another \`tr-proxy serve\` \\(pid ${a.child.pid}, proxy ${urlA.replaceAll('.', '\\.')}, passthrough of trace "first"\\) answers there`,
      ),
    )
    assert.equal((await getStatus(controlSocketPath(dir, Number(port))))?.pid, a.child.pid, 'the first serve keeps its socket')
    a.child.kill('SIGTERM')
    assert.equal((await a.done).code, 0)
  })
})
