import assert from 'node:assert/strict'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { insideProxyRun, loadedAsTestPreload, projectRootOf, resolveTestTrace, testRunCommand, traceNameForTestFile } from './test-trace.ts'

const SETUP = /(tool-replay\/proxy-node-test|setup\/proxy-node-test\.[cm]?[jt]s)$/

test('a preloaded setup runs in a test file process, not in the `node --test` parent that only spawns them', () => {
  // `node --import tool-replay/proxy-node-test --test a.test.mjs`: the parent runs no test itself.
  assert.equal(loadedAsTestPreload(SETUP, ['--import', 'tool-replay/proxy-node-test', '--test'], {}), false)
  // Each child the runner spawns carries NODE_TEST_CONTEXT.
  assert.equal(loadedAsTestPreload(SETUP, ['--import', 'tool-replay/proxy-node-test', '--test'], { NODE_TEST_CONTEXT: 'child-v8' }), true)
  assert.equal(loadedAsTestPreload(SETUP, ['--import=tool-replay/proxy-node-test', '--test', '--test-isolation=none'], {}), true)
  assert.equal(loadedAsTestPreload(SETUP, ['--import', '/repo/setup/proxy-node-test.ts'], {}), true, 'node --import SETUP file.test.mjs')
  assert.equal(loadedAsTestPreload(SETUP, ['--import', 'tool-replay/node-test'], {}), false, 'another setup was preloaded')
  assert.equal(loadedAsTestPreload(SETUP, [], {}), false, 'imported by a test file, not preloaded')
})

test('the trace of a test file: option, else TOOL_REPLAY_TRACE as a group, else the file name', () => {
  assert.deepEqual(resolveTestTrace({ env: {}, testFile: '/t/orders.test.mjs' }), { mode: 'replay', trace: 'orders' })
  assert.deepEqual(resolveTestTrace({ env: { TOOL_REPLAY_TRACE: 'suite', TOOL_REPLAY_MODE: 'record' }, testFile: '/t/orders.test.mjs' }), {
    mode: 'record',
    trace: 'suite:orders',
  })
  assert.deepEqual(resolveTestTrace({ env: { TOOL_REPLAY_TRACE: 'suite' }, trace: 'mine', mode: 'update' }), { mode: 'update', trace: 'mine' })
  assert.throws(() => resolveTestTrace({ env: { TOOL_REPLAY_MODE: 'recrod' } }), {
    code: 'TR_INVALID_OPTION',
    message: /TOOL_REPLAY_MODE="recrod" is not a mode/,
  })
})

test('the command that runs a test file again, kept with what the test setups record', () => {
  // A `node --test` child: the runner's own flags are gone, the name pattern stays, the file is made relative.
  assert.deepEqual(
    testRunCommand({
      runner: 'node:test',
      testFile: '/repo/test/orders.test.mjs',
      cwd: '/repo',
      execArgv: ['--conditions=tool-replay-source', '--import', 'tool-replay/node-test', '--test-name-pattern=refund'],
      env: { NODE_TEST_CONTEXT: 'child-v8' },
    }),
    {
      command: ['node', '--conditions=tool-replay-source', '--import', 'tool-replay/node-test', '--test-name-pattern=refund', '--test', 'test/orders.test.mjs'],
      labels: { testRunner: 'node:test', testFile: 'test/orders.test.mjs', testName: 'refund' },
    },
  )
  // Node 24+: the file process's execArgv lists every option of the runner (defaults too): the runner's own
  // command line is read instead, its file patterns and --test left out (`--import x` keeps its value).
  const handedOver = ['--stack-trace-limit=10', '--test-isolation=process', '--conditions=tool-replay-source', '--import=tool-replay/node-test']
  const runnerArgv = ['/usr/bin/node', '--conditions=tool-replay-source', '--test', '--import', 'tool-replay/node-test', '--test-name-pattern=refund', 'test/']
  const child = {
    runner: 'node:test',
    testFile: '/repo/test/orders.test.mjs',
    cwd: '/repo',
    execArgv: handedOver,
    env: { NODE_TEST_CONTEXT: 'child-v8' },
  } as const
  assert.deepEqual(testRunCommand({ ...child, runnerCommandLine: () => runnerArgv }), {
    command: ['node', '--conditions=tool-replay-source', '--import', 'tool-replay/node-test', '--test-name-pattern=refund', '--test', 'test/orders.test.mjs'],
    labels: { testRunner: 'node:test', testFile: 'test/orders.test.mjs', testName: 'refund' },
  })
  // Where the runner's command line cannot be read: the handed-over flags without the runner's --test-* ones.
  assert.deepEqual(testRunCommand({ ...child, runnerCommandLine: () => undefined }).command, [
    'node',
    '--stack-trace-limit=10',
    '--conditions=tool-replay-source',
    '--import=tool-replay/node-test',
    '--test',
    'test/orders.test.mjs',
  ])
  // `node test/orders.test.mjs` (no runner around it) runs the file as a script again; a file outside cwd stays absolute.
  assert.deepEqual(testRunCommand({ runner: 'node:test', testFile: '/elsewhere/a.test.mjs', cwd: '/repo', execArgv: [], env: {} }).command, [
    'node',
    '/elsewhere/a.test.mjs',
  ])
  assert.deepEqual(testRunCommand({ runner: 'vitest', testFile: '/repo/src/a.test.ts', cwd: '/repo', execArgv: ['--conditions=x'], env: {} }), {
    command: ['npx', 'vitest', 'run', 'src/a.test.ts'],
    labels: { testRunner: 'vitest', testFile: 'src/a.test.ts' },
  })
})

test('a test file run by `tr-proxy record|replay -- <command>` is inside a proxy run (the proxy captures it)', () => {
  assert.equal(insideProxyRun({ TOOL_REPLAY_PROXY_RUN: '1', HTTPS_PROXY: 'http://127.0.0.1:1' }), true)
  assert.equal(insideProxyRun({ HTTPS_PROXY: 'http://corp-proxy:3128', NODE_USE_ENV_PROXY: '1' }), false, 'a proxy of its own is not a tr-proxy run')
  assert.equal(insideProxyRun({}), false)
})

test('a test file is named by its path from its project root (nearest package.json): a/index and b/index never share a trace', () => {
  assert.equal(traceNameForTestFile('/p/a/index.test.ts', '/p'), 'a:index')
  assert.equal(traceNameForTestFile('/p/b/index.test.ts', '/p'), 'b:index')
  assert.equal(traceNameForTestFile('/p/test/api/orders.spec.mjs', '/p'), 'test:api:orders')
  assert.equal(traceNameForTestFile('/p/checkout.test.ts', '/p'), 'checkout', 'a file at the root keeps its own name')
  assert.equal(traceNameForTestFile('/elsewhere/checkout.test.ts', '/p'), 'checkout', 'outside the root: its own name')
  assert.equal(traceNameForTestFile('/p/.hidden/x y.test.ts', '/p'), 'hidden:x-y')
  // On disk: the root is found by its package.json.
  const dir = mkdtempSync(join(tmpdir(), 'tr-trace-name-'))
  try {
    mkdirSync(join(dir, 'app', 'a'), { recursive: true })
    writeFileSync(join(dir, 'app', 'package.json'), '{}')
    assert.equal(projectRootOf(join(dir, 'app', 'a', 'index.test.ts')), join(dir, 'app'))
    assert.equal(traceNameForTestFile(join(dir, 'app', 'a', 'index.test.ts')), 'a:index')
    assert.deepEqual(resolveTestTrace({ env: { TOOL_REPLAY_TRACE: 'suite' }, testFile: join(dir, 'app', 'a', 'index.test.ts') }).trace, 'suite:a:index')
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})
