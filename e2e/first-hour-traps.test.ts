/**
 * The traps of a new user's first hour, each as the user meets it through the CLI: a client that does not trust
 * the proxy CA (the proxy names the host and the fix, once per host), a proxy run that fails before its command
 * ran (no trace left behind), and a committed trace file replayed without an import.
 */
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { cpSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import http from 'node:http'
import { createServer } from 'node:net'
import { join } from 'node:path'
import { describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { tempDir } from './support/proxy-harness.ts'

const BIN = fileURLToPath(new URL('../bin/tr-proxy.js', import.meta.url))

/** Runs the CLI; a wrapped command gets the environment it would in a user's shell. */
async function cli(args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [BIN, ...args], { env: { ...process.env, NO_COLOR: '1', ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (c: Buffer) => (stdout += c))
  child.stderr.on('data', (c: Buffer) => (stderr += c))
  const timer = setTimeout(() => child.kill('SIGKILL'), 90_000)
  const [code] = await once(child, 'exit')
  clearTimeout(timer)
  return { code: code as number | null, stdout, stderr }
}

const NODE_FETCH = 'fetch(process.argv[1]).then(() => console.log("fetched"), (e) => console.log("node:", e.cause?.code ?? e.message))'

describe('a client that rejects the proxy CA', { timeout: 180_000 }, () => {
  test('curl, Node fetch and Python requests without the CA variables: one proxy line per host naming the fix', async () => {
    const store = join(tempDir('tr-ca-reject-'), 'store')
    // Each client drops the trust variables the wrapper sets (what a client with its own trust store does), and
    // tries twice: the second attempt at a host must not add a line.
    const untrusted = 'env -u NODE_EXTRA_CA_CERTS -u SSL_CERT_FILE -u REQUESTS_CA_BUNDLE -u CURL_CA_BUNDLE'
    const script = [
      `${untrusted} curl -sS https://curl.test/ 2>&1; ${untrusted} curl -sS https://curl.test/again 2>&1`,
      `${untrusted} "${process.execPath}" -e '${NODE_FETCH}' https://node.test/`,
      `${untrusted} "${process.execPath}" -e '${NODE_FETCH}' https://node.test/again`,
      `${untrusted} python3 -c 'import requests; requests.get("https://python.test/")' 2>&1 | tail -1`,
      'true',
    ].join('; ')
    const r = await cli(['record', '--store', store, '--trace', 'untrusted', '--', 'sh', '-c', script])
    assert.equal(r.code, 0, r.stderr)
    // The clients failed as a user sees it: their own TLS errors.
    assert.match(r.stdout, /curl: \(60\)/)
    assert.match(r.stdout, /node: (SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_VERIFY_LEAF_SIGNATURE|UNABLE_TO_GET_ISSUER_CERT_LOCALLY)/)
    assert.match(r.stdout, /SSLError/)
    const lines = r.stderr.split('\n').filter((l) => l.includes("rejected the proxy's certificate"))
    const hosts = lines.map((l) => /certificate for (\S+) /.exec(l)?.[1]).sort()
    assert.deepEqual(hosts, ['curl.test', 'node.test', 'python.test'], r.stderr)
    const ca = join(store, 'ca')
    for (const line of lines) {
      assert.match(line, new RegExp(`NODE_EXTRA_CA_CERTS=${ca}/\\S+\\.pem`))
      for (const fix of ['REQUESTS_CA_BUNDLE=', 'SSL_CERT_FILE=', 'curl --cacert ']) assert.ok(line.includes(`${fix}${ca}/bundle.pem`), line)
    }
    assert.match(lines.find((l) => l.includes('curl.test')) ?? '', /TLS alert unknown_ca/)
    assert.match(lines.find((l) => l.includes('node.test')) ?? '', /closed the connection during the TLS handshake/)
  })

  test('a client that trusts the CA gets no such line', async () => {
    const store = join(tempDir('tr-ca-trust-'), 'store')
    const r = await cli([
      'record',
      '--store',
      store,
      '--trace',
      'trusted',
      '--',
      'sh',
      '-c',
      `"${process.execPath}" -e '${NODE_FETCH}' https://127.0.0.1:9/; true`,
    ])
    assert.equal(r.code, 0, r.stderr)
    assert.doesNotMatch(r.stderr, /rejected the proxy's certificate/)
  })
})

describe('a proxy run that fails before its command ran', { timeout: 180_000 }, () => {
  test('leaves no trace: port taken, command not found, bad option, CA unreadable; the trace of that name is untouched', async (t) => {
    const work = tempDir('tr-failed-start-')
    const store = join(work, 'store')
    const first = await cli(['record', '--store', store, '--trace', 'kept', '--', 'sh', '-c', 'exit 0'])
    assert.equal(first.code, 0, first.stderr)
    const listing = async (dir: string) => {
      const r = await cli(['ls', '--store', dir, '--json'])
      assert.equal(r.code, 0, r.stderr)
      return (JSON.parse(r.stdout) as { traces: Array<{ name: string; status: string; id: string }> }).traces
    }
    const before = await listing(store)
    assert.deepEqual(
      before.map((x) => [x.name, x.status]),
      [['kept', 'complete']],
    )
    const taken = createServer()
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve))
    t.after(() => taken.close())
    const port = String((taken.address() as { port: number }).port)
    const attempts: Array<[string[], number, RegExp]> = [
      [['record', '--trace', 'kept', '--port', port, '--', 'true'], 74, /TR_PROXY_START_FAILED.*EADDRINUSE/],
      [['record', '--trace', 'fresh', '--port', port, '--', 'true'], 74, /TR_PROXY_START_FAILED/],
      [['serve', '--mode', 'record', '--trace', 'served', '--port', port], 74, /TR_PROXY_START_FAILED/],
      [['record', '--trace', 'kept', '--', 'no-such-command-tr'], 74, /TR_COMMAND_FAILED: Failed to start command "no-such-command-tr"/],
      [['record', '--trace', 'fresh', '--', './not-here.sh'], 74, /TR_COMMAND_FAILED/],
      [['record', '--trace', 'kept', '--pace', 'bogus', '--', 'true'], 64, /TR_INVALID_OPTION/],
    ]
    for (const [args, code, message] of attempts) {
      const [command, ...rest] = args as [string, ...string[]]
      const r = await cli([command, '--store', store, ...rest])
      assert.equal(r.code, code, `${args.join(' ')}: ${r.stderr}`)
      assert.match(r.stderr, message)
      assert.deepEqual(await listing(store), before, `${args.join(' ')} left a trace`)
    }
    // A CA that cannot be read: a copy of the store whose ca.pem is not a certificate.
    const broken = join(work, 'broken')
    cpSync(store, broken, { recursive: true })
    writeFileSync(join(broken, 'ca', 'ca.pem'), 'not a certificate\n')
    const ca = await cli(['record', '--store', broken, '--trace', 'kept', '--', 'true'])
    assert.equal(ca.code, 74, ca.stderr)
    assert.match(ca.stderr, /proxy CA/)
    assert.deepEqual(await listing(broken), before)
  })
})

describe('replay --trace-file: a committed trace file replayed without import', { timeout: 180_000 }, () => {
  test('verified first, served from memory with the upstream stopped, the store never created; a tampered file runs nothing', async () => {
    const work = tempDir('tr-replay-file-')
    const store = join(work, 'store')
    let hits = 0
    const api = http.createServer((_req, res) => {
      hits++
      res.end('hello from the api')
    })
    await new Promise<void>((resolve) => api.listen(0, '127.0.0.1', resolve))
    const url = `http://127.0.0.1:${(api.address() as { port: number }).port}/greeting`
    const rec = await cli(['record', '--store', store, '--trace', 'greet', '--', 'curl', '-sS', url])
    assert.equal(rec.code, 0, rec.stderr)
    const file = join(work, 'greet.trace.json')
    const exported = await cli(['export', 'greet', '--store', store, '--out', file])
    assert.equal(exported.code, 0, exported.stderr)
    await new Promise<void>((resolve) => api.close(() => resolve()))
    const recorded = hits

    // A --store that does not exist: replaying the file must neither need nor create it.
    const absent = join(work, 'no-store-here')
    const replay = await cli(['replay', '--strict', '--store', absent, '--trace-file', file, '--', 'curl', '-sS', url])
    assert.equal(replay.code, 0, replay.stderr)
    assert.equal(replay.stdout, 'hello from the api')
    assert.match(replay.stderr, /replay of trace "greet": 1 replayed/)
    assert.equal(hits, recorded, 'the replay reached the upstream')
    assert.equal(existsSync(absent), false, 'replay --trace-file created a store')

    // The app asks for something the file does not hold: the strict verdict, as a replay from the store gives it.
    const miss = await cli(['replay', '--strict', '--store', absent, '--trace-file', file, '--', 'curl', '-sS', `${url}/other`])
    assert.equal(miss.code, 69, miss.stderr)

    // One byte changed in a recorded body: refused before the command runs (it would print "ran").
    const tampered = join(work, 'tampered.trace.json')
    writeFileSync(tampered, readFileSync(file, 'utf8').replace('hello from the api', 'hello from the apj'))
    const bad = await cli(['replay', '--store', absent, '--trace-file', tampered, '--', 'sh', '-c', 'echo ran'])
    assert.equal(bad.code, 65, bad.stderr)
    assert.match(bad.stderr, /TR_(TRACE_DIGEST_MISMATCH|TRACE_FILE_INVALID)/)
    assert.doesNotMatch(bad.stdout, /ran/)

    const recordAs = await cli(['replay', '--trace-file', file, '--record-as', 'x', '--', 'true'])
    assert.equal(recordAs.code, 64)
    assert.match(recordAs.stderr, /--record-as records into the store, which --trace-file never opens/)
    assert.equal(existsSync(absent), false)
  })

  test('several files and folders, as import takes them: --trace picks the trace, every file verified first', async () => {
    const work = tempDir('tr-replay-files-')
    const store = join(work, 'store')
    let hits = 0
    const api = http.createServer((req, res) => {
      hits++
      res.end(`answer to ${req.url}`)
    })
    await new Promise<void>((resolve) => api.listen(0, '127.0.0.1', resolve))
    const base = `http://127.0.0.1:${(api.address() as { port: number }).port}`
    const traces = join(work, 'traces')
    mkdirSync(join(traces, 'sub'), { recursive: true })
    for (const [name, out] of [
      ['greet', join(traces, 'greet.trace.json')],
      ['bye', join(traces, 'sub', 'bye.trace.json')],
    ] as const) {
      const rec = await cli(['record', '--store', store, '--trace', name, '--', 'curl', '-sS', `${base}/${name}`])
      assert.equal(rec.code, 0, rec.stderr)
      const exported = await cli(['export', name, '--store', store, '--out', out])
      assert.equal(exported.code, 0, exported.stderr)
    }
    await new Promise<void>((resolve) => api.close(() => resolve()))
    const recorded = hits
    const absent = join(work, 'no-store-here')

    // A folder (its sub-folders too): the trace --trace names is replayed.
    const fromFolder = await cli(['replay', '--store', absent, '--trace-file', traces, '--trace', 'bye', '--', 'curl', '-sS', `${base}/bye`])
    assert.equal(fromFolder.code, 0, fromFolder.stderr)
    assert.equal(fromFolder.stdout, 'answer to /bye')
    assert.match(fromFolder.stderr, /replay of trace "bye": 1 replayed/)
    // The flag repeated: one file each.
    const files = ['--trace-file', join(traces, 'greet.trace.json'), '--trace-file', join(traces, 'sub', 'bye.trace.json')]
    const fromFiles = await cli(['replay', '--store', absent, ...files, '--trace', 'greet', '--', 'curl', '-sS', `${base}/greet`])
    assert.equal(fromFiles.code, 0, fromFiles.stderr)
    assert.equal(fromFiles.stdout, 'answer to /greet')
    assert.equal(hits, recorded, 'a replay reached the upstream')

    // Several traces and none named by --trace (default "default"): refused, naming what the files hold.
    const unnamed = await cli(['replay', '--store', absent, '--trace-file', traces, '--', 'sh', '-c', 'echo ran'])
    assert.equal(unnamed.code, 64, unnamed.stderr)
    assert.match(unnamed.stderr, /none of the 2 trace files holds trace "default" \(they hold "greet", "bye"\)\. Name the one to replay with --trace NAME/)
    assert.doesNotMatch(unnamed.stdout, /ran/)

    // A damaged file beside the one replayed: nothing runs.
    writeFileSync(
      join(traces, 'sub', 'bye.trace.json'),
      readFileSync(join(traces, 'sub', 'bye.trace.json'), 'utf8').replace('answer to /bye', 'answer to /byf'),
    )
    const damaged = await cli(['replay', '--store', absent, '--trace-file', traces, '--trace', 'greet', '--', 'sh', '-c', 'echo ran'])
    assert.equal(damaged.code, 65, damaged.stderr)
    assert.doesNotMatch(damaged.stdout, /ran/)
    assert.equal(existsSync(absent), false, 'replay --trace-file created a store')
  })
})
