/**
 * MCP over Streamable HTTP as MCP: the real SDK client (`StreamableHTTPClientTransport`) against a stateful server
 * on the real SDK (`StreamableHTTPServerTransport` with session ids, its standalone GET stream served), recorded
 * twice through install() into a LevelDB store. The two recordings differ only in the session id the server
 * minted (and the client echoed), which is ignored: `tr-proxy diff` finds nothing, raw or in LLM terms; `show
 * --view llm` reads the run as tool turns on a server named from its URL, the background GET stream included and
 * not a failure; strict replay with the server stopped gives the same answers and uses every recording.
 */
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { test } from 'node:test'
import { runCli } from '../cli/index.ts'
import { install } from '../interceptor/index.ts'
import { openStore } from '../store/index.ts'
import { diffTraces } from '../trace/index.ts'
import { tempDir } from './support/mcp-harness.ts'
import { startWeatherServer, umbrellaAgent } from './support/mcp-http-server.ts'

/** `tr-proxy --store DIR ...args` in process: exit code and output. */
async function cli(store: string, ...args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = ''
  let err = ''
  const code = await runCli(['--store', store, ...args], { out: (s) => (out += `${s}\n`), err: (s) => (err += `${s}\n`) })
  return { code, out, err }
}

test('MCP Streamable HTTP with sessions, recorded twice: diff empty (raw and LLM), read as tool turns, strict replay offline', async (t) => {
  const store = join(tempDir(t), 'store')
  let server = await startWeatherServer()
  t.after(() => server.close())
  const runs: Array<Awaited<ReturnType<typeof umbrellaAgent>>> = []
  for (const trace of ['first', 'second']) {
    const s = await openStore(store)
    const rec = await install({ mode: 'record', trace, store: s, config: false })
    runs.push(await umbrellaAgent(server.url).finally(() => rec.close()))
    await s.close()
  }
  assert.deepEqual(runs[0], { tools: ['forecast'], forecast: 'Oslo: rain, 9°C', advice: 'take an umbrella' })
  assert.deepEqual(runs[1], runs[0])

  const s = await openStore(store)
  const [a, b] = await Promise.all([s.readTrace('first'), s.readTrace('second')])
  await s.close()
  assert.ok(a && b)
  // They do differ byte for byte: each session has its own id, which the client echoes on every request.
  assert.match(JSON.stringify(diffTraces(a, b, { volatile: false }).differences), /mcp-session-id/)
  const methods = a.exchanges.map((x) => x.request.method)
  assert.ok(methods.includes('GET'), `the background GET stream was recorded: ${methods.join(' ')}`)

  const raw = await cli(store, 'diff', 'first', 'second', '--exit-code')
  assert.equal(raw.code, 0, raw.out + raw.err)
  const llm = await cli(store, 'diff', 'first', 'second', '--view', 'llm', '--exit-code')
  assert.equal(llm.code, 0, llm.out + llm.err)
  assert.match(llm.out, /no differences in LLM terms/)

  const shown = await cli(store, 'show', 'first', '--view', 'llm')
  assert.equal(shown.code, 0, shown.err)
  assert.match(shown.out, /mcp 127\.0\.0\.1 initialize → weather 1\.0\.0/)
  assert.match(shown.out, /mcp 127\.0\.0\.1 tools\/list → 1 tool: forecast/)
  assert.match(shown.out, /mcp 127\.0\.0\.1 tools\/call forecast \{"city":"Oslo"\} → "Oslo: rain, 9°C" \(1 notification\)/)
  assert.match(shown.out, /mcp 127\.0\.0\.1 server stream/, 'the background GET stream is an MCP turn')
  assert.doesNotMatch(shown.out, /127\.0\.0\.1:\d+/, 'the server is named from its URL, not its port')
  assert.doesNotMatch(shown.out, /UND_ERR_ABORTED/, 'the client closing its background stream is not a failure')

  // Strict replay, the server stopped: the same run, every recording used, no connection anywhere.
  const port = server.port
  const live = server.connections()
  await server.close()
  const s2 = await openStore(store)
  const rep = await install({ mode: 'replay', trace: 'first', store: s2, config: false })
  try {
    assert.deepEqual(await umbrellaAgent(`http://127.0.0.1:${port}/mcp`), runs[0])
    rep.assertDone()
  } finally {
    await rep.close()
    await s2.close()
  }
  // A server on the same port again, counting: strict replay reaches nothing.
  server = await startWeatherServer(port)
  {
    const s3 = await openStore(store)
    const again = await install({ mode: 'replay', trace: 'second', store: s3, config: false })
    try {
      assert.deepEqual(await umbrellaAgent(server.url), runs[0])
      again.assertDone()
    } finally {
      await again.close()
      await s3.close()
    }
    assert.equal(server.connections(), 0, 'strict replay made no connection')
  }
  assert.ok(live > 0)
})
