/**
 * The layer check (scripts/check-layers.mjs, run by `npm run lint`) run as lint runs it, in a child process:
 * this checkout passes; a scratch copy of it with one back edge added fails, naming that edge (and the cycle it
 * closes) and nothing else; a small scratch tree breaking each other rule once fails with each named.
 */
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { appendFileSync, cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { test } from 'node:test'
import { PACKAGE_FOLDERS } from './folders.mjs'

const ROOT = new URL('../', import.meta.url).pathname
const CHECK = join(ROOT, 'scripts/check-layers.mjs')
/** Not copied into the scratch tree: not part of the package (the check skips them) and slow to copy. */
const NOT_COPIED = new Set(['node_modules', 'dist', 'e2e', 'bench', 'examples'])

function check(root: string): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [CHECK, '--root', root], { encoding: 'utf8', timeout: 120_000 })
  return { status: r.status, stdout: r.stdout, stderr: r.stderr }
}

function scratch(t: { after: (fn: () => void) => void }): string {
  const dir = mkdtempSync(join(tmpdir(), 'tr-layers-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

function write(root: string, files: Record<string, string>): void {
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true })
    writeFileSync(join(root, path), text)
  }
}

test('this checkout keeps its layers', () => {
  const r = check(ROOT)
  assert.equal(r.status, 0, r.stderr)
  assert.match(
    r.stdout,
    /trace → store → faults → engine → capture → seal → interceptor\|proxy\|mcp\|interop → setup → cases\|assets\|lab → inspector → cli hold/,
  )
})

test('a copy of the checkout with one type-only back edge (store → engine) fails, naming the edge and the cycle it closes', (t) => {
  const root = scratch(t)
  for (const name of readdirSync(ROOT)) {
    if (name.startsWith('.') || NOT_COPIED.has(name)) continue
    cpSync(join(ROOT, name), join(root, name), { recursive: true, filter: (src) => !src.includes('/node_modules') })
  }
  assert.equal(check(root).status, 0, 'the unchanged copy passes, so the failure below is the edge')
  const file = join(root, 'store/store-ops.ts')
  const lines = readFileSync(file, 'utf8').split('\n').length
  appendFileSync(file, "import type { Session } from '../engine/index.ts'\nexport type Owner = Session\n")
  const r = check(root)
  assert.equal(r.status, 1)
  assert.match(r.stderr, /^Layer check failed \(2\):$/m)
  assert.match(
    r.stderr,
    new RegExp(
      `store/store-ops\\.ts:${lines}: back edge store → engine: store/ \\(floor 1\\) imports '\\.\\./engine/index\\.ts' \\(floor 3\\)\\. Imports go down only`,
    ),
  )
  // engine already imports store, so the edge also closes a cycle through the two doors.
  assert.match(r.stderr, /cycle: .*store\/store-ops\.ts → engine\/index\.ts → .*\(type-only imports count\)/)
})

test('each other rule, broken once in a scratch tree, is named', (t) => {
  const root = scratch(t)
  write(root, {
    'index.ts': "export { a } from './trace/index.ts'\n", // the main entry re-exports public entries only
    'trace/index.ts': "export { a } from './a.ts'\n",
    'trace/public.ts': "export { a } from './index.ts'\nexport { b } from './b.ts'\n", // a public entry re-exports its door only
    'trace/a.ts': "import type { B } from './b.ts'\nexport const a = 1\nexport type A = B\n",
    'trace/b.ts': "import type { A } from './a.ts'\nexport const b = 2\nexport type B = A | 1\n", // a type-only cycle
    'store/index.ts': "export { c } from './c.ts'\n",
    'store/c.ts': "import { b } from '../trace/b.ts'\nimport { f } from './fixtures/f.ts'\nexport const c = b + f\n", // inner file; test code
    'store/fixtures/f.ts': 'export const f = 3\n',
    'engine/index.ts': "import { c } from '../store/public.ts'\nimport { a } from 'tool-replay/trace'\nexport const d = c + a\n", // public entry; self-reference
    'cli/index.ts': "import { d } from '../engine/index.ts'\nimport { h } from '../cases/index.ts'\nexport const e = d + h\n", // fine
    'cases/index.ts': "export { g as h } from '../interceptor/index.ts'\n",
    'interceptor/index.ts': "export { g } from '../proxy/index.ts'\n", // same floor
    'proxy/index.ts':
      "import type { Server } from 'node:http'\nimport {\n  createServer, // not an import type\n} from 'node:http'\nexport const g = 4\nexport type S = Server | typeof import('node:http')\n", // a value import of node:http
    'unplaced/index.ts': 'export const i = 5\n', // a folder on no floor
    Dockerfile: `FROM node:22\n${PACKAGE_FOLDERS.filter((f) => f !== 'seal')
      .map((f) => `COPY ${f} ./${f}\n`)
      .join('')}`, // the image's build stage leaves seal/ out
  })
  const r = check(root)
  assert.equal(r.status, 1)
  const expected = [
    "index.ts:1: the main entry imports './trace/index.ts'; it re-exports from public entries (<folder>/public.ts) only.",
    "trace/public.ts:2: the public entry of trace/ imports './b.ts'; it re-exports from its own door (./index.ts) only",
    'cycle: trace/a.ts → trace/b.ts → trace/a.ts (type-only imports count)',
    "store/c.ts:1: imports '../trace/b.ts', an inner file of trace/; import '../trace/index.ts'",
    "store/c.ts:2: imports './fixtures/f.ts', test code (a test or a fixture), which is not published",
    "engine/index.ts:1: imports '../store/public.ts', a public entry (for users); inside the package import '../store/index.ts'.",
    "engine/index.ts:2: self-reference 'tool-replay/trace'",
    "interceptor/index.ts:1: same floor interceptor → proxy: interceptor/ (floor 6) imports '../proxy/index.ts' (floor 6)",
    "proxy/index.ts:2: imports node:http as a module; take it with process.getBuiltinModule('node:http')",
    'unplaced/: a folder of code on no floor. Place it in FLOORS (scripts/folders.mjs)',
    'Dockerfile: the build stage must copy every folder of scripts/folders.mjs (missing: seal)',
  ]
  for (const line of expected) assert.ok(r.stderr.includes(line), `missing: ${line}\n--- stderr:\n${r.stderr}`)
  assert.match(
    r.stderr,
    new RegExp(`^Layer check failed \\(${expected.length}\\):$`, 'm'),
    'nothing else is reported (cli/ and cases/ import downward through doors)',
  )
})
