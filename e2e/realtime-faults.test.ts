/**
 * Faults on a WebSocket session, on a real client: the openai SDK's `OpenAIRealtimeWS` recorded against the local
 * Realtime-shaped server (`tr-proxy record --sealed`), then forked with `fault=ws_close` (the server closes with a
 * code after the first text delta), `fault=ws_drop` (that delta never comes) and `fault=ws_delay` (it comes late),
 * each replayed strictly with the server STOPPED and a counting listener on its port. The app gets the close code
 * and reason, the missing delta, the wait; the runs pass with 0 connections, and `show` names the fault.
 */
import assert from 'node:assert/strict'
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { before, describe, test } from 'node:test'
import { REALTIME_APP, REALTIME_EXPECTED, startRealtimeServer } from './support/realtime-app.ts'
import { cannotSeal, cli, countingListener, sealedWork } from './support/sealed-harness.ts'

let work: Awaited<ReturnType<typeof sealedWork>>
let skip: string | undefined

before(async () => {
  skip = await cannotSeal()
  work = await sealedWork('tr-realtime-faults-')
})

const ENV = { OPENAI_API_KEY: 'sk-proj-realtimeFAULTkey0123456789abcdef' }

/** A shorter REALTIME_APP (one response, then it closes) that reports how the socket closed: code and reason. */
const CLOSE_APP = `
import OpenAI from 'openai'
import { OpenAIRealtimeWS } from 'openai/realtime/ws'
const client = new OpenAI({ apiKey: process.env.OPENAI_API_KEY, baseURL: 'https://api.test/v1' })
const rt = new OpenAIRealtimeWS({ model: 'gpt-realtime' }, client)
const out = []
const timer = setTimeout(() => { console.error('timed out: ' + out.join('|')); process.exit(4) }, 15000)
rt.on('error', (err) => out.push('error'))
rt.socket.on('close', (code, reason) => { clearTimeout(timer); out.push('close:' + code + ' ' + reason); process.stdout.write(out.join('\\n') + '\\n') })
rt.on('session.created', () => rt.send({ type: 'session.update', session: { type: 'realtime', instructions: 'Be brief.' } }))
rt.on('session.updated', () => {
  rt.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Weather in Paris?' }] } })
  rt.send({ type: 'response.create' })
})
rt.on('response.output_text.delta', (e) => out.push('delta:' + e.delta))
rt.on('response.done', () => rt.close())
`

describe('faults on a WebSocket session (OpenAIRealtimeWS, strict replay of forked faults)', { timeout: 300_000 }, () => {
  test('ws_close reaches the app as a close with its code, ws_drop as a missing event, ws_delay as a wait; 0 connections', async (t) => {
    if (skip) return t.skip(skip)
    const up = await startRealtimeServer(work.pki.certs['api.test'] as { cert: string; key: string })
    const port = up.port
    const command = (app: string) => [process.execPath, '--input-type=module', '-e', app]
    try {
      const rec = await cli(
        [
          'record',
          '--store',
          work.store,
          '-t',
          'rt',
          '--sealed',
          '--resolve',
          `api.test=127.0.0.1:${port}`,
          '--upstream-ca',
          work.pki.caPath,
          '--',
          ...command(REALTIME_APP),
        ],
        ENV,
      )
      assert.equal(rec.code, 0, rec.stderr)
      // CLOSE_APP's session.update differs from REALTIME_APP's (no tools): recorded as its own trace.
      const recClose = await cli(
        [
          'record',
          '--store',
          work.store,
          '-t',
          'rt-c',
          '--sealed',
          '--resolve',
          `api.test=127.0.0.1:${port}`,
          '--upstream-ca',
          work.pki.caPath,
          '--',
          ...command(CLOSE_APP),
        ],
        ENV,
      )
      assert.equal(recClose.code, 0, recClose.stderr)
      assert.match(recClose.stdout, /^delta:Let me check \ndelta:the weather\.\nclose:/)
    } finally {
      await up.close()
    }
    const counting = await countingListener(port)
    try {
      const first = await firstDelta('rt')
      const fork = async (source: string, to: string, patch: string) => {
        const r = await cli(['fork', source, '--to', to, '--store', work.store, '--patch', patch])
        assert.equal(r.code, 0, r.stderr)
      }
      const replay = (trace: string, app: string, ...extra: string[]) =>
        cli(['replay', '--store', work.store, '-t', trace, '--strict', '--sealed', ...extra, '--', ...command(app)], ENV)

      // ws_close: right after the first delta, the server closes with 4000; the client gets code and reason.
      await fork('rt-c', 'rt-close', `#0 fault=ws_close@${await firstDelta('rt-c')}:4000`)
      const closed = await replay('rt-close', CLOSE_APP)
      assert.equal(closed.code, 0, closed.stderr)
      assert.match(closed.stdout, /^delta:Let me check \nclose:4000 Tool Replay fault ws_close \(fork patch [0-9a-f]{12}\)\n$/)
      const show = await cli(['show', 'rt-close', '--view', 'http', '--store', work.store])
      assert.match(show.stdout, /\[fault ws_close, rule patch-[0-9a-f]{12}; upstream 101\]/)

      // ws_drop: the first delta never reaches the app; everything else does.
      await fork('rt', 'rt-drop', `#0 fault=ws_drop@${first}`)
      const dropped = await replay('rt-drop', REALTIME_APP)
      assert.equal(dropped.code, 0, dropped.stderr)
      assert.equal(dropped.stdout, `${REALTIME_EXPECTED.replace('delta:Let me check \n', '')}\n`)

      // ws_delay: with recorded pacing the first delta (and what follows) comes 1500 ms later, as the app measures
      // its wait for the first answer (whole-process times would measure the machine's load as well).
      await fork('rt', 'rt-delay', `#0 fault=ws_delay@${first}:1500`)
      const plain = await replay('rt', REALTIME_APP, '--pace', 'recorded')
      const delayed = await replay('rt-delay', REALTIME_APP, '--pace', 'recorded')
      assert.equal(plain.code, 0, plain.stderr)
      assert.equal(delayed.code, 0, delayed.stderr)
      assert.equal(delayed.stdout, `${REALTIME_EXPECTED}\n`)
      const waited = (r: { stderr: string }) => Number(/first delta after (\d+) ms/.exec(r.stderr)?.[1] ?? Number.NaN)
      assert.ok(waited(delayed) >= 1450, `the app waited ${waited(delayed)} ms for its first delta (delayed by 1500 ms)`)
      assert.ok(waited(delayed) - waited(plain) >= 1200, `the app waited ${waited(delayed)} ms delayed, ${waited(plain)} ms without the fault`)
      assert.equal(counting.connections, 0)
    } finally {
      await counting.close()
    }
  })
})

/** The position (from 1, among the server's text messages) of the session's first text delta, read from the exported trace. */
async function firstDelta(trace: string): Promise<number> {
  const file = join(work.work, `${trace}.trace.json`)
  const exported = await cli(['export', trace, '--store', work.store, '-o', file])
  assert.equal(exported.code, 0, exported.stderr)
  const doc = JSON.parse(await readFile(file, 'utf8')) as {
    exchanges: Array<{ websocket?: { messages: Array<{ from: string; opcode: string; body: { digest: string; text?: string } }> } }>
  }
  const texts = new Map<string, string>()
  const types = (doc.exchanges[0]?.websocket?.messages ?? [])
    .map((m) => {
      if (m.body.text !== undefined) texts.set(m.body.digest, m.body.text)
      return m.from === 'server' && m.opcode === 'text' ? (JSON.parse(texts.get(m.body.digest) ?? '{}') as { type?: string }).type : undefined
    })
    .filter((type) => type !== undefined)
  return types.indexOf('response.output_text.delta') + 1
}
