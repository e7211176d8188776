/**
 * Real clients through the proxy to local HTTPS (and HTTP) upstreams with their own test CA: record,
 * then strict replay with (a) a counting upstream that must see zero connections and (b) the upstream
 * stopped. Each client must print identical bodies in all three runs.
 */
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { ProxyAgent, request } from 'undici'
import { createMemoryStore, type TraceStore } from '../store/index.ts'
import { bodyBytes, headerValue } from '../trace/index.ts'
import { clientEnv, run, startTestProxy, tempDir, writeBundle } from './support/proxy-harness.ts'
import { createTestPki, GZIP_TEXT, HELLO, JSON_BODY, STREAM_CHUNKS, startUpstream, type TestUpstream } from './support/proxy-upstream.ts'

const URLS = ['https://api.test/hello', 'https://api.test/json', 'https://api.test/gzip', 'https://api.test/stream', 'http://plain.test/hello']
const POST_URL = 'https://api.test/echo'
const POST_BODY = JSON.stringify({ q: 'ping' })
/** What every client must print: one line per response, "STATUS BODY". */
const EXPECTED = [`200 ${HELLO}`, `200 ${JSON_BODY}`, `200 ${GZIP_TEXT}`, `200 ${STREAM_CHUNKS.join('')}`, `200 ${HELLO}`, `200 ${POST_BODY}`]

type Client = (env: NodeJS.ProcessEnv, proxyUrl: string, bundle: string) => Promise<string[]>

let pki: Awaited<ReturnType<typeof createTestPki>>
const work = tempDir('tr-proxy-clients-')

before(async () => {
  pki = await createTestPki(['api.test'])
})

async function runScenario(t: { skip: (reason: string) => void }, name: string, client: Client): Promise<void> {
  const store: TraceStore = createMemoryStore()
  const storeDir = join(work, name)
  mkdirSync(storeDir, { recursive: true })
  let tlsUp: TestUpstream = await startUpstream(pki.certs['api.test'])
  let plainUp: TestUpstream = await startUpstream()
  const resolve = { 'api.test': { host: '127.0.0.1', port: tlsUp.port }, 'plain.test': { host: '127.0.0.1', port: plainUp.port } }
  const base = { store, storeDir, trace: name, upstreamCaPem: pki.caPem, resolve }
  try {
    const rec = await startTestProxy({ ...base, mode: 'record' })
    const bundle = writeBundle(storeDir, rec.ca.certPem)
    const recorded = await client(clientEnv(rec, bundle), rec.url, bundle)
    await rec.close()
    assert.deepEqual(recorded, EXPECTED, `${name}: output while recording`)
    const trace = await store.readTrace(name)
    assert.equal(trace.exchanges.length, EXPECTED.length)
    assert.equal(trace.meta.labels?.recordedWith, 'proxy')
    const gz = trace.exchanges.find((x) => x.request.url === 'https://api.test/gzip')
    assert.ok(gz && gz.outcome.kind === 'response')
    if (gz.outcome.kind === 'response') {
      assert.equal(headerValue(gz.outcome.response.headers, 'content-encoding'), 'gzip')
      const bytes = bodyBytes(trace, gz.outcome.response.body)
      assert.deepEqual([bytes[0], bytes[1]], [0x1f, 0x8b], 'compressed body stored as on the wire')
    }

    // (a) Strict replay with the upstreams up and counting: zero connections.
    const before = tlsUp.connections + plainUp.connections
    const rep = await startTestProxy({ ...base, mode: 'replay' })
    const replayed = await client(clientEnv(rep, bundle), rep.url, bundle)
    const summary = await rep.close()
    assert.deepEqual(replayed, recorded, `${name}: replay output`)
    assert.equal(tlsUp.connections + plainUp.connections, before, `${name}: replay opened an upstream connection`)
    assert.ok(summary.ok, `${name}: ${JSON.stringify(summary)}`)
    assert.equal(summary.replayed, EXPECTED.length)

    // (b) Upstreams stopped.
    await tlsUp.close()
    await plainUp.close()
    const rep2 = await startTestProxy({ ...base, mode: 'replay' })
    const replayed2 = await client(clientEnv(rep2, bundle), rep2.url, bundle)
    const summary2 = await rep2.close()
    assert.deepEqual(replayed2, recorded, `${name}: replay output with the upstream stopped`)
    assert.ok(summary2.ok)
  } finally {
    await tlsUp.close().catch(() => {})
    await plainUp.close().catch(() => {})
    tlsUp = plainUp = undefined as unknown as TestUpstream
  }
  void t
}

const NODE_CLIENT = `
const out = []
for (const u of JSON.parse(process.argv[1])) {
  const r = await fetch(u)
  out.push(r.status + ' ' + (await r.text()))
}
const r = await fetch(${JSON.stringify(POST_URL)}, { method: 'POST', headers: { 'content-type': 'application/json' }, body: ${JSON.stringify(POST_BODY)} })
out.push(r.status + ' ' + (await r.text()))
process.stdout.write(JSON.stringify(out))
`

const PYTHON_CLIENT = `
import json, sys, requests
out = []
for u in json.loads(sys.argv[1]):
    r = requests.get(u, timeout=30)
    out.append(str(r.status_code) + ' ' + r.text)
r = requests.post(${JSON.stringify(POST_URL)}, data=${JSON.stringify(POST_BODY)}, headers={'content-type': 'application/json'}, timeout=30)
out.append(str(r.status_code) + ' ' + r.text)
sys.stdout.write(json.dumps(out))
`

const GO_CLIENT = `package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
)

func main() {
	var urls []string
	if err := json.Unmarshal([]byte(os.Args[1]), &urls); err != nil {
		panic(err)
	}
	out := []string{}
	for _, u := range urls {
		r, err := http.Get(u)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		out = append(out, fmt.Sprintf("%d %s", r.StatusCode, b))
	}
	r, err := http.Post(${JSON.stringify(POST_URL)}, "application/json", strings.NewReader(${JSON.stringify(POST_BODY)}))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	b, _ := io.ReadAll(r.Body)
	out = append(out, fmt.Sprintf("%d %s", r.StatusCode, b))
	j, _ := json.Marshal(out)
	os.Stdout.Write(j)
}
`

async function parsed(p: Promise<{ code: number; stdout: string; stderr: string }>, who: string): Promise<string[]> {
  const r = await p
  assert.equal(r.code, 0, `${who} failed: ${r.stderr}`)
  return JSON.parse(r.stdout) as string[]
}

function has(cmd: string, args: string[]): string | undefined {
  try {
    execFileSync(cmd, args, { stdio: 'ignore' })
    return undefined
  } catch (err) {
    return `${cmd} ${args.join(' ')} failed: ${(err as Error).message.split('\n')[0]}`
  }
}

describe('proxy with real clients: record, then strict replay offline', { timeout: 180_000 }, () => {
  after(() => {})

  test('curl', async (t) => {
    await runScenario(t, 'curl', async (env) => {
      const out: string[] = []
      for (const u of URLS) {
        const r = await run('curl', ['-sS', '--compressed', '-w', '\n%{http_code}', u], env)
        assert.equal(r.code, 0, r.stderr)
        const i = r.stdout.lastIndexOf('\n')
        out.push(`${r.stdout.slice(i + 1)} ${r.stdout.slice(0, i)}`)
      }
      const r = await run('curl', ['-sS', '-w', '\n%{http_code}', '-H', 'content-type: application/json', '--data-binary', POST_BODY, POST_URL], env)
      assert.equal(r.code, 0, r.stderr)
      const i = r.stdout.lastIndexOf('\n')
      out.push(`${r.stdout.slice(i + 1)} ${r.stdout.slice(0, i)}`)
      return out
    })
  })

  test('Node built-in fetch with NODE_USE_ENV_PROXY=1', async (t) => {
    await runScenario(t, 'node-fetch', (env) =>
      parsed(run(process.execPath, ['--input-type=module', '-e', NODE_CLIENT, JSON.stringify(URLS)], env), 'node fetch'),
    )
  })

  test('undici ProxyAgent', async (t) => {
    await runScenario(t, 'undici-proxyagent', async (_env, proxyUrl, bundle) => {
      const { readFileSync } = await import('node:fs')
      const dispatcher = new ProxyAgent({ uri: proxyUrl, requestTls: { ca: readFileSync(bundle, 'utf8') } })
      try {
        const out: string[] = []
        for (const u of URLS) {
          // undici.request does not decompress; do it like a client would.
          const r = await request(u, { dispatcher, headers: { 'accept-encoding': 'gzip' } })
          let bytes = Buffer.from(await r.body.arrayBuffer())
          if (r.headers['content-encoding'] === 'gzip') bytes = (await import('node:zlib')).gunzipSync(bytes)
          out.push(`${r.statusCode} ${bytes.toString('utf8')}`)
        }
        const r = await request(POST_URL, { dispatcher, method: 'POST', headers: { 'content-type': 'application/json' }, body: POST_BODY })
        out.push(`${r.statusCode} ${await r.body.text()}`)
        return out
      } finally {
        await dispatcher.close()
      }
    })
  })

  test('Python requests', async (t) => {
    const missing = has('python3', ['-c', 'import requests'])
    if (missing) {
      // CI installs it (.ci/run): there a missing client is a failure, never a silent skip.
      if (process.env.CI) assert.fail(`Python requests is missing in CI: ${missing}`)
      t.skip(`Python requests is not installed (${missing}); apt-get install -y python3-requests`)
      return
    }
    await runScenario(t, 'python-requests', (env) => parsed(run('python3', ['-c', PYTHON_CLIENT, JSON.stringify(URLS)], env), 'python requests'))
  })

  test('Go net/http', async (t) => {
    const missing = has('go', ['version'])
    if (missing) {
      if (process.env.CI) assert.fail(`The Go toolchain is missing in CI: ${missing}`)
      t.skip(`No Go toolchain (${missing}); apt-get install -y golang-go`)
      return
    }
    const dir = join(work, 'go-client')
    mkdirSync(dir, { recursive: true })
    writeFileSync(join(dir, 'main.go'), GO_CLIENT)
    const goEnv = { ...process.env, GOCACHE: join(work, 'gocache'), GOPATH: join(work, 'gopath'), GOFLAGS: '', GO111MODULE: 'off' }
    const built = await run('go', ['build', '-o', join(dir, 'client'), join(dir, 'main.go')], goEnv, 120_000)
    assert.equal(built.code, 0, built.stderr)
    // Go never proxies loopback hosts, which is why the upstreams are named api.test and mapped with --resolve.
    await runScenario(t, 'go', (env) => parsed(run(join(dir, 'client'), [JSON.stringify(URLS)], env), 'go client'))
  })
})
