/**
 * Docs that cannot rot. Every fenced block marked ```sh runnable in README.md and docs/*.md runs, as a user
 * would paste it, in a scratch directory of its page (the page's blocks in order, sharing it): `tr-proxy` on the
 * PATH is this checkout's CLI, `tool-replay` resolves to this checkout, and `$API` is a local server answering
 * `GET /greeting`. A block fails the test when it exits non-zero or when a line it shows as output (`#   TEXT`
 * under a command, `…` for a cut) is not printed, in order. And every link of README.md, CONTRIBUTING.md,
 * docs/, bench/ and examples/ pages must reach a file that exists and, for an anchor, a heading of that page.
 */
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { after, before, test } from 'node:test'
import { headingAnchors, markdownLinks, runnableBlocks } from './support/markdown-docs.ts'
import { outputContains, readmeCommands } from './support/readme-commands.ts'

const ROOT = new URL('../', import.meta.url).pathname
const README_MAX_LINES = 300

/** The pages whose links are checked: README and CONTRIBUTING, docs/, and every README under bench/ and examples/. */
function pages(): string[] {
  const found = ['README.md', 'CONTRIBUTING.md'].filter((p) => existsSync(join(ROOT, p)))
  for (const dir of ['docs', 'bench', 'examples']) {
    for (const entry of readdirSync(join(ROOT, dir), { recursive: true }) as string[]) {
      if (entry.includes('node_modules') || !entry.endsWith('.md')) continue
      if (dir === 'docs' || entry.endsWith('README.md')) found.push(join(dir, entry))
    }
  }
  return found
}

/** The pages whose runnable blocks run. */
const RUNNABLE_PAGES = [
  'README.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
]

test(`README.md is at most ${README_MAX_LINES} lines`, () => {
  const lines = readFileSync(join(ROOT, 'README.md'), 'utf8').trimEnd().split('\n').length
  assert.ok(lines <= README_MAX_LINES, `README.md has ${lines} lines: move detail into a docs/ page and link it`)
})

test('every link in the docs reaches an existing file, and every anchor a heading of its page', () => {
  const broken: string[] = []
  const anchorsOf = new Map<string, Set<string>>()
  const anchors = (file: string) => {
    let known = anchorsOf.get(file)
    if (!known) anchorsOf.set(file, (known = headingAnchors(readFileSync(file, 'utf8'))))
    return known
  }
  for (const page of pages()) {
    const file = join(ROOT, page)
    for (const link of markdownLinks(readFileSync(file, 'utf8'))) {
      if (/^[a-z][a-z+.-]*:/i.test(link.target)) continue // https:, mailto:
      const [path = '', anchor] = link.target.split('#')
      const target = path === '' ? file : resolve(dirname(file), decodeURIComponent(path))
      const where = `${page}:${link.line}: ${link.target}`
      if (!target.startsWith(ROOT) || !existsSync(target)) broken.push(`${where} (no such file)`)
      else if (anchor !== undefined && (!target.endsWith('.md') || !anchors(target).has(anchor))) broken.push(`${where} (no such heading)`)
    }
  }
  assert.deepEqual(broken, [], 'links to paths or anchors that do not exist')
})

let api: http.Server
let apiUrl = ''
let bin = ''

before(async () => {
  api = http.createServer((req, res) => {
    if (req.url === '/greeting') {
      res.setHeader('content-type', 'application/json')
      res.end('{"greeting":"hello"}\n')
    } else {
      res.statusCode = 404
      res.end('not found\n')
    }
  })
  await new Promise<void>((done) => api.listen(0, '127.0.0.1', done))
  apiUrl = `http://127.0.0.1:${(api.address() as AddressInfo).port}`
  // `tr-proxy` on the PATH, as an installed package puts it there: this checkout's CLI on this Node.
  bin = mkdtempSync(join(tmpdir(), 'tr-docs-bin-'))
  writeFileSync(join(bin, 'tr-proxy'), `#!/bin/sh\nexec "${process.execPath}" "${join(ROOT, 'bin', 'tr-proxy.js')}" "$@"\n`)
  chmodSync(join(bin, 'tr-proxy'), 0o755)
})

after(async () => {
  await new Promise<void>((done) => api.close(() => done()))
  rmSync(bin, { recursive: true, force: true })
})

/** A project directory for one page: a package.json, `tool-replay` importable (this checkout's sources), nothing else. */
function scratchDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'tr-docs-'))
  writeFileSync(join(dir, 'package.json'), '{ "name": "app", "private": true, "type": "module" }\n')
  mkdirSync(join(dir, 'node_modules'))
  symlinkSync(ROOT, join(dir, 'node_modules', 'tool-replay'), 'dir')
  return dir
}

function runBlock(text: string, cwd: string): Promise<{ code: number; lines: string[] }> {
  // A user's shell: no CI (an unsealed strict replay in CI adds a hint), no test-runner context of ours.
  const { CI: _ci, NODE_TEST_CONTEXT: _ctx, NODE_OPTIONS: _opts, TOOL_REPLAY_STORE: _store, ...env } = process.env
  const child = spawn('bash', ['-e', '-o', 'pipefail', '-c', `exec 2>&1\n${text}`], {
    cwd,
    env: {
      ...env,
      PATH: `${bin}:${dirname(process.execPath)}:${env.PATH ?? ''}`,
      API: apiUrl,
      NO_COLOR: '1',
      NODE_OPTIONS: '--conditions=tool-replay-source',
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  let out = ''
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk))
  const timer = setTimeout(() => child.kill('SIGKILL'), 60_000)
  return new Promise((done) =>
    child.on('close', (code) => {
      clearTimeout(timer)
      done({ code: code ?? 1, lines: out.trimEnd().split('\n') })
    }),
  )
}

for (const page of RUNNABLE_PAGES) {
  const blocks = runnableBlocks(readFileSync(join(ROOT, page), 'utf8'))
  if (blocks.length === 0) continue
  test(`${page}: its ${blocks.length} runnable block(s) run as written and print what they show`, async (t) => {
    const dir = scratchDir()
    t.after(() => rmSync(dir, { recursive: true, force: true }))
    for (const block of blocks) {
      const r = await runBlock(block.text, dir)
      const where = `${page}:${block.line}`
      assert.equal(r.code, 0, `${where}: the block exited ${r.code}:\n${r.lines.join('\n')}`)
      const shown = readmeCommands(`\`\`\`sh\n${block.text}\n\`\`\`\n`).flatMap((c) => c.expected)
      assert.ok(
        outputContains(shown, r.lines),
        `${where}: the block did not print what it shows.\nshown:\n${shown.join('\n')}\nprinted:\n${r.lines.join('\n')}`,
      )
    }
  })
}

test('README shows runnable quick starts (the docs test has something to run)', () => {
  assert.ok(runnableBlocks(readFileSync(join(ROOT, 'README.md'), 'utf8')).length >= 2)
})
