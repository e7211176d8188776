/**
 * Sealed runs (`--sealed`) with clients as a user runs them through the CLI: `curl --noproxy '*'` (ignores the proxy
 * variables) and Node's fetch through them (they stay set inside), each recorded, then strictly replayed with the
 * upstreams STOPPED and counting listeners on their ports that must see no connection; identical outputs. Go and
 * Python have files of their own (sealed-go, sealed-python), as do WebSocket, misses and bridges.
 */
import assert from 'node:assert/strict'
import { before, describe, test } from 'node:test'
import { cannotSeal, EXPECTED, recordThenReplay, sealedWork, URLS } from './support/sealed-harness.ts'

let work: Awaited<ReturnType<typeof sealedWork>>
let skip: string | undefined

before(async () => {
  skip = await cannotSeal()
  work = await sealedWork('tr-sealed-clients-')
})

// Node's fetch with NODE_USE_ENV_PROXY=1 (set by the proxy environment): it goes to the proxy port.
const NODE_FETCH = `
for (const u of process.argv.slice(1)) {
  const r = await fetch(u)
  process.stdout.write(r.status + ' ' + (await r.text()))
}
`

describe('sealed runs: curl ignoring the proxy variables, Node honouring them', { timeout: 300_000 }, () => {
  test("curl --noproxy '*' to an HTTPS and an HTTP URL", async (t) => {
    if (skip) return t.skip(skip)
    const { recorded, replayed } = await recordThenReplay(work.store, work.pki, 'curl', ['curl', '-sS', '--noproxy', '*', '-w', ' %{http_code}\\n', ...URLS])
    assert.equal(recorded, EXPECTED.map((e) => `${e.slice(4)} ${e.slice(0, 3)}\n`).join(''))
    assert.equal(replayed, recorded)
  })

  test('Node fetch through the proxy variables, as unsealed (the proxy port is reachable inside)', async (t) => {
    if (skip) return t.skip(skip)
    const { recorded, replayed } = await recordThenReplay(work.store, work.pki, 'node-fetch', [
      process.execPath,
      '--input-type=module',
      '-e',
      NODE_FETCH,
      ...URLS,
    ])
    assert.equal(recorded, EXPECTED.join(''))
    assert.equal(replayed, recorded)
  })
})
