/**
 * Defaults README promises: install() without a store uses $TOOL_REPLAY_STORE; the `tr-proxy` bin in a
 * checkout runs the sources, never a dist/ left over from an older build.
 */
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { copyFileSync, mkdirSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:http'
import { join } from 'node:path'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { install } from '../interceptor/index.ts'
import { openStore } from '../store/index.ts'
import { tempDir } from './support/proxy-harness.ts'

const ROOT = fileURLToPath(new URL('..', import.meta.url))

test('install() without a store records into $TOOL_REPLAY_STORE', async () => {
  const dir = join(tempDir('tr-env-store-'), 'store')
  const server = createServer((_req, res) => res.end('ok'))
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  const url = `http://127.0.0.1:${(server.address() as { port: number }).port}/`
  const previous = process.env.TOOL_REPLAY_STORE
  process.env.TOOL_REPLAY_STORE = dir
  try {
    const tr = await install({ mode: 'record', trace: 'from-env' })
    assert.equal(await (await fetch(url)).text(), 'ok')
    await tr.close()
  } finally {
    if (previous === undefined) delete process.env.TOOL_REPLAY_STORE
    else process.env.TOOL_REPLAY_STORE = previous
    server.close()
  }
  const store = await openStore(dir, { create: false })
  assert.equal((await store.readTrace('from-env')).exchanges.length, 1)
  await store.close()
})

test('bin/tr-proxy.js in a checkout runs the sources even when an older dist/ exists', () => {
  const copy = tempDir('tr-bin-')
  mkdirSync(join(copy, 'bin'))
  mkdirSync(join(copy, 'cli'))
  mkdirSync(join(copy, 'dist', 'cli'), { recursive: true })
  copyFileSync(join(ROOT, 'bin', 'tr-proxy.js'), join(copy, 'bin', 'tr-proxy.js'))
  writeFileSync(join(copy, 'package.json'), '{"type":"module"}')
  writeFileSync(join(copy, 'cli', 'main.ts'), "export async function runCli(): Promise<number> { console.log('sources'); return 0 }\n")
  writeFileSync(join(copy, 'dist', 'cli', 'main.js'), "export async function runCli() { console.log('stale dist'); return 0 }\n")
  // The bin asks cli/malloc-arenas first (a re-launch for the streaming commands): a stub that does nothing.
  const noRelaunch = 'export function relaunchForStreaming() {}\n'
  writeFileSync(join(copy, 'cli', 'malloc-arenas.ts'), noRelaunch)
  writeFileSync(join(copy, 'dist', 'cli', 'malloc-arenas.js'), "export function relaunchForStreaming() { console.log('stale dist') }\n")
  const inCheckout = spawnSync(process.execPath, [join(copy, 'bin', 'tr-proxy.js')], { encoding: 'utf8' })
  assert.equal(inCheckout.stdout.trim(), 'sources', inCheckout.stderr)
  // A published package has no sources beside the bin: then dist/ is what runs.
  const published = tempDir('tr-bin-pkg-')
  mkdirSync(join(published, 'bin'))
  mkdirSync(join(published, 'dist', 'cli'), { recursive: true })
  copyFileSync(join(ROOT, 'bin', 'tr-proxy.js'), join(published, 'bin', 'tr-proxy.js'))
  writeFileSync(join(published, 'package.json'), '{"type":"module"}')
  writeFileSync(join(published, 'dist', 'cli', 'main.js'), "export async function runCli() { console.log('dist'); return 0 }\n")
  writeFileSync(join(published, 'dist', 'cli', 'malloc-arenas.js'), noRelaunch)
  assert.equal(spawnSync(process.execPath, [join(published, 'bin', 'tr-proxy.js')], { encoding: 'utf8' }).stdout.trim(), 'dist')
})
