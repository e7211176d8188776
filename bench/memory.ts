/**
 * Memory and scale benchmark (issue targets in brackets), each scenario in a process of its own so its
 * peak RSS (`process.resourceUsage().maxRSS`) is its own:
 *   - a 1 GiB response recorded and replayed through the interceptor and through the proxy, bytes compared
 *     by SHA-256 at the client                                                        [peak RSS < 150 MB]
 *   - a 10,000-exchange, ~330 MB trace replayed strictly through the interceptor        [RSS < 300 MB]
 *   - a single 1,000,000-exchange trace: the first strict-replay answer                 [< 1 s, RSS < 300 MB]
 *   - a 500,000-exchange trace imported from a trace file (`tr-proxy import`), then, each in a new process: the first
 *     strict-replay answer [< 1 s, RSS < 300 MB], `show --limit 20` and `ls`               [proportional to what is read]
 *   - `ls` of 1,000 traces                                                               [< 300 ms]
 * The upstream and the clients run in their own processes; only the Tool Replay process is measured.
 *
 *   npm run bench:memory            (BENCH_GIB=0.25 BENCH_MILLION=100000 for a quicker run;
 *                                    BENCH_ONLY=big or BENCH_ONLY=import for one part)
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { createHash } from 'node:crypto'
import { once } from 'node:events'
import { mkdtemp, rm } from 'node:fs/promises'
import { createServer } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { openSession } from 'tool-replay/engine'
import { install } from 'tool-replay/interceptor'
import { loadCertificateAuthority, startProxy } from 'tool-replay/proxy'
import { openStore, writeTraceFile } from 'tool-replay/store'
import { bodyFromBytes, type Exchange, TRACE_FORMAT_VERSION } from 'tool-replay/trace'
import { ProxyAgent, fetch as undiciFetch } from 'undici'

const SELF = fileURLToPath(import.meta.url)
const BIG_BYTES = Math.round(Number(process.env.BENCH_GIB ?? 1) * 1024 ** 3)
const TEN_K = 10_000
const TEN_K_BODY = 33 * 1024
const MILLION = Number(process.env.BENCH_MILLION ?? 1_000_000)
/**
 * Exchanges of the imported trace: a trace file is one JSON text, and V8 caps a string near 512 MiB, which a
 * million exchanges pretty-printed exceed (README Limits).
 */
const IMPORTED = Number(process.env.BENCH_IMPORT ?? 500_000)
const LS_TRACES = 1000
const PATTERN = Buffer.alloc(64 * 1024)
for (let i = 0; i < PATTERN.byteLength; i++) PATTERN[i] = (i * 31 + 7) & 0xff

const rssMb = () => process.resourceUsage().maxRSS / 1024

/** The deterministic big body, streamed: PATTERN with the piece number stamped in, so no two pieces are equal. */
function* bigBody(total: number): Generator<Buffer> {
  for (let offset = 0, n = 0; offset < total; offset += PATTERN.byteLength, n++) {
    const piece = Buffer.from(PATTERN.subarray(0, Math.min(PATTERN.byteLength, total - offset)))
    piece.writeUInt32BE(n, 0)
    yield piece
  }
}

function expectedSha(total: number): string {
  const h = createHash('sha256')
  for (const p of bigBody(total)) h.update(p)
  return h.digest('hex')
}

async function readHashed(body: AsyncIterable<Uint8Array>): Promise<{ sha: string; bytes: number }> {
  const h = createHash('sha256')
  let bytes = 0
  for await (const chunk of body) {
    h.update(chunk)
    bytes += chunk.byteLength
  }
  return { sha: h.digest('hex'), bytes }
}

// ---- children ----------------------------------------------------------------------------------------

const children: Record<string, (args: string[]) => Promise<unknown>> = {
  /** The upstream: /big streams the big body; /item/N answers a distinct 33 KB body. Prints its port. */
  async upstream() {
    const server = createServer(async (req, res) => {
      if (req.url === '/big') {
        res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(BIG_BYTES) })
        for (const piece of bigBody(BIG_BYTES)) if (!res.write(piece)) await once(res, 'drain')
        res.end()
        return
      }
      res.writeHead(200, { 'content-type': 'application/octet-stream' })
      res.end(itemBody(Number((req.url ?? '/item/0').split('/').pop())))
    })
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
    process.stdout.write(`${(server.address() as { port: number }).port}\n`)
    await new Promise(() => {})
  },
  /** The app with the interceptor, recording or replaying /big; 'live' is the same app without Tool Replay. */
  async 'interceptor-big'([mode, store, url]) {
    if (mode === 'live') return { ...(await readHashed((await fetch(url as string)).body as unknown as AsyncIterable<Uint8Array>)), ok: true, rssMb: rssMb() }
    const s = await openStore(store as string)
    const tr = await install({ mode: mode as 'record' | 'replay', trace: 'big', store: s })
    const res = await fetch(url as string)
    const got = await readHashed(res.body as unknown as AsyncIterable<Uint8Array>)
    const summary = await tr.close()
    await s.close()
    return { ...got, ok: summary.ok, rssMb: rssMb() }
  },
  /** The proxy in record, replay or passthrough mode; serves until stdin closes, then reports its own peak RSS. */
  async proxy([mode, store, upstreamPort]) {
    const s = await openStore(store as string)
    const session = await openSession({ mode: mode as 'record' | 'replay' | 'passthrough', trace: 'big-proxy', store: s })
    const ca = await loadCertificateAuthority(store as string)
    const proxy = await startProxy({ session, ca, upstream: { resolve: { 'big.test': { host: '127.0.0.1', port: Number(upstreamPort) } } } })
    process.stdout.write(`${proxy.url}\n`)
    process.stdin.resume()
    await once(process.stdin, 'end')
    const summary = await proxy.close()
    await s.close()
    return { ok: summary.ok, rssMb: rssMb() }
  },
  /** A client through the proxy. */
  async client([proxyUrl]) {
    const agent = new ProxyAgent(proxyUrl as string)
    const res = await undiciFetch('http://big.test/big', { dispatcher: agent })
    const got = await readHashed(res.body as unknown as AsyncIterable<Uint8Array>)
    await agent.close()
    return got
  },
  /** Builds a trace of 10,000 exchanges with distinct 33 KB bodies, through the recording API. */
  async 'build-10k'([store, base]) {
    const s = await openStore(store as string)
    const rec = await s.beginTrace({ name: 'ten-k', format: TRACE_FORMAT_VERSION })
    for (let i = 0; i < TEN_K; i += 100) {
      await Promise.all(Array.from({ length: 100 }, (_, k) => appendItem(rec, i + k, `${base}/item/${i + k}`, itemBody(i + k))))
    }
    await rec.close()
    await s.close()
    return { built: TEN_K }
  },
  /** Replays all 10,000 exchanges strictly through the interceptor. */
  async 'replay-10k'([store, base]) {
    const s = await openStore(store as string)
    const t0 = performance.now()
    const tr = await install({ mode: 'replay', trace: 'ten-k', store: s })
    let bytes = 0
    for (let i = 0; i < TEN_K; i++) bytes += (await (await fetch(`${base}/item/${i}`)).arrayBuffer()).byteLength
    const summary = await tr.close()
    await s.close()
    return { bytes, ok: summary.ok, ms: performance.now() - t0, rssMb: rssMb() }
  },
  /** Builds one trace of a million exchanges (tiny, shared body). */
  async 'build-million'([store, base]) {
    const s = await openStore(store as string)
    const rec = await s.beginTrace({ name: 'million', format: TRACE_FORMAT_VERSION })
    const body = new TextEncoder().encode('{"ok":true}')
    for (let i = 0; i < MILLION; i += 1000) {
      await Promise.all(Array.from({ length: Math.min(1000, MILLION - i) }, (_, k) => appendItem(rec, i + k, `${base}/m/${i + k}`, body)))
    }
    await rec.close()
    await s.close()
    return { built: MILLION }
  },
  /** Opens the million-exchange trace for strict replay and asks for one recorded request. */
  async 'first-answer-million'([store, base, count]) {
    const t0 = performance.now()
    const s = await openStore(store as string)
    await install({ mode: 'replay', trace: 'million', store: s })
    const text = await (await fetch(`${base}/m/${Math.floor(Number(count ?? MILLION) / 2)}`)).text()
    const ms = performance.now() - t0
    const rss = rssMb()
    // Not closed: listing 999,999 unused recordings is not what this measures.
    return { ms, rssMb: rss, answer: text }
  },
  /** Writes a trace file of a million exchanges (one shared tiny body), as an export would. */
  async 'million-file'([file, base]) {
    const body = bodyFromBytes(new TextEncoder().encode('{"ok":true}'))
    const exchanges = Array.from({ length: IMPORTED }, (_, i) => millionExchange(i, `${base}/m/${i}`, body.ref))
    await writeTraceFile(file as string, {
      meta: { name: 'million', format: TRACE_FORMAT_VERSION },
      exchanges,
      bodies: new Map([[body.ref.digest, body.bytes]]),
    })
    return { written: IMPORTED }
  },
  /** `tr-proxy import FILE` into a new store. */
  async 'import-million'([store, file]) {
    const { runCli } = await import('../cli/index.ts')
    const t0 = performance.now()
    const err: string[] = []
    const code = await runCli(['import', file as string, '--store', store as string], { out: () => {}, err: (t) => err.push(t) })
    return { code, err: err.join('\n'), ms: performance.now() - t0, rssMb: rssMb() }
  },
  /** `tr-proxy show million --limit 20` (or `ls`): a read-only command on the big store. */
  async 'cli-million'([store, ...argv]) {
    const { runCli } = await import('../cli/index.ts')
    const t0 = performance.now()
    const out: string[] = []
    const code = await runCli([...argv, '--store', store as string], { out: (t) => out.push(t), err: (t) => out.push(t) })
    return { code, ms: performance.now() - t0, rssMb: rssMb(), lines: out.join('\n').split('\n').length, head: out.join('\n').slice(0, 200) }
  },
  /** Lists a store of 1,000 traces the way `tr-proxy ls` does. */
  async ls([store]) {
    const { runCli } = await import('../cli/index.ts')
    const t0 = performance.now()
    const out: string[] = []
    const code = await runCli(['ls', '--store', store as string], { out: (t) => out.push(t), err: () => {} })
    return { code, ms: performance.now() - t0, lines: out.join('\n').split('\n').length }
  },
  async 'build-ls'([store]) {
    const s = await openStore(store as string)
    for (let i = 0; i < LS_TRACES; i++) {
      const rec = await s.beginTrace({ name: `t${i}`, format: TRACE_FORMAT_VERSION })
      await appendItem(rec, 0, `http://ls.test/${i}`, new TextEncoder().encode('x'))
      await rec.close()
    }
    await s.close()
    return { built: LS_TRACES }
  },
}

function millionExchange(seq: number, url: string, body: Exchange['request']['body'] & object): Exchange {
  return {
    seq,
    request: { method: 'GET', url, headers: [], body: null },
    outcome: { kind: 'response', response: { status: 200, statusText: 'OK', headers: [['content-type', 'application/octet-stream']], body, trailers: [] } },
    timing: { startMs: seq, headersMs: 1 },
  }
}

/** The import scenario: a million-exchange trace file imported, then read by fresh processes. */
async function importRows(dir: string, base: string, log: (s: string) => void): Promise<Array<[string, string, string, boolean]>> {
  const rows: Array<[string, string, string, boolean]> = []
  const file = join(dir, 'million.trace.json')
  const store = join(dir, 'imported')
  log(`writing a ${IMPORTED}-exchange trace file ...`)
  await child('million-file', [file, base]).result
  log('importing it ...')
  const imp = await child('import-million', [store, file]).result
  rows.push([
    `import of a ${IMPORTED}-exchange trace file`,
    `${(Number(imp.ms) / 1000).toFixed(1)} s, peak RSS ${Number(imp.rssMb).toFixed(0)} MB (exit ${imp.code}${imp.err ? `: ${String(imp.err).slice(0, 80)}` : ''})`,
    'reads the file whole',
    imp.code === 0,
  ])
  const m = await child('first-answer-million', [store, base, String(IMPORTED)]).result
  rows.push([
    `  then the first strict answer (new process)`,
    `${Number(m.ms).toFixed(0)} ms, peak RSS ${Number(m.rssMb).toFixed(0)} MB`,
    '< 1 s, < 300 MB',
    m.answer === '{"ok":true}' && Number(m.ms) < 1000 && Number(m.rssMb) < 300,
  ])
  for (const argv of [['show', 'million', '--limit', '20'], ['ls']]) {
    const r = await child('cli-million', [store, ...argv]).result
    rows.push([
      `  then \`${argv.join(' ')}\``,
      `${Number(r.ms).toFixed(0)} ms, peak RSS ${Number(r.rssMb).toFixed(0)} MB, ${r.lines} lines`,
      '< 1 s, < 300 MB',
      r.code === 0 && Number(r.ms) < 1000 && Number(r.rssMb) < 300,
    ])
  }
  return rows
}

function itemBody(i: number): Buffer {
  const b = Buffer.alloc(TEN_K_BODY, i & 0xff)
  b.writeUInt32BE(i, 0)
  return b
}

function appendItem(rec: Awaited<ReturnType<Awaited<ReturnType<typeof openStore>>['beginTrace']>>, seq: number, url: string, bytes: Uint8Array): Promise<void> {
  const body = bodyFromBytes(bytes)
  const x: Exchange = {
    seq,
    request: { method: 'GET', url, headers: [], body: null },
    outcome: {
      kind: 'response',
      response: { status: 200, statusText: 'OK', headers: [['content-type', 'application/octet-stream']], body: body.ref, trailers: [] },
    },
    timing: { startMs: seq, headersMs: 1 },
  }
  return rec.append(x, new Map([[body.ref.digest, body.bytes]]))
}

// ---- orchestration -----------------------------------------------------------------------------------

function child(name: string, args: string[], onLine?: (line: string) => void): { proc: ChildProcess; result: Promise<Record<string, unknown>> } {
  const proc = spawn(process.execPath, ['--conditions=tool-replay-source', SELF, '--child', name, ...args], { stdio: ['pipe', 'pipe', 'inherit'] })
  running.add(proc)
  const lines: string[] = []
  let rest = ''
  proc.stdout?.setEncoding('utf8')
  proc.stdout?.on('data', (d: string) => {
    rest += d
    for (let nl = rest.indexOf('\n'); nl !== -1; nl = rest.indexOf('\n')) {
      const line = rest.slice(0, nl)
      rest = rest.slice(nl + 1)
      lines.push(line)
      onLine?.(line)
    }
  })
  const result = once(proc, 'exit').then(([code]) => {
    running.delete(proc)
    if (code !== 0) throw new Error(`bench child ${name} exited ${code}`)
    return JSON.parse(lines.at(-1) ?? 'null') as Record<string, unknown>
  })
  return { proc, result }
}

/** Children still running, killed if the bench fails half-way. */
const running = new Set<ChildProcess>()

function firstLine(name: string, args: string[]): Promise<{ proc: ChildProcess; line: string; result: Promise<Record<string, unknown>> }> {
  return new Promise((resolve) => {
    let resolved = false
    const c = child(name, args, (line) => {
      if (!resolved) {
        resolved = true
        resolve({ ...c, line })
      }
    })
  })
}

async function main(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'tr-bench-memory-'))
  const rows: Array<[string, string, string, boolean]> = []
  const log = (s: string) => process.stderr.write(`${s}\n`)
  try {
    const up = await firstLine('upstream', [])
    // The upstream serves until it is killed at the end.
    up.result.catch(() => {})
    const base = `http://127.0.0.1:${up.line}`
    const sha = expectedSha(BIG_BYTES)
    const gib = (BIG_BYTES / 1024 ** 3).toFixed(2)

    // Each path's baseline in the same run: the same app (or proxy) moving the same bytes without Tool Replay
    // storing anything. Node's fetch alone holds about 120-140 MB at its peak streaming such a body.
    if (process.env.BENCH_ONLY === 'import') {
      rows.push(...(await importRows(dir, base, log)))
      up.proc.kill()
      return printRows(rows)
    }
    const baseline: Record<string, number> = {}
    for (const mode of ['live', 'record', 'replay']) {
      log(`interceptor ${mode} of ${gib} GiB ...`)
      const r = await child('interceptor-big', [mode, join(dir, 'big'), `${base}/big`]).result
      const same = r.sha === sha && r.bytes === BIG_BYTES && r.ok === true
      const rss = Number(r.rssMb)
      if (mode === 'live') {
        baseline.interceptor = rss
        continue
      }
      rows.push([
        `${gib} GiB body, interceptor ${mode}`,
        `peak RSS ${rss.toFixed(0)} MB (+${(rss - (baseline.interceptor as number)).toFixed(0)} over plain fetch's ${baseline.interceptor?.toFixed(0)}), bytes ${same ? 'identical' : 'DIFFERENT'}`,
        '< 150 MB',
        same && rss < 150,
      ])
    }
    for (const mode of ['passthrough', 'record', 'replay']) {
      log(`proxy ${mode} of ${gib} GiB ...`)
      const proxy = await firstLine('proxy', [mode, join(dir, 'big-proxy'), up.line])
      const c = await child('client', [proxy.line]).result
      proxy.proc.stdin?.end()
      const p = await proxy.result
      const same = c.sha === sha && c.bytes === BIG_BYTES && p.ok === true
      const rss = Number(p.rssMb)
      if (mode === 'passthrough') {
        baseline.proxy = rss
        continue
      }
      rows.push([
        `${gib} GiB body, proxy ${mode}`,
        `peak RSS ${rss.toFixed(0)} MB (+${(rss - (baseline.proxy as number)).toFixed(0)} over passthrough's ${baseline.proxy?.toFixed(0)}), bytes ${same ? 'identical' : 'DIFFERENT'}`,
        '< 150 MB',
        same && rss < 150,
      ])
    }

    if (process.env.BENCH_ONLY === 'big') {
      up.proc.kill()
      return printRows(rows)
    }
    rows.push(...(await importRows(dir, base, log)))
    log(`building a ${TEN_K}-exchange trace ...`)
    await child('build-10k', [join(dir, 'ten-k'), base]).result
    const tenK = await child('replay-10k', [join(dir, 'ten-k'), base]).result
    const mb = Number(tenK.bytes) / 1024 / 1024
    rows.push([
      `${TEN_K} exchanges, ${mb.toFixed(0)} MB of bodies, strict replay`,
      `peak RSS ${Number(tenK.rssMb).toFixed(0)} MB, ${Number(tenK.ms).toFixed(0)} ms, ${tenK.ok ? 'ok' : 'NOT ok'}`,
      '< 300 MB',
      tenK.ok === true && Number(tenK.rssMb) < 300,
    ])

    log(`building a ${MILLION}-exchange trace (takes a while) ...`)
    const t0 = performance.now()
    await child('build-million', [join(dir, 'million'), base]).result
    log(`  built in ${((performance.now() - t0) / 1000).toFixed(0)} s`)
    const m = await child('first-answer-million', [join(dir, 'million'), base]).result
    rows.push([
      `${MILLION} exchanges in one trace: first strict answer`,
      `${Number(m.ms).toFixed(0)} ms, peak RSS ${Number(m.rssMb).toFixed(0)} MB`,
      '< 1 s, < 300 MB',
      m.answer === '{"ok":true}' && Number(m.ms) < 1000 && Number(m.rssMb) < 300,
    ])

    log(`building ${LS_TRACES} traces ...`)
    await child('build-ls', [join(dir, 'ls')]).result
    const ls = await child('ls', [join(dir, 'ls')]).result
    rows.push([
      `ls of ${LS_TRACES} traces`,
      `${Number(ls.ms).toFixed(0)} ms (in the CLI, store opened and closed)`,
      '< 300 ms',
      ls.code === 0 && Number(ls.ms) < 300,
    ])
    up.proc.kill()
  } finally {
    for (const p of running) p.kill()
    await rm(dir, { recursive: true, force: true })
  }
  printRows(rows)
}

function printRows(rows: Array<[string, string, string, boolean]>): void {
  const w = Math.max(...rows.map((r) => r[0].length)) + 2
  process.stdout.write(
    `\nMemory and scale (Node ${process.version})\n\n${rows.map(([name, got, target, pass]) => `${pass ? 'PASS' : 'MISS'}  ${name.padEnd(w)}${got.padEnd(80)}target ${target}`).join('\n')}\n`,
  )
}

if (process.argv[2] === '--child') {
  const name = process.argv[3] as string
  const result = await (children[name] as (args: string[]) => Promise<unknown>)(process.argv.slice(4))
  process.stdout.write(`${JSON.stringify(result)}\n`)
  process.exit(0)
} else {
  await main()
}
