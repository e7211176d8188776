/**
 * The proxy image's file set, without Docker: the Dockerfile is read and carried out into temp folders
 * (FROM starts a stage, WORKDIR, COPY from the build context or an earlier stage, ENV, RUN), then `serve`
 * and `replay` run from what the final stage holds, with its ENTRYPOINT. An image missing a folder the CLI
 * imports fails here with ERR_MODULE_NOT_FOUND, as the old one did (issue 12).
 *
 * Substitutions, because tests use loopback only: the build stage's `npm ci` (dev dependencies, for tsc)
 * becomes a link to the checkout's node_modules (installed from the same lockfile); the final stage's
 * `npm ci --omit=dev` runs for real with `--offline`, from the npm cache the checkout's install filled.
 * The real `docker compose` run is scripts/compose-smoke.sh (podman), not part of the suite.
 */
import assert from 'node:assert/strict'
import { type ChildProcess, spawn, spawnSync } from 'node:child_process'
import { once } from 'node:events'
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync } from 'node:fs'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { basename, dirname, isAbsolute, join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { PACKAGE_FOLDERS } from '../scripts/folders.mjs'

const ROOT = new URL('../', import.meta.url).pathname
const DOCKERFILE = readFileSync(join(ROOT, 'Dockerfile'), 'utf8')
// The image's Node is node:22 (FROM); the file set is the same on every Node, so it is checked once.
const onImageNode = process.versions.node.startsWith('22.')
const skip = onImageNode ? {} : { skip: 'the image runs Node 22 (FROM node:22-bookworm-slim): this test runs on Node 22' }

interface Stage {
  name: string | undefined
  root: string
  workdir: string
  env: Record<string, string>
  entrypoint: string[]
  cmd: string[]
}

/** Dockerfile instructions, continuation lines joined, comments dropped. */
function instructions(text: string): Array<{ op: string; args: string }> {
  const joined = text.replace(/\\\n/g, ' ')
  return joined
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'))
    .map((l) => {
      const m = /^(\S+)\s+(.*)$/.exec(l)
      assert.ok(m, `unparseable Dockerfile line: ${l}`)
      return { op: (m[1] as string).toUpperCase(), args: m[2] as string }
    })
}

function inStage(stage: Stage, path: string): string {
  return join(stage.root, isAbsolute(path) ? path : join(stage.workdir, path))
}

/** COPY [--from=STAGE] SRC... DEST with Docker's rules for directories (their contents) and files. */
function copy(stages: Stage[], stage: Stage, args: string): void {
  const parts = args.split(/\s+/)
  const from = parts[0]?.startsWith('--from=') ? (parts.shift() as string).slice('--from='.length) : undefined
  const dest = parts.pop() as string
  assert.ok(parts.length > 0, `COPY without a source: ${args}`)
  const source = from === undefined ? undefined : stages.find((s) => s.name === from)
  if (from !== undefined) assert.ok(source, `COPY --from=${from}: no such stage`)
  const target = inStage(stage, dest)
  const intoDir = dest.endsWith('/') || dest === '.' || parts.length > 1
  for (const src of parts) {
    assert.ok(!/[*?[]/.test(src), `COPY globs are not interpreted by this test: ${src}`)
    const path = source ? join(source.root, src) : join(ROOT, src)
    assert.ok(existsSync(path), `COPY source ${src} does not exist (${path})`)
    if (statSync(path).isDirectory()) cpSync(path, target, { recursive: true })
    else {
      const to = intoDir ? join(target, basename(src)) : target
      mkdirSync(dirname(to), { recursive: true })
      cpSync(path, to)
    }
  }
}

function run(stage: Stage, command: string, isFinal: boolean): void {
  assert.ok(!/(^|\s)\//.test(command), `RUN uses an absolute path, which this test cannot map: ${command}`)
  const cwd = inStage(stage, '.')
  if (!isFinal && /^npm ci(\s|$)/.test(command) && !command.includes('--omit=dev')) {
    // The build stage's full install (dev dependencies for tsc): the checkout's own, same lockfile.
    symlinkSync(join(ROOT, 'node_modules'), join(cwd, 'node_modules'), 'dir')
    return
  }
  const r = spawnSync('sh', ['-c', command], { cwd, encoding: 'utf8', env: { ...process.env, ...stage.env, npm_config_offline: 'true' } })
  assert.equal(
    r.status,
    0,
    `RUN ${command} failed in ${cwd}:\n${r.stdout}\n${r.stderr}${/ENOTCACHED/.test(r.stderr) ? '\nRun `npm ci` in the checkout first: it fills the npm cache this offline install reads.' : ''}`,
  )
}

const jsonList = (s: string) => JSON.parse(s) as string[]

/** Carries out the Dockerfile; returns the final stage. */
function assemble(text: string, into: string): Stage {
  const stages: Stage[] = []
  for (const { op, args } of instructions(text)) {
    const stage = stages.at(-1) as Stage
    if (op === 'FROM') {
      const m = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(args)
      assert.ok(m, `FROM ${args}`)
      const root = join(into, `stage-${stages.length}`)
      mkdirSync(root, { recursive: true })
      stages.push({ name: m[2], root, workdir: '/', env: {}, entrypoint: [], cmd: [] })
    } else if (op === 'WORKDIR') {
      stage.workdir = args
      mkdirSync(inStage(stage, '.'), { recursive: true })
    } else if (op === 'COPY') copy(stages, stage, args)
    else if (op === 'ENV') {
      const m = /^(\S+?)(?:=|\s+)(.*)$/.exec(args)
      assert.ok(m, `ENV ${args}`)
      stage.env[m[1] as string] = m[2] as string
    } else if (op === 'RUN') run(stage, args, false)
    else if (op === 'ENTRYPOINT') stage.entrypoint = jsonList(args)
    else if (op === 'CMD') stage.cmd = jsonList(args)
    else assert.ok(op === 'VOLUME' || op === 'EXPOSE', `Dockerfile instruction ${op} is not interpreted by this test`)
  }
  return stages.at(-1) as Stage
}

/** Spawns the image's ENTRYPOINT with `args`, from the final stage's WORKDIR, with only the image's files. */
function entrypoint(stage: Stage, args: string[], env: Record<string, string>): { child: ChildProcess; output: () => string } {
  const [program, ...rest] = stage.entrypoint
  assert.equal(program, 'node', 'the ENTRYPOINT runs node')
  const child = spawn(process.execPath, [...rest, ...args], {
    cwd: inStage(stage, '.'),
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...stage.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let text = ''
  child.stdout?.on('data', (c: Buffer) => (text += c))
  child.stderr?.on('data', (c: Buffer) => (text += c))
  return { child, output: () => text }
}

async function waitFor(pattern: RegExp, output: () => string, child: ChildProcess, ms = 20_000): Promise<RegExpExecArray> {
  const deadline = Date.now() + ms
  for (;;) {
    const m = pattern.exec(output())
    if (m) return m
    if (child.exitCode !== null) assert.fail(`exited ${child.exitCode} before printing ${pattern}:\n${output()}`)
    if (Date.now() > deadline) assert.fail(`no ${pattern} within ${ms} ms:\n${output()}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

describe('the Docker image built from the Dockerfile runs serve and replay', { timeout: 180_000 }, () => {
  let dir: string
  let image: Stage
  before(() => {
    if (!onImageNode) return
    dir = mkdtempSync(join(tmpdir(), 'tr-image-'))
    image = assemble(DOCKERFILE, dir)
  })
  after(() => dir && rmSync(dir, { recursive: true, force: true }))

  test('the final stage holds the packed package (compiled dist/, bin/, production dependencies), not the sources', skip, () => {
    const app = inStage(image, '.')
    const top = readdirSync(app).sort()
    assert.ok(top.includes('dist') && top.includes('bin') && top.includes('node_modules') && top.includes('package.json'), top.join(' '))
    for (const source of PACKAGE_FOLDERS.filter((f) => f !== 'inspector')) assert.ok(!top.includes(source), `${source}/ sources in the image`)
    // The inspector's built page ships with the package (package.json "files"); its sources do not.
    assert.deepEqual(readdirSync(join(app, 'inspector')), ['assets'], 'inspector/ holds only its built page')
    assert.ok(existsSync(join(app, 'dist', 'cli', 'main.js')))
    assert.ok(existsSync(join(app, 'node_modules', 'yargs')), 'production dependencies installed')
    assert.ok(!existsSync(join(app, 'node_modules', 'typescript')), 'dev dependencies left out')
    assert.deepEqual(image.cmd.slice(0, 1), ['serve'])
  })

  test('serve records through the image, and replay --strict -- <command> replays it with the upstream stopped', skip, async () => {
    let hits = 0
    const upstream = http.createServer((req, res) => {
      hits++
      res.writeHead(200, { 'content-type': 'text/plain' })
      res.end(`hello ${req.url}`)
    })
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r))
    const target = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/from-image`
    const store = join(dir, 'store')
    const children: ChildProcess[] = []
    const closeUpstream = () => {
      upstream.closeAllConnections()
      return new Promise<void>((r) => upstream.close(() => r()))
    }
    try {
      const serve = entrypoint(image, ['serve', '--mode', 'record', '--trace', 'image', '--port', '0', '--store', store], {})
      children.push(serve.child)
      const [, port] = await waitFor(/listening on http:\/\/127\.0\.0\.1:(\d+)/, serve.output, serve.child)
      const body = await new Promise<string>((resolve, reject) => {
        http
          .get({ host: '127.0.0.1', port: Number(port), path: target, headers: { host: new URL(target).host } }, (res) => {
            let text = ''
            res.on('data', (c: Buffer) => (text += c))
            res.on('end', () => resolve(text))
          })
          .on('error', reject)
      })
      assert.equal(body, 'hello /from-image')
      serve.child.kill('SIGTERM')
      const [code] = await once(serve.child, 'exit')
      assert.equal(code, 0, serve.output())
      assert.match(serve.output(), /record of trace "image": 0 replayed, 1 recorded/)
      await closeUpstream()

      const client = `const r = await fetch(${JSON.stringify(target)}); process.stdout.write(await r.text())`
      const replay = entrypoint(
        image,
        ['replay', '--strict', '--trace', 'image', '--store', store, '--', process.execPath, '--input-type=module', '-e', client],
        {},
      )
      children.push(replay.child)
      const [replayCode] = await once(replay.child, 'exit')
      assert.equal(replayCode, 0, replay.output())
      assert.match(replay.output(), /hello \/from-image/)
      assert.match(replay.output(), /replay of trace "image": 1 replayed, 0 recorded/)
      assert.equal(hits, 1, 'only the recording reached the upstream')
      assert.doesNotMatch(serve.output() + replay.output(), /ERR_MODULE_NOT_FOUND/)
    } finally {
      for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL')
      if (upstream.listening) await closeUpstream()
    }
  })
})
