/**
 * On a Node too old for the TypeScript sources, every npm script that runs them says what to do instead of
 * failing with a bare ERR_UNKNOWN_FILE_EXTENSION (issue 16, item 6): `npm test` already did; `npm run demo`
 * and the benchmarks now do the same (scripts/require-node.mjs). Each script's own command line, from
 * package.json, is run the way npm runs it: under a real old Node when this machine has one (Debian's Node 20
 * here), and always under this Node with its reported version set to 20.11.1 (so the check runs everywhere).
 */
import assert from 'node:assert/strict'
import { execFileSync, spawnSync } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { delimiter, join } from 'node:path'
import { test } from 'node:test'
import { REPO_ROOT } from './support/session-serve.ts'

const scripts = (JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts
/** The scripts that run TypeScript: `npm test` (through run-tests.mjs), the demo and the benchmarks. */
const NAMES = ['test', 'demo', ...Object.keys(scripts).filter((n) => n.startsWith('bench'))]

/** A Node on PATH (or Debian's) older than 22.19, if this machine has one. */
function oldNode(): string | undefined {
  const dirs = [...(process.env.PATH ?? '').split(delimiter), '/usr/bin', '/usr/local/bin']
  for (const dir of dirs) {
    const bin = join(dir, 'node')
    if (!dir || !existsSync(bin)) continue
    try {
      const [major, minor] = execFileSync(bin, ['-p', 'process.versions.node'], { encoding: 'utf8' }).trim().split('.').map(Number) as [number, number]
      if (major < 22 || (major === 22 && minor < 19)) return bin
    } catch {}
  }
  return undefined
}

/** Runs the first command of npm script `name` with `node`, as npm would (npm_lifecycle_event set). */
function runScript(name: string, node: string, env: Record<string, string> = {}) {
  const first = (scripts[name] as string).split(' && ')[0] as string
  const [program, ...args] = first.split(' ')
  assert.equal(program, 'node', `npm script "${name}" starts with node`)
  const { NODE_TEST_CONTEXT: _, ...parentEnv } = process.env
  return spawnSync(node, args, { cwd: REPO_ROOT, env: { ...parentEnv, ...env, npm_lifecycle_event: name }, encoding: 'utf8', timeout: 60_000 })
}

const advice = (name: string) =>
  new RegExp(
    `^Tool Replay needs Node >= 22\\.19 \\(this is v[\\d.]+\\)\\. Run: PATH="\\$\\(scripts/ensure-node\\.sh 22\\):\\$PATH" ${name === 'test' ? 'npm test' : `npm run ${name}`}\\n$`,
  )

test('every npm script that runs the sources says what to do on an old Node (its reported version set to 20.11.1)', () => {
  const fake = "--import=data:text/javascript,Object.defineProperty(process.versions,'node',{value:'20.11.1'})"
  for (const name of NAMES) {
    const r = runScript(name, process.execPath, { NODE_OPTIONS: fake })
    assert.equal(r.status, 1, `${name}: ${r.stderr}`)
    assert.match(r.stderr, advice(name), name)
  }
})

const old = oldNode()
test('the same under a real old Node', { skip: old ? false : 'no Node older than 22.19 on this machine' }, () => {
  for (const name of NAMES) {
    const r = runScript(name, old as string)
    assert.equal(r.status, 1, `${name}: ${r.stderr}`)
    assert.doesNotMatch(r.stderr, /ERR_UNKNOWN_FILE_EXTENSION/, name)
    assert.match(r.stderr, advice(name), name)
  }
})
