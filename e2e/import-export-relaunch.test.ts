/**
 * `tr-proxy import`, `export` and `assets` start again with MALLOC_ARENA_MAX set (cli/malloc-arenas.ts), as the
 * same process: a preloaded module logs each start's pid and MALLOC_ARENA_MAX, and the command's output, exit
 * code and node flags must be the ones a single start gives. Other commands, and a MALLOC_ARENA_MAX already
 * set, start once.
 */
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { EXIT_CODES } from '../cli/index.ts'
import { STREAMING_MALLOC_ARENAS } from '../cli/malloc-arenas.ts'
import { generate } from './support/big-trace-file.ts'

const BIN = fileURLToPath(new URL('../bin/tr-proxy.js', import.meta.url))
let dir: string

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'tr-relaunch-'))
  await generate(join(dir, 'small.trace.json'), 'small', 20)
  writeFileSync(join(dir, 'broken.trace.json'), '{"format":"tool-replay-trace"')
  writeFileSync(
    join(dir, 'log-start.mjs'),
    "import { appendFileSync } from 'node:fs'\nappendFileSync(process.env.TR_START_LOG, process.pid + ' ' + (process.env.MALLOC_ARENA_MAX ?? '-') + '\\n')\n",
  )
})
after(() => rmSync(dir, { recursive: true, force: true }))

interface Run {
  code: number | null
  pid: number | undefined
  stdout: string
  stderr: string
  /** Each start of the process: its pid and MALLOC_ARENA_MAX ('-' when unset). */
  starts: string[]
}

/** Runs tr-proxy with the start logger as a node flag; killed after a minute. */
function run(args: string[], env: Record<string, string> = {}): Promise<Run> {
  const log = join(dir, `starts-${Math.random().toString(36).slice(2)}.log`)
  const { NODE_TEST_CONTEXT: _, NODE_OPTIONS: __, MALLOC_ARENA_MAX: ___, ...inherited } = process.env
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [`--import=${join(dir, 'log-start.mjs')}`, BIN, ...args, '--store', join(dir, 'store')], {
      cwd: dir,
      env: { ...inherited, ...env, TR_START_LOG: log },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d) => (stdout += d))
    child.stderr.on('data', (d) => (stderr += d))
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000)
    child.on('error', reject)
    child.on('close', (code) => {
      clearTimeout(timer)
      const starts = existsSync(log) ? readFileSync(log, 'utf8').trim().split('\n') : []
      resolve({ code, pid: child.pid, stdout, stderr, starts })
    })
  })
}

describe('the streaming commands start again with fewer malloc arenas', { skip: process.platform !== 'linux' && 'glibc (Linux) only' }, () => {
  test('import: the same pid starts again with MALLOC_ARENA_MAX, node flags kept; output and exit code are the command’s', async () => {
    const r = await run(['import', 'small.trace.json'])
    assert.equal(r.code, 0, r.stderr)
    assert.match(r.stdout, /Imported \S*small\.trace\.json as trace "small" \(20 exchanges\)/)
    assert.deepEqual(r.starts, [`${r.pid} -`, `${r.pid} ${STREAMING_MALLOC_ARENAS}`])
  })

  test('export writes its file after the new start; a failed import keeps its exit code and message', async () => {
    const exported = await run(['export', 'small', '--out', 'again.trace.json'])
    assert.equal(exported.code, 0, exported.stderr)
    assert.deepEqual(exported.starts, [`${exported.pid} -`, `${exported.pid} ${STREAMING_MALLOC_ARENAS}`])
    assert.deepEqual(readFileSync(join(dir, 'again.trace.json')), readFileSync(join(dir, 'small.trace.json')))
    const failed = await run(['import', 'broken.trace.json', '--as', 'broken'])
    assert.equal(failed.code, EXIT_CODES.TR_TRACE_FILE_INVALID)
    assert.match(failed.stderr, /broken\.trace\.json/)
    assert.equal(failed.starts.length, 2)
  })

  test('the stdout and stderr a shell shares with it stay blocking (a new start must not leave them non-blocking)', async () => {
    // bash's own stdout after tr-proxy exited: the same pipe (file description), whose flags tr-proxy could change.
    const script = '"$NODE" "$TR" export small --out shared.trace.json --store store 2>&1; grep ^flags: /proc/$$/fdinfo/1'
    const { NODE_TEST_CONTEXT: _, NODE_OPTIONS: __, MALLOC_ARENA_MAX: ___, ...inherited } = process.env
    const out = await new Promise<string>((resolve, reject) => {
      const child = spawn('bash', ['-c', script], { cwd: dir, env: { ...inherited, NODE: process.execPath, TR: BIN }, stdio: ['ignore', 'pipe', 'inherit'] })
      let text = ''
      child.stdout.on('data', (d) => (text += d))
      const timer = setTimeout(() => child.kill('SIGKILL'), 60_000)
      child.on('error', reject)
      child.on('close', () => {
        clearTimeout(timer)
        resolve(text)
      })
    })
    assert.match(out, /Exported trace "small"/)
    const flags = Number.parseInt(/^flags:\s*([0-7]+)/m.exec(out)?.[1] ?? 'x', 8)
    const O_NONBLOCK = 0o4000
    assert.equal(flags & O_NONBLOCK, 0, `the pipe was left non-blocking (flags ${flags.toString(8)})`)
  })

  test('a MALLOC_ARENA_MAX already set is kept, and other commands start once', async () => {
    const own = await run(['export', 'small', '--out', 'own.trace.json'], { MALLOC_ARENA_MAX: '4' })
    assert.equal(own.code, 0, own.stderr)
    assert.deepEqual(own.starts, [`${own.pid} 4`])
    const ls = await run(['ls'])
    assert.equal(ls.code, 0, ls.stderr)
    assert.deepEqual(ls.starts, [`${ls.pid} -`])
  })
})
