/**
 * Cold start of the packed CLI (bench/lib/packed.ts: `npm pack`, installed in a scratch project, compiled JS as
 * users run it), interleaved in rounds:
 * - spawn → first replayed answer: `tr-proxy replay --strict --port 0` on a LevelDB store holding a one-exchange
 *   trace, then one GET through it on a new connection; against a bare node:http server script (the limit: a
 *   Node process that listens and answers) and a talkback script in replay mode (the peer), each spawned the
 *   same way and asked the same thing once it prints its address. Ratio: ours / limit, in time.
 * - a strict miss reaching each LLM SDK on a cold start through the proxy: `tr-proxy replay --strict -- node
 *   bench/clients/llm-miss.ts SDK` (forward proxy, HTTPS MITM to a host never recorded, so the first request is
 *   the miss); the app times its streamed call to the error it sees (target < 300 ms, issue 16: the Vercel AI
 *   SDK took 479 ms). The run must end with exit 69, one unmatched request and the SDK's error a 403.
 *   Its limit: the same app and SDK in a cold process, pointed (base URL, no proxy) at a bare HTTPS server that
 *   answers our refusal (engine `refusalResponse`) at once: what the SDK and Node cost without Tool Replay.
 *
 *   node --conditions=tool-replay-source bench/suites/cold-start.ts
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { once } from 'node:events'
import { mkdtemp, rm } from 'node:fs/promises'
import { request } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { ErrorCodes, ToolReplayError } from 'tool-replay'
import { openStore } from 'tool-replay/store'
import { refusalResponse } from '../../capture/index.ts'
import { interleave, median, PROFILE, pick, runSuite } from '../lib/harness.ts'
import { packedProject } from '../lib/packed.ts'
import { childProfiles, cpuProfArgs, summarizeProfile } from '../lib/profile.ts'
import { repeatedGetTrace, startBare, talkback, testPki } from '../lib/servers.ts'

const BODY = Buffer.alloc(1024, 'x')
const HEADERS: Array<[string, string]> = [
  ['content-type', 'application/octet-stream'],
  ['content-length', String(BODY.byteLength)],
]
const SDKS = ['openai', 'anthropic', 'ai', 'langchain'] as const
const client = (name: string) => fileURLToPath(new URL(`../clients/${name}`, import.meta.url))
const wallNow = () => performance.timeOrigin + performance.now()

/** Resolves with the first `listening on http://127.0.0.1:PORT` the process prints (stdout or stderr). */
function address(child: ChildProcess): Promise<number> {
  return new Promise((resolve, reject) => {
    let seen = ''
    const look = (c: Buffer) => {
      seen += c
      const m = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(seen)
      if (m) resolve(Number(m[1]))
    }
    child.stdout?.on('data', look)
    child.stderr?.on('data', look)
    child.once('exit', (code) => reject(new Error(`bench: process exited ${code} before listening: ${seen}`)))
  })
}

/** GET on a new connection; resolves when the whole body has arrived. */
function firstAnswer(port: number, path: string, host?: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, agent: false, headers: host ? { host } : {} }, (res) => {
      let n = 0
      res.on('data', (c: Buffer) => (n += c.byteLength))
      res.on('end', () =>
        res.statusCode === 200 && n === BODY.byteLength ? resolve() : reject(new Error(`bench: first answer ${res.statusCode}, ${n} bytes`)),
      )
    })
    req.on('error', reject)
    req.end()
  })
}

/** ms from spawning `args` to the first answer; then stops it (SIGINT) and waits for its exit. */
async function spawnToAnswer(args: string[], path: string, host?: string): Promise<number> {
  const t0 = performance.now()
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] })
  const exited = once(child, 'exit')
  const port = await address(child)
  await firstAnswer(port, path, host)
  const ms = performance.now() - t0
  child.kill('SIGINT')
  await exited
  return ms
}

await runSuite('cold-start', 'Cold start of the packed CLI: first replayed answer, and a strict miss in each LLM SDK', async (report) => {
  const packed = await packedProject()
  const dir = await mkdtemp(join(tmpdir(), 'tr-bench-cold-'))
  const storeDir = join(dir, 'store')
  const store = await openStore(storeDir)
  await store.putTrace(repeatedGetTrace('cold', 'http://bench.test/kb', 1, BODY, HEADERS))
  await store.close()
  const tapes = join(dir, 'tapes')
  const bareUpstream = await startBare((_req, res) => {
    res.writeHead(200, HEADERS)
    res.end(BODY)
  })
  const recorder = talkback({ host: `http://127.0.0.1:${bareUpstream.port}`, port: 0, path: tapes, silent: true, summary: false, allowHeaders: [] })
  const tbServer = await recorder.start()
  const tbPort = (tbServer.address() as { port: number }).port
  await firstAnswer(tbPort, '/kb')
  recorder.close()
  bareUpstream.close()
  report.setup(`packed tool-replay in ${packed.dir}; store: LevelDB with a one-exchange trace; first answer: GET 1 KB on a new connection`)

  const oursArgs = [packed.cli, 'replay', '--strict', '--store', storeDir, '--trace', 'cold', '--port', '0']
  const ms = await interleave(
    {
      'tr-proxy replay': () => spawnToAnswer(oursArgs, 'http://bench.test/kb', 'bench.test'),
      'bare node:http': () => spawnToAnswer([client('cold-bare.mjs')], '/kb'),
      talkback: () => spawnToAnswer([client('cold-talkback.mjs'), tapes], '/kb'),
    },
    pick(3, 7),
  )
  const m = (name: string) => median(ms[name] as number[])
  for (const [id, peer] of [
    ['cold.first-answer.vs-bare', 'bare node:http'],
    ['cold.first-answer.vs-talkback', 'talkback'],
  ] as const) {
    report.row({
      id,
      metric: `cold start: spawn tr-proxy replay → first replayed answer, vs ${peer} (time)`,
      ours: m('tr-proxy replay'),
      unit: 'ms',
      peer: { name: peer, value: m(peer) },
      ratio: m('tr-proxy replay') / m(peer),
      ratioOf: 'ours/peer',
      ratioText: `x ${peer} time`,
      rounds: { ours: ms['tr-proxy replay'] as number[], peer: ms[peer] as number[] },
    })
  }

  const missRun = async (sdk: string, profileArgs: string[] = []) => {
    const t0 = wallNow()
    const child = spawn(
      process.execPath,
      [...profileArgs, packed.cli, 'replay', '--strict', '--store', storeDir, '--trace', 'cold', '--', process.execPath, client('llm-miss.ts'), sdk],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    )
    let out = ''
    let err = ''
    child.stdout.on('data', (c: Buffer) => (out += c))
    child.stderr.on('data', (c: Buffer) => (err += c))
    const [code] = await once(child, 'exit')
    const r = JSON.parse(out.slice(out.indexOf('{'))) as { ms: number; at: number; status: number; message: string }
    if (code !== 69 || r.status !== 403 || !/; 1 unmatched,/.test(err)) {
      throw new Error(`bench: ${sdk} miss: exit ${code}, status ${r.status} (${r.message}), expected exit 69, one unmatched request, a 403:\n${err}`)
    }
    return { ms: r.ms, sinceSpawn: r.at - t0 }
  }
  const pki = await testPki(dir)
  const refusal = refusalResponse(new ToolReplayError(ErrorCodes.REPLAY_MISS, 'Failed to replay: the bench sends a request no trace recorded.'))
  const refuser = await startBare((req, res) => {
    req.resume()
    req.on('end', () => {
      res.writeHead(refusal.status, refusal.statusText, refusal.headers.flat())
      res.end(refusal.body)
    })
  }, pki)
  const limitRun = async (sdk: string) => {
    const base = `https://127.0.0.1:${refuser.port}`
    const env = { ...process.env, NODE_EXTRA_CA_CERTS: pki.caPath, BENCH_OPENAI_BASE: `${base}/v1`, BENCH_ANTHROPIC_BASE: base }
    const child = spawn(process.execPath, [client('llm-miss.ts'), sdk], { stdio: ['ignore', 'pipe', 'pipe'], env })
    let out = ''
    child.stdout.on('data', (c: Buffer) => (out += c))
    await once(child, 'exit')
    const r = JSON.parse(out) as { ms: number; status: number; message: string }
    if (r.status !== 403) throw new Error(`bench: ${sdk} against the bare refusal: status ${r.status} (${r.message})`)
    return r.ms
  }
  const sinceSpawn: Record<string, number[]> = {}
  const misses = await interleave(
    Object.fromEntries(
      SDKS.flatMap((sdk) => [
        [
          sdk,
          async () => {
            const r = await missRun(sdk)
            ;(sinceSpawn[sdk] ??= []).push(r.sinceSpawn)
            return r.ms
          },
        ],
        [`${sdk} limit`, () => limitRun(sdk)],
      ]),
    ),
    pick(2, 5),
  )
  refuser.close()
  for (const sdk of SDKS) {
    const ours = median(misses[sdk] as number[])
    const limit = median(misses[`${sdk} limit`] as number[])
    report.row({
      id: `cold.miss.${sdk}`,
      metric: `cold strict miss through the proxy reaches ${sdk} (call → error)`,
      ours,
      unit: 'ms',
      peer: { name: 'same SDK, bare refusal, no proxy', value: limit },
      ratio: ours / limit,
      ratioText: 'x limit time',
      ratioOf: 'ours/peer',
      target: { kind: 'max', value: 300, text: '< 300 ms', on: 'ours' },
      rounds: { ours: misses[sdk] as number[], peer: misses[`${sdk} limit`] as number[] },
      note: `spawn of tr-proxy → error in the app: ${median(sinceSpawn[sdk] as number[]).toFixed(0)} ms (median)`,
    })
  }

  if (PROFILE) {
    const first = cpuProfArgs('cold tr-proxy replay')
    await spawnToAnswer([...first.args, ...oursArgs], 'http://bench.test/kb', 'bench.test')
    for (const file of childProfiles(first.dir)) report.profile(summarizeProfile('cold start: tr-proxy replay → first answer (whole process)', file))
    const slowest = SDKS.reduce((a, b) => (median(misses[a] as number[]) >= median(misses[b] as number[]) ? a : b))
    const miss = cpuProfArgs(`cold miss ${slowest}`)
    await missRun(slowest, miss.args)
    for (const file of childProfiles(miss.dir)) report.profile(summarizeProfile(`cold miss, ${slowest}: the tr-proxy process`, file))
  }
  await rm(dir, { recursive: true, force: true })
})
