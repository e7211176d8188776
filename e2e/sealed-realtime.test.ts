/**
 * The openai SDK's own Realtime client (`OpenAIRealtimeWS`, on the `ws` package; it ignores HTTPS_PROXY) against a
 * local Realtime-shaped server: session.created/updated, text deltas, a function call, the app's tool result as
 * conversation.item.create, and the final response. Recorded with `tr-proxy record --sealed`, then replayed with
 * `tr-proxy replay --strict --sealed` with the server STOPPED and a counting listener on its port: the app prints
 * the same thing, the run exits 0, and no connection reaches the listener. The API key is stored redacted.
 */
import assert from 'node:assert/strict'
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { before, describe, test } from 'node:test'
import { REALTIME_APP as APP, REALTIME_EXPECTED as EXPECTED, startRealtimeServer } from './support/realtime-app.ts'
import { cannotSeal, cli, countingListener, sealedWork } from './support/sealed-harness.ts'

let work: Awaited<ReturnType<typeof sealedWork>>
let skip: string | undefined

before(async () => {
  skip = await cannotSeal()
  work = await sealedWork('tr-sealed-realtime-')
})

const API_KEY = 'sk-proj-realtimeTESTkey0123456789abcdef'

describe('sealed runs: the openai SDK Realtime client (OpenAIRealtimeWS) recorded and replayed', { timeout: 300_000 }, () => {
  test('record then strict replay with the server stopped: same output, exit 0, 0 connections, the key redacted', async (t) => {
    if (skip) return t.skip(skip)
    let up: Awaited<ReturnType<typeof startRealtimeServer>> | undefined = await startRealtimeServer(work.pki.certs['api.test'] as { cert: string; key: string })
    const port = up.port
    let counting: Awaited<ReturnType<typeof countingListener>> | undefined
    const env = { OPENAI_API_KEY: API_KEY }
    try {
      const command = [process.execPath, '--input-type=module', '-e', APP]
      const rec = await cli(
        [
          'record',
          '--store',
          work.store,
          '-t',
          'realtime',
          '--sealed',
          '--resolve',
          `api.test=127.0.0.1:${port}`,
          '--upstream-ca',
          work.pki.caPath,
          '--',
          ...command,
        ],
        env,
      )
      assert.equal(rec.code, 0, rec.stderr)
      assert.equal(rec.stdout, `${EXPECTED}\n`)
      assert.match(rec.stderr, /1 recorded/)
      assert.equal(up.connections, 1)
      await up.close()
      up = undefined
      counting = await countingListener(port)
      const rep = await cli(['replay', '--store', work.store, '-t', 'realtime', '--strict', '--sealed', '--', ...command], env)
      assert.equal(rep.code, 0, rep.stderr)
      assert.equal(rep.stdout, rec.stdout)
      assert.match(rep.stderr, /1 replayed/)
      assert.equal(counting.connections, 0)
      // The key went out as Authorization while recording; the exported trace holds it redacted, and every
      // message of the conversation in order.
      const file = join(work.work, 'realtime.trace.json')
      const exported = await cli(['export', 'realtime', '--store', work.store, '-o', file])
      assert.equal(exported.code, 0, exported.stderr)
      const text = await readFile(file, 'utf8')
      assert.ok(!text.includes(API_KEY), 'the trace holds the API key')
      assert.match(text, /"authorization",\s*"\[REDACTED\]"/i)
      const doc = JSON.parse(text) as {
        exchanges: Array<{ websocket?: { messages: Array<{ from: string; opcode: string; body: { digest: string; text?: string } }> } }>
      }
      // A repeated message (the second response.create) is a `ref` to the first one's bytes.
      const texts = new Map<string, string>()
      const types = (doc.exchanges[0]?.websocket?.messages ?? []).map((m) => {
        if (m.body.text !== undefined) texts.set(m.body.digest, m.body.text)
        return m.opcode === 'text' ? `${m.from} ${(JSON.parse(texts.get(m.body.digest) ?? '{}') as { type?: string }).type}` : `${m.from} ${m.opcode}`
      })
      const server = (type: string, n = 1) => Array<string>(n).fill(`server ${type}`)
      // The app sends item.create and response.create together, so where item.created falls between them varies.
      assert.deepEqual(types.slice(0, 3), ['server session.created', 'client session.update', 'server session.updated'])
      assert.deepEqual(types.slice(-2), ['client close', 'server close'])
      assert.deepEqual(
        [...types].sort(),
        [
          ...server('session.created'),
          'client session.update',
          ...server('session.updated'),
          'client conversation.item.create',
          ...server('conversation.item.created'),
          'client response.create',
          ...server('response.created'),
          ...server('response.output_text.delta', 2),
          ...server('response.function_call_arguments.delta', 2),
          ...server('response.function_call_arguments.done'),
          ...server('response.done'),
          'client conversation.item.create',
          'client response.create',
          ...server('conversation.item.created'),
          ...server('response.created'),
          ...server('response.output_text.delta', 5),
          ...server('response.output_text.done'),
          ...server('response.done'),
          'client close',
          'server close',
        ].sort(),
      )
    } finally {
      await up?.close()
      await counting?.close()
    }
  })
})
