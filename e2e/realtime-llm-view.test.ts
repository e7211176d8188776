/**
 * OpenAI Realtime read as model turns where users look: the openai SDK's `OpenAIRealtimeWS` against the local
 * Realtime-shaped server, recorded with `tr-proxy record --sealed` three times (twice the same conversation, once
 * with a changed final answer). `show` lists the session's responses as turns, `show --exchange 0` prints them in
 * full, `diff` of the two same conversations is empty in LLM terms (fresh event ids, item.created landing
 * elsewhere), and `diff` against the changed one names the response whose answer changed. The inspector's
 * timeline (a real browser) shows the session as one model row listing its responses.
 */
import assert from 'node:assert/strict'
import { before, describe, test } from 'node:test'
import { browserMissing, launchBrowser, visibleText } from './support/browser.ts'
import { startInspectCli } from './support/inspector-harness.ts'
import { REALTIME_APP, startRealtimeServer } from './support/realtime-app.ts'
import { cannotSeal, cli, sealedWork } from './support/sealed-harness.ts'

let work: Awaited<ReturnType<typeof sealedWork>>
let skip: string | undefined

before(async () => {
  skip = await cannotSeal()
  work = await sealedWork('tr-realtime-view-')
})

const ENV = { OPENAI_API_KEY: 'sk-proj-realtimeVIEWkey0123456789abcdef' }
const CHANGED = 'It is 5°C and raining in Paris.'

/** Records the app's conversation as `name` against a server whose final answer is `answer`. */
async function record(name: string, answer?: string): Promise<void> {
  const up = await startRealtimeServer(work.pki.certs['api.test'] as { cert: string; key: string }, answer)
  try {
    const run = await cli(
      [
        'record',
        '--store',
        work.store,
        '-t',
        name,
        '--sealed',
        '--resolve',
        `api.test=127.0.0.1:${up.port}`,
        '--upstream-ca',
        work.pki.caPath,
        '--',
        process.execPath,
        '--input-type=module',
        '-e',
        REALTIME_APP,
      ],
      ENV,
    )
    assert.equal(run.code, 0, run.stderr)
    assert.match(run.stderr, /1 recorded/)
  } finally {
    await up.close()
  }
}

describe('OpenAI Realtime sessions in show and diff --view llm', { timeout: 300_000 }, () => {
  test('show lists the responses as turns; diff is empty for the same conversation and names the response whose answer changed', async (t) => {
    if (skip) return t.skip(skip)
    await record('rt-a')
    await record('rt-same')
    await record('rt-changed', CHANGED)

    const show = await cli(['show', 'rt-a', '--store', work.store])
    assert.equal(show.code, 0, show.stderr)
    const lines = show.stdout.split('\n')
    assert.equal(lines[0], 'trace "rt-a": 1 exchange, 2 model turns')
    assert.equal(lines[1], '#0 realtime gpt-realtime (tools get_weather; instructions "Be brief."): 2 responses')
    assert.equal(lines[2], '   response[0] ← user "Weather in Paris?" → "Let me check the weather." + tool_call get_weather {"city":"Paris"}')
    assert.equal(
      lines[3],
      '   response[1] ← tool_result get_weather "{\\"city\\":\\"Paris\\",\\"celsius\\":21,\\"sky\\":\\"sun…" → "It is 21°C and sunny in Paris."',
    )

    const one = await cli(['show', 'rt-a', '--exchange', '0', '--store', work.store])
    assert.equal(one.code, 0, one.stderr)
    assert.match(
      one.stdout,
      /^#0 realtime session \(OpenAI Realtime, \d+ server events, 2 responses\)\nGET https:\/\/api\.test\/v1\/realtime\?model=gpt-realtime → 101\n/,
    )
    assert.match(
      one.stdout,
      /\nresponse\[0\] \(\d+ events\):\n {2}input: user: "Weather in Paris\?"\n {2}text: Let me check the weather\.\n {2}tool_call\[0\] get_weather \{"city":"Paris"\} \(id call_weather_1\)\n {2}finish: completed\n/,
    )

    // The inspector and scripts read the JSON: each response is there, in model terms.
    const json = await cli(['show', 'rt-a', '--json', '--store', work.store])
    const doc = JSON.parse(json.stdout) as { view: string; turns: Array<{ kind: string; llm?: { api: string; responses?: Array<{ outputText: string }> } }> }
    assert.equal(doc.view, 'llm')
    assert.equal(doc.turns[0]?.llm?.api, 'openai.realtime')
    assert.deepEqual(
      doc.turns[0]?.llm?.responses?.map((r) => r.outputText),
      ['Let me check the weather.', 'It is 21°C and sunny in Paris.'],
    )

    const same = await cli(['diff', 'rt-a', 'rt-same', '--exit-code', '--store', work.store])
    assert.equal(same.code, 0, same.stdout)
    assert.match(same.stdout, /^diff a "rt-a" \(1 exchange, 2 model turns\) → b "rt-same" \(1 exchange, 2 model turns\)\nno differences in LLM terms/)

    const changed = await cli(['diff', 'rt-a', 'rt-changed', '--exit-code', '--store', work.store])
    assert.equal(changed.code, 1, changed.stdout)
    assert.match(
      changed.stdout,
      /\nfirst divergence: #0 model response\[1\] output text: "It is 21°C and sunny in Paris\." → "It is 5°C and raining in Paris\."\n/,
    )
    // Only what changed: the first response, the tool call and the session are the same.
    assert.doesNotMatch(changed.stdout, /response\[0\]|tool_call|instructions/)

    // The inspector's timeline: one model row, each response with what the client sent before it.
    const noBrowser = browserMissing()
    if (noBrowser) return t.diagnostic(`inspector part skipped: ${noBrowser}`)
    const inspector = await startInspectCli(work.store, work.work)
    const browser = await launchBrowser()
    try {
      const page = await browser.context.newPage()
      const errors: string[] = []
      page.on('pageerror', (e) => errors.push(String(e)))
      await page.goto(`${inspector.url}#/run/rt-a`)
      const row = page.locator('[data-testid="timeline-row"][data-seq="0"]')
      await row.getByTestId('realtime-session').waitFor({ timeout: 30_000 })
      assert.equal(await row.getAttribute('data-kind'), 'model')
      const text = await visibleText(row)
      assert.match(text, /realtime gpt-realtime/)
      assert.match(text, /response\[0\] ← user: Weather in Paris\? → Let me check the weather\. → tool_call get_weather \{"city":"Paris"\}/)
      assert.match(text, /response\[1\] ← tool_result get_weather \{"city":"Paris","celsius":21,"sky":"sunny"\} → It is 21°C and sunny in Paris\./)
      assert.deepEqual(errors, [])
    } finally {
      await browser.close()
      await inspector.stop()
    }
  })
})
