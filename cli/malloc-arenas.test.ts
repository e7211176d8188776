import assert from 'node:assert/strict'
import { test } from 'node:test'
import { STREAMING_MALLOC_ARENAS, streamingRelaunchEnv } from './malloc-arenas.ts'

test('import, export and assets on Linux start again with MALLOC_ARENA_MAX; nothing else does', () => {
  const env = { PATH: '/bin' }
  for (const argv of [
    ['import', 'a.trace.json'],
    ['--store', 's', 'export', 't', '--out', 'f'],
    ['--json', 'assets', 'restore'],
  ]) {
    assert.deepEqual(streamingRelaunchEnv(argv, env, 'linux'), { PATH: '/bin', MALLOC_ARENA_MAX: STREAMING_MALLOC_ARENAS }, argv.join(' '))
  }
  assert.equal(streamingRelaunchEnv(['ls'], env, 'linux'), undefined)
  assert.equal(streamingRelaunchEnv(['--help'], env, 'linux'), undefined)
  assert.equal(streamingRelaunchEnv(['import', 'a.trace.json'], env, 'darwin'), undefined)
  // Set (by the first start, or by the user): never again, and the user's value stands.
  assert.equal(streamingRelaunchEnv(['import', 'a.trace.json'], { ...env, MALLOC_ARENA_MAX: '8' }, 'linux'), undefined)
})
