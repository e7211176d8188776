/**
 * A long run for the inspector's timing: one model call in ten (each with a tool call), the rest JSON API
 * calls; every 1000th API call answered 503, and exchange #4321 carrying a word nothing else has. The browser
 * tests and bench/inspector.ts use the same run.
 */
import { bodyFromBytes, type Exchange, type Trace } from '../../trace/index.ts'

/** The word only exchange NEEDLE_SEQ's response holds. */
export const NEEDLE = 'needle-4321'
export const NEEDLE_SEQ = 4321

/** A run of `n` exchanges named `name`. */
export function bigTrace(n: number, name = 'big'): Trace {
  const enc = (s: string) => new TextEncoder().encode(s)
  const bodies = new Map<string, Uint8Array>()
  const body = (text: string) => {
    const b = bodyFromBytes(enc(text))
    bodies.set(b.ref.digest, b.bytes)
    return b.ref
  }
  const json: Array<[string, string]> = [['content-type', 'application/json']]
  const exchanges: Exchange[] = []
  for (let seq = 0; seq < n; seq++) {
    const model = seq % 10 === 0
    const failed = !model && seq % 1000 === 1
    const request = model
      ? JSON.stringify({
          model: 'gpt-4.1-mini',
          messages: [{ role: 'user', content: `step ${seq}: look the order up` }],
          tools: [{ type: 'function', function: { name: 'lookup' } }],
        })
      : JSON.stringify({ order: seq, note: 'x'.repeat(200) })
    const response = model
      ? JSON.stringify({
          object: 'chat.completion',
          model: 'gpt-4.1-mini-2025-04-14',
          choices: [
            {
              index: 0,
              finish_reason: 'tool_calls',
              message: { role: 'assistant', tool_calls: [{ id: `c${seq}`, type: 'function', function: { name: 'lookup', arguments: `{"order":${seq}}` } }] },
            },
          ],
          usage: { prompt_tokens: 50, completion_tokens: 10, total_tokens: 60 },
        })
      : failed
        ? JSON.stringify({ error: 'unavailable' })
        : JSON.stringify({
            order: seq,
            status: 'ok',
            items: Array.from({ length: 10 }, (_, i) => ({ sku: `sku-${i}`, qty: i })),
            ...(seq === NEEDLE_SEQ ? { note: NEEDLE } : {}),
          })
    exchanges.push({
      seq,
      request: {
        method: 'POST',
        url: model ? 'https://api.openai.test/v1/chat/completions' : `https://orders.test/v1/orders/${seq}`,
        headers: json,
        body: body(request),
      },
      outcome: {
        kind: 'response',
        response: { status: failed ? 503 : 200, statusText: failed ? 'Service Unavailable' : 'OK', headers: json, body: body(response), trailers: [] },
      },
      timing: { startMs: seq * 3, headersMs: 2 },
    })
  }
  return { meta: { name, format: 1 }, exchanges, bodies }
}
