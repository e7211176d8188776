/**
 * Profiling aid for the hot paths: records the bench workload once, then replays it in a loop
 * (PROFILE=record: records it in a loop instead).
 *   node --conditions=tool-replay-source --cpu-prof --cpu-prof-dir=/tmp/prof bench/profile-replay.ts
 */

import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { fetch as undiciFetch } from 'undici'
import { openSession } from '../engine/index.ts'
import { createRecordReplayDispatcher } from '../interceptor/index.ts'
import { createMemoryStore } from '../store/index.ts'

const CALLS = Number(process.env.BENCH_CALLS ?? 2000)
const big = Buffer.alloc(256 * 1024, 'abcdefghijklmnopqrstuvwxyz0123456789')
const server = http.createServer((req, res) => {
  req.resume()
  req.on('end', () => res.end(req.url?.startsWith('/big') ? big : JSON.stringify({ url: req.url, pad: 'x'.repeat(1000) })))
})
await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
const paths = Array.from({ length: CALLS }, (_, i) =>
  i % 10 < 5 ? { p: `/small/${i}` } : i % 10 < 9 ? { p: `/echo/${i}`, body: JSON.stringify({ seq: i, pad: 'p'.repeat(980) }) } : { p: `/big/${i}` },
)
const run = async (dispatcher: import('undici').Dispatcher) => {
  const t0 = performance.now()
  for (const c of paths) {
    const res = await undiciFetch(
      `${url}${c.p}`,
      c.body ? { method: 'POST', body: c.body, headers: { 'content-type': 'application/json' }, dispatcher } : { dispatcher },
    )
    await res.arrayBuffer()
  }
  return performance.now() - t0
}
const store = createMemoryStore()
const rec = await openSession({ mode: 'record', trace: 'p', store })
console.log('record ms', (await run(createRecordReplayDispatcher({ session: rec }))).toFixed(0))
await rec.close()
const recordRounds = process.env.PROFILE === 'record' ? Number(process.env.ROUNDS ?? 4) : 0
for (let i = 0; i < recordRounds; i++) {
  const s = await openSession({ mode: 'record', trace: `r${i}`, store })
  console.log('record ms', (await run(createRecordReplayDispatcher({ session: s }))).toFixed(0))
  await s.close()
}
for (let i = 0; i < (recordRounds ? 0 : Number(process.env.ROUNDS ?? 4)); i++) {
  const s = await openSession({ mode: 'replay', trace: 'p', store })
  console.log('replay ms', (await run(createRecordReplayDispatcher({ session: s }))).toFixed(0))
  s.assertDone()
  await s.close()
}
server.close()
