/**
 * The matching rules (IDENTITY_OPTIONS) from the command line: `tr-proxy replay --match-ignore-query` replays a
 * request whose cache-buster changed, through the real CLI, proxy and curl, with the upstream stopped.
 */
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import http from 'node:http'
import { join } from 'node:path'
import { describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { tempDir } from './support/proxy-harness.ts'

const BIN = fileURLToPath(new URL('../bin/tr-proxy.js', import.meta.url))

async function cli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [BIN, ...args], { env: { ...process.env, NO_COLOR: '1' }, stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (c: Buffer) => (stdout += c))
  child.stderr.on('data', (c: Buffer) => (stderr += c))
  const timer = setTimeout(() => child.kill('SIGKILL'), 90_000)
  const [code] = await once(child, 'exit')
  clearTimeout(timer)
  return { code: code as number | null, stdout, stderr }
}

describe('matching rules from the command line', { timeout: 180_000 }, () => {
  test('--match-ignore-query: a changed cache-buster still replays; without it the strict replay misses', async () => {
    const store = join(tempDir('tr-match-flags-'), 'store')
    let hits = 0
    const api = http.createServer((req, res) => {
      hits++
      res.end(`items for ${req.url}`)
    })
    await new Promise<void>((resolve) => api.listen(0, '127.0.0.1', resolve))
    const base = `http://127.0.0.1:${(api.address() as { port: number }).port}/items`
    const rec = await cli(['record', '--store', store, '--trace', 'items', '--', 'curl', '-sS', `${base}?page=1&cb=111`])
    assert.equal(rec.code, 0, rec.stderr)
    await new Promise<void>((resolve) => api.close(() => resolve()))
    const recorded = hits

    const later = ['--', 'curl', '-sS', `${base}?page=1&cb=222`]
    const ignored = await cli(['replay', '--store', store, '--trace', 'items', '--match-ignore-query', 'cb', ...later])
    assert.equal(ignored.code, 0, ignored.stderr)
    assert.equal(ignored.stdout, 'items for /items?page=1&cb=111')
    // The rule leaves the rest of the request in: another page is still a miss.
    const otherPage = await cli(['replay', '--store', store, '--trace', 'items', '--match-ignore-query', 'cb', '--', 'curl', '-sS', `${base}?page=2&cb=1`])
    assert.equal(otherPage.code, 69, otherPage.stderr)
    const strict = await cli(['replay', '--store', store, '--trace', 'items', ...later])
    assert.equal(strict.code, 69, strict.stderr)
    assert.match(strict.stderr, /TR_REPLAY_MISS|miss/)
    assert.equal(hits, recorded, 'a replay reached the upstream')

    // A rule that is not a JSON path is refused before the command runs.
    const bad = await cli(['replay', '--store', store, '--trace', 'items', '--match-ignore-body-path', 'not a path', '--', 'sh', '-c', 'echo ran'])
    assert.equal(bad.code, 64, bad.stderr)
    assert.match(bad.stderr, /TR_INVALID_OPTION/)
    assert.doesNotMatch(bad.stdout, /ran/)
  })
})
