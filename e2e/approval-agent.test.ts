/**
 * The approval agent example end to end, as its README tells it (examples/approval-agent/README.md): every
 * command of the walk-through, exactly as the README shows it, run by bash in a scratch checkout (the example
 * copied, everything else linked to this repository), its output compared with the lines the README says it
 * prints and its exit status with 0 (a command that fails on purpose shows `; echo "exit $?"`).
 *
 * The real `openai` SDK talks to the example's fake model provider and fake refund service, which this test
 * runs itself (APPROVAL_AGENT_FAKES) so it can count what reaches them: exactly the recording's requests, then
 * nothing, through strict replay, the fork, the run against it, diff, emit-test, verify and the proxy. The dummy
 * key the recording sends is nowhere on disk. The committed case verifies against the repository's app and
 * catches the reintroduced bug (exit 72), and following the README leaves it byte-identical (the walk-through
 * emits its own case to my-cases/, which git leaves out: a new recording's trace has another digest).
 */
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { after, before, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { exportTrace, openStore } from 'tool-replay/store'
import { bodyBytes, decodeContentEncoding, headerValue, sha256, type Trace } from 'tool-replay/trace'
import { runCli } from '../cli/index.ts'
import { type FakeServices, startFakeServices } from '../examples/approval-agent/fake-services.ts'
import { filesUnder } from './support/files-under.ts'
import { normalizeOutput, outputMatches, readmeCommands } from './support/readme-commands.ts'

const ROOT = fileURLToPath(new URL('..', import.meta.url))
const EXAMPLE = 'examples/approval-agent'
const CASE = `${EXAMPLE}/cases/refund-over-limit`
/** The case the walk-through emits (step 7), beside the committed one. */
const MY_CASE = `${EXAMPLE}/my-cases/refund-over-limit`
const DUMMY_KEY = 'sk-proj-dummy-approval-agent-e2e-5b7e21'
const COMMANDS = readmeCommands(readFileSync(join(ROOT, EXAMPLE, 'README.md'), 'utf8'))

let fakes: FakeServices
let checkout: string

before(async () => {
  fakes = await startFakeServices()
  checkout = mkdtempSync(join(tmpdir(), 'tr-approval-agent-'))
  for (const name of readdirSync(ROOT)) {
    if (['.git', '.tool-replay', '.scratch', 'examples'].includes(name)) continue
    symlinkSync(join(ROOT, name), join(checkout, name))
  }
  mkdirSync(join(checkout, 'examples'))
  cpSync(join(ROOT, EXAMPLE), join(checkout, EXAMPLE), { recursive: true, filter: (src) => !src.endsWith('.orig') && !src.includes('/my-cases') })
})
after(async () => {
  await fakes?.close()
  if (checkout) rmSync(checkout, { recursive: true, force: true })
})

/** A minimal environment: nothing of this process's Tool Replay, proxy or test-runner settings leaks in. */
function env(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return {
    PATH: `${dirname(process.execPath)}:${process.env.PATH ?? ''}`,
    HOME: process.env.HOME ?? checkout,
    APPROVAL_AGENT_FAKES: `${fakes.ports.model},${fakes.ports.refunds}`,
    ...extra,
  }
}

/**
 * Runs one shell line in `cwd` as a user would (stderr merged into stdout, in order); Node's own warnings dropped.
 * Asynchronous: the fakes live in this process and must keep answering while the command runs.
 */
async function sh(command: string, cwd: string, extra?: Record<string, string>): Promise<{ status: number | null; lines: string[] }> {
  const child = spawn('bash', ['-c', `exec 2>&1; ${command}`], { cwd, env: env(extra), stdio: ['ignore', 'pipe', 'inherit'], timeout: 120_000 })
  const out: Buffer[] = []
  child.stdout.on('data', (c: Buffer) => out.push(c))
  const [status] = (await once(child, 'close')) as [number | null]
  const text = Buffer.concat(out).toString('utf8')
  const lines = text === '' ? [] : text.replace(/\n$/, '').split('\n')
  return { status, lines: lines.filter((l) => !/^\(node:\d+\) /.test(l) && !l.startsWith('(Use `node --trace-warnings')) }
}

const hashTree = (dir: string) =>
  Object.fromEntries(
    readdirSync(dir)
      .sort()
      .map((n) => [n, sha256(readFileSync(join(dir, n)))]),
  )

async function readTraceText(name: string): Promise<string> {
  const store = await openStore(join(checkout, '.tool-replay/store'))
  try {
    return exportTrace(await store.readTrace(name)).text
  } finally {
    await store.close()
  }
}

/** Every body of a trace decoded (gzip included), with its headers and URLs. */
function decodedText(t: Trace): string {
  let text = JSON.stringify(t.exchanges)
  for (const x of t.exchanges) {
    const response = x.outcome.kind === 'response' ? x.outcome.response : undefined
    if (x.request.body) text += Buffer.from(bodyBytes(t, x.request.body)).toString('utf8')
    if (!response?.body) continue
    const bytes = bodyBytes(t, response.body)
    const encoding = headerValue(response.headers, 'content-encoding')
    text += Buffer.from(encoding ? decodeContentEncoding(bytes, encoding) : bytes).toString('utf8')
  }
  return text
}

const lines = (seen: readonly { line: string }[]) => seen.map((r) => r.line)

test('the approval agent README, command by command', async (t) => {
  assert.ok(COMMANDS.length >= 14, `the README walk-through has ${COMMANDS.length} commands`)
  let afterRecording: { model: number; refunds: number } | undefined
  let sourceTrace = ''

  for (const { command, expected } of COMMANDS) {
    await t.test(command, async () => {
      const isRecord = command.includes(`${EXAMPLE}/record.ts`)
      // The key goes only to the recording, where it reaches the provider; replay needs none.
      const r = await sh(command, checkout, isRecord ? { OPENAI_API_KEY: DUMMY_KEY } : {})
      assert.equal(r.status, 0, `exit ${r.status}:\n${r.lines.join('\n')}`)
      assert.ok(
        outputMatches(expected, r.lines),
        `the output differs from the README.\nREADME:\n${expected.map(normalizeOutput).join('\n')}\nactual:\n${r.lines.map(normalizeOutput).join('\n')}`,
      )
      if (isRecord) {
        assert.deepEqual(lines(fakes.model.requests), ['POST /v1/chat/completions', 'POST /v1/chat/completions'])
        assert.deepEqual(lines(fakes.refunds.requests), ['GET /v1/orders/A-1042/refund-check'])
        assert.ok(
          fakes.model.requests.every((q) => q.authorization === `Bearer ${DUMMY_KEY}`),
          'the recording sent the key to the provider',
        )
        afterRecording = { model: fakes.model.connections, refunds: fakes.refunds.connections }
        sourceTrace = await readTraceText('approval')
      }
      if (command.includes(' fork approval ')) assert.equal(await readTraceText('approval'), sourceTrace, 'the fork changed its source trace')
    })
  }

  await t.test('the fakes saw the recording and nothing after it', () => {
    assert.ok(afterRecording, 'the walk-through records')
    assert.equal(fakes.model.requests.length, 2)
    assert.equal(fakes.refunds.requests.length, 1)
    assert.deepEqual({ model: fakes.model.connections, refunds: fakes.refunds.connections }, afterRecording)
  })

  await t.test('the app is back as it was, and the committed case byte-identical', () => {
    assert.equal(readFileSync(join(checkout, EXAMPLE, 'app.ts'), 'utf8'), readFileSync(join(ROOT, EXAMPLE, 'app.ts'), 'utf8'))
    assert.deepEqual(hashTree(join(checkout, CASE)), hashTree(join(ROOT, CASE)), 'following the README changed the committed case')
    assert.notDeepEqual(hashTree(join(checkout, MY_CASE)), {}, 'the walk-through emitted its own case')
  })
})

test('no API key on disk: not in the decoded traces, not in any file of the store or the case', async () => {
  const store = await openStore(join(checkout, '.tool-replay/store'))
  try {
    const traces = await Promise.all(['approval', 'approval-overpay', 'approval-overpay-run', 'approval-overpay-proxy'].map((n) => store.readTrace(n)))
    const decoded = traces.map(decodedText).join('\n')
    assert.ok(decoded.includes('"refundable_cents":8999'), 'the decoded search sees the gzipped and plain response bodies')
    assert.ok(decoded.includes('[REDACTED]'), 'the authorization header was recorded, redacted')
    assert.equal(decoded.includes(DUMMY_KEY), false, 'a decoded trace holds the key')
  } finally {
    await store.close()
  }
  let files = 0
  for (const dir of ['.tool-replay/store', MY_CASE]) {
    for await (const file of filesUnder(join(checkout, dir))) {
      files++
      assert.equal((await readFile(file)).includes(DUMMY_KEY), false, `${file} holds the key`)
    }
  }
  assert.ok(files > 5, 'the store and the case wrote files')
})

test('the committed case verifies against the repository as it is, and verify leaves it byte-identical', async () => {
  const before = hashTree(join(ROOT, CASE))
  // `tr-proxy verify` in this process (the walk-through above runs it as a user does, through bash).
  // Both streams in order, each text a line as the CLI prints it (the app prints nothing of its own).
  let printed = ''
  const print = (t: string) => (printed += t.endsWith('\n') ? t : `${t}\n`)
  const status = await runCli(['verify', join(ROOT, CASE)], { out: print, err: print })
  const r = { status, lines: printed.replace(/\n$/, '').split('\n') }
  assert.equal(r.status, 0, r.lines.join('\n'))
  assert.deepEqual(r.lines, [
    'Case "refund-over-limit" passed: 3 exchange(s) replayed strictly, result {"decision":"manual_review","order_id":"A-1042","amount_usd":899.9} as expected.',
  ])
  assert.deepEqual(hashTree(join(ROOT, CASE)), before)
})
