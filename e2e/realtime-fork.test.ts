/**
 * Fork by meaning on an OpenAI Realtime session, end to end: the openai SDK's `OpenAIRealtimeWS` recorded against
 * the local Realtime-shaped server (`tr-proxy record --sealed`), forked with `realtime.response[1].output_text` and
 * `realtime.response[0].tool_call[0].arguments`, then the fork replayed strictly with the server STOPPED and a
 * counting listener on its port: the app prints the forked text deltas and the forked arguments, exits 0, and no
 * connection reaches the listener. `diff --view llm` names the responses that changed; `drift` skips the session as a
 * WebSocket session (it does not re-send the upgrade alone) and connects to nothing. An app that stops early leaves
 * recorded client messages unsent: the strict replay fails, listing them as unused.
 */
import assert from 'node:assert/strict'
import { before, describe, test } from 'node:test'
import { REALTIME_APP as APP, REALTIME_EXPECTED as EXPECTED, startRealtimeServer } from './support/realtime-app.ts'
import { cannotSeal, cli, countingListener, sealedWork } from './support/sealed-harness.ts'

let work: Awaited<ReturnType<typeof sealedWork>>
let skip: string | undefined

before(async () => {
  skip = await cannotSeal()
  work = await sealedWork('tr-realtime-fork-')
})

const ENV = { OPENAI_API_KEY: 'sk-proj-realtimeFORKkey0123456789abcdef' }
const TEXT = 'It is 5°C and raining in Paris.'
// The app reads only `city` from the arguments, so its tool result (a recorded client message) still matches.
const ARGS = '{"city":"Paris","unit":"celsius"}'

describe('fork by meaning on an OpenAI Realtime session (OpenAIRealtimeWS)', { timeout: 300_000 }, () => {
  test('the forked text and arguments reach the app in strict replay with 0 connections; diff --view llm names the responses; drift skips the session; unsent client messages are unused', async (t) => {
    if (skip) return t.skip(skip)
    let up: Awaited<ReturnType<typeof startRealtimeServer>> | undefined = await startRealtimeServer(work.pki.certs['api.test'] as { cert: string; key: string })
    const port = up.port
    let counting: Awaited<ReturnType<typeof countingListener>> | undefined
    const command = [process.execPath, '--input-type=module', '-e', APP]
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
          ...command,
        ],
        ENV,
      )
      assert.equal(rec.code, 0, rec.stderr)
      assert.equal(rec.stdout, `${EXPECTED}\n`)
      await up.close()
      up = undefined

      const fork = await cli([
        'fork',
        'rt',
        '--to',
        'rt-fork',
        '--store',
        work.store,
        '--patch',
        `#0 realtime.response[1].output_text=${JSON.stringify(TEXT)}`,
        '--patch',
        `#0 realtime.response[0].tool_call[0].arguments=${ARGS}`,
      ])
      assert.equal(fork.code, 0, fork.stderr)

      counting = await countingListener(port)
      const rep = await cli(['replay', '--store', work.store, '-t', 'rt-fork', '--strict', '--sealed', '--', ...command], ENV)
      assert.equal(rep.code, 0, rep.stderr)
      assert.match(rep.stderr, /1 replayed/)
      assert.equal(counting.connections, 0)
      const out = rep.stdout.trim().split('\n')
      assert.deepEqual(out.slice(0, 4), ['delta:Let me check ', 'delta:the weather.', `call:get_weather ${ARGS}`, 'done:completed'])
      // The forked answer arrives in as many deltas as the recorded one (re-split in its proportions).
      const answer = out.slice(4, -1)
      assert.equal(answer.length, 5)
      assert.equal(answer.map((l) => l.replace(/^delta:/, '')).join(''), TEXT)
      assert.equal(out.at(-1), 'done:completed')

      // drift does not re-send the session's upgrade alone, even with model calls and unsafe methods allowed: it is
      // skipped as a WebSocket session, and nothing connects.
      const drift = await cli(['drift', 'rt', '--model-calls', '--unsafe', '--store', work.store])
      assert.match(
        drift.stdout,
        /\n {2}skip {2}GET https:\/\/api\.test\/v1\/realtime\?model=gpt-realtime #0: websocket: a WebSocket session \(\d+ message\(s\)\) is not re-opened live/,
      )
      assert.equal(drift.code, 0, drift.stdout + drift.stderr)
      assert.equal(counting.connections, 0)

      const diff = await cli(['diff', 'rt', 'rt-fork', '--view', 'llm', '--exit-code', '--store', work.store])
      assert.equal(diff.code, 1, diff.stdout)
      assert.match(diff.stdout, /\nfirst divergence: #0 model response\[0\] tool_call\[0\]\.arguments \$\.unit: \(absent\) → "celsius"/)
      assert.match(diff.stdout, /\n {2}response\[1\] output text: "It is 21°C and sunny in Paris\." → "It is 5°C and raining in Paris\."\n/)
      assert.match(diff.stdout, /from patch [0-9a-f]{12} \(#0 realtime\.response\[0\]\.tool_call\[0\]\.arguments=\{"city":"Paris","unit":"celsius"\}\)/)

      // The app stops after the tool call: the recorded tool result and the second response.create never come. The
      // replay fails as it does for unused exchanges, naming each client message.
      const stops = APP.replace(
        /\n\s*rt\.send\(\{ type: 'conversation\.item\.create', item: \{ type: 'function_call_output'.*\n\s*rt\.send\(\{ type: 'response\.create' \}\)/,
        '',
      ).replace('++done === 2', '++done === 1')
      assert.notEqual(stops, APP)
      const short = await cli(
        ['replay', '--store', work.store, '-t', 'rt', '--strict', '--sealed', '--', process.execPath, '--input-type=module', '-e', stops],
        ENV,
      )
      assert.notEqual(short.code, 0, short.stderr)
      assert.match(short.stderr, /1 replayed, .*2 unused/)
      assert.match(short.stderr, /GET https:\/\/api\.test\/v1\/realtime\?model=gpt-realtime client message #4: never sent: .*type "conversation\.item\.create"/)
      assert.match(short.stderr, /client message #5: never sent: .*type "response\.create"/)
      assert.equal(counting.connections, 0)
    } finally {
      await up?.close()
      await counting?.close()
    }
  })
})
