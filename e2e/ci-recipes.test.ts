/**
 * The CI recipes in examples/ci/, run as scripts. A scratch project whose `npm test` calls a local API through
 * curl records once with the commands each recipe's header shows (`tr-proxy record -- npm test`, `tr-proxy
 * export ... --out traces/...`), then loses its store, as a fresh CI machine has none. Then the job's own steps
 * run in order, as the CI system would run them (GitHub: each `run:`; GitLab: `before_script`, `script`,
 * `after_script`), with two substitutions: `uses:` steps are the CI system's (checkout, setup-node, upload), and
 * `npm ci` is already done (`tr-proxy` is linked into node_modules/.bin from this checkout). A passing run
 * reaches the API zero times; a run whose tests make an unrecorded request fails with exit 69 and leaves the
 * evidence the recipe uploads: a valid trace file of what the run did, holding the refused request.
 */
import assert from 'node:assert/strict'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { after, before, test } from 'node:test'
import { parse } from 'yaml'
import { runProgram } from './support/packed-package.ts'

const ROOT = new URL('../', import.meta.url).pathname
const GITHUB = join(ROOT, 'examples', 'ci', 'github-actions.yml')
const GITLAB = join(ROOT, 'examples', 'ci', 'gitlab-ci.yml')

let api: http.Server
let apiUrl = ''
let hits = 0

before(async () => {
  api = http.createServer((req, res) => {
    hits++
    res.end(req.url === '/greeting' ? 'hello\n' : 'other\n')
  })
  await new Promise<void>((done) => api.listen(0, '127.0.0.1', done))
  apiUrl = `http://127.0.0.1:${(api.address() as AddressInfo).port}`
})

after(() => new Promise<void>((done) => api.close(() => done())))

/** The recording commands a recipe's header shows (`#   npx tr-proxy ...`). */
function recordingCommands(recipe: string): string[] {
  const lines = readFileSync(recipe, 'utf8')
    .split('\n')
    .filter((l) => /^#\s{3}npx tr-proxy /.test(l))
    .map((l) => l.replace(/^#\s+/, ''))
  assert.ok(lines.length >= 2, `${recipe} shows how to record and export`)
  return lines
}

/** A project whose tests call the API with curl, `tr-proxy` installed, its recordings committed in traces/. */
async function project(recipe: string, testScript: string): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'tr-ci-recipe-'))
  const write = (script: string) =>
    writeFileSync(join(dir, 'package.json'), `${JSON.stringify({ name: 'app', private: true, scripts: { test: script } }, null, 2)}\n`)
  write('curl -sf "$API/greeting"')
  mkdirSync(join(dir, 'node_modules', '.bin'), { recursive: true })
  symlinkSync(join(ROOT, 'bin', 'tr-proxy.js'), join(dir, 'node_modules', '.bin', 'tr-proxy'))
  for (const command of recordingCommands(recipe)) {
    const r = await sh(command, dir)
    assert.equal(r.code, 0, `${command}\n${r.out}`)
  }
  assert.ok(existsSync(join(dir, 'traces')), 'the recording was exported to traces/')
  // A fresh CI machine: the committed files, no store.
  rmSync(join(dir, '.tool-replay'), { recursive: true, force: true })
  write(testScript)
  return dir
}

function sh(script: string, cwd: string, extra: Record<string, string> = {}): Promise<{ code: number; out: string }> {
  const { NODE_TEST_CONTEXT: _, NODE_OPTIONS: __, TOOL_REPLAY_STORE: ___, ...env } = process.env
  return runProgram('bash', ['-e', '-o', 'pipefail', '-c', `exec 2>&1\n${script}`], {
    cwd,
    env: { ...env, PATH: `${dirname(process.execPath)}:${env.PATH ?? ''}`, API: apiUrl, CI: 'true', NO_COLOR: '1', ...extra },
    timeoutMs: 120_000,
  })
}

const isNpmCi = (line: string) => /^npm ci(\s|$)/.test(line)

interface GithubStep {
  run?: string
  uses?: string
  if?: string
}

/** Runs a GitHub job's `run:` steps as Actions does: in order until one fails, then only the `if: failure()` ones. */
async function runGithubJob(dir: string): Promise<{ failed: boolean; log: string }> {
  const workflow = parse(readFileSync(GITHUB, 'utf8')) as { jobs: { test: { steps: GithubStep[] } } }
  let failed = false
  let log = ''
  for (const step of workflow.jobs.test.steps) {
    if (step.run === undefined || isNpmCi(step.run)) continue
    if ((step.if === 'failure()') !== failed) continue
    const r = await sh(step.run, dir)
    log += `$ ${step.run}\n${r.out}\n(exit ${r.code})\n`
    if (r.code !== 0) failed = true
  }
  return { failed, log }
}

/** Runs a GitLab job as the runner does: before_script and script until one line fails, then after_script with CI_JOB_STATUS. */
async function runGitlabJob(dir: string): Promise<{ failed: boolean; log: string }> {
  const job = (parse(readFileSync(GITLAB, 'utf8')) as Record<string, { before_script: string[]; script: string[]; after_script: string[] }>).test
  assert.ok(job)
  let failed = false
  let log = ''
  for (const line of [...job.before_script, ...job.script]) {
    if (isNpmCi(line)) continue
    const r = await sh(line, dir)
    log += `$ ${line}\n${r.out}\n(exit ${r.code})\n`
    if (r.code !== 0) {
      failed = true
      break
    }
  }
  for (const line of job.after_script) {
    const r = await sh(line, dir, { CI_JOB_STATUS: failed ? 'failed' : 'success' })
    log += `$ ${line}\n${r.out}\n(exit ${r.code})\n`
  }
  return { failed, log }
}

/** The evidence file a failed run leaves: a valid trace file (it imports) holding the refused request. */
async function assertEvidence(dir: string, log: string): Promise<void> {
  const file = join(dir, 'tool-replay-evidence', 'ci-run.trace.json')
  assert.ok(existsSync(file), `no evidence file:\n${log}`)
  assert.match(readFileSync(file, 'utf8'), /\/goodbye/, 'the evidence holds the request the recording lacked')
  const r = await sh(`npx tr-proxy import ${file} --store check-store`, dir)
  assert.equal(r.code, 0, r.out)
}

for (const [name, recipe, runJob] of [
  ['GitHub Actions', GITHUB, runGithubJob],
  ['GitLab CI', GITLAB, runGitlabJob],
] as const) {
  test(`${name} recipe: the committed traces restore and the suite passes in strict replay, the API unreached`, async (t) => {
    const dir = await project(recipe, 'curl -sf "$API/greeting"')
    t.after(() => rmSync(dir, { recursive: true, force: true }))
    const before = hits
    const run = await runJob(dir)
    assert.equal(run.failed, false, run.log)
    assert.match(run.log, /Imported .*default\.trace\.json as trace "default"/)
    assert.match(run.log, /^hello$/m, 'the test got the recorded answer')
    assert.equal(hits, before, 'the CI run reached the API')
    assert.equal(existsSync(join(dir, 'tool-replay-evidence')), false, 'no evidence is kept for a passing run')
  })

  test(`${name} recipe: a request the recordings lack fails the job (exit 69) and leaves the trace to upload`, async (t) => {
    const dir = await project(recipe, 'curl -sf "$API/greeting" && curl -s "$API/goodbye"')
    t.after(() => rmSync(dir, { recursive: true, force: true }))
    const before = hits
    const run = await runJob(dir)
    assert.equal(run.failed, true, run.log)
    assert.match(run.log, /TR_REPLAY_MISS GET http:\/\/127\.0\.0\.1:\d+\/goodbye/)
    assert.match(run.log, /\(exit 69\)/)
    assert.equal(hits, before, 'the CI run reached the API')
    await assertEvidence(dir, run.log)
  })
}

test('the sealed variant each recipe shows is its replay step with --sealed (sealed runs: e2e/sealed-*.test.ts)', () => {
  for (const recipe of [GITHUB, GITLAB]) {
    const text = readFileSync(recipe, 'utf8')
    const step = text.match(/^\s*(?:run: |- )(npx tr-proxy replay --strict [^\n]*)$/m)?.[1]
    assert.ok(step, `${recipe}: the replay step`)
    assert.ok(text.includes(step.replace('replay --strict', 'replay --strict --sealed')), `${recipe} shows the sealed variant of "${step}"`)
  }
})
