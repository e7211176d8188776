import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { PlaybackChunk } from '../engine/index.ts'
import { ErrorCodes, parseJson, ToolReplayError } from '../trace/index.ts'
import { ERROR_HEADER, REFUSAL_STATUS, refusalPlayback, refusalResponse } from './refusal.ts'

const MISS = new ToolReplayError(
  ErrorCodes.REPLAY_MISS,
  'Failed to replay "POST https://api.openai.test/v1/chat/completions": no recorded exchange in trace "t" matches; closest recorded: "POST https://api.openai.test/v1/chat/completions" (differs: body $.messages[0].content: "a" → "b"). Re-record.',
)

const header = (pairs: ReadonlyArray<readonly [string, string]>, name: string) => pairs.find(([k]) => k === name)?.[1]

test('a refusal is a 403 that no SDK retries, marked as ours', () => {
  const r = refusalResponse(MISS)
  assert.equal(r.status, 403)
  assert.equal(REFUSAL_STATUS, 403)
  assert.equal(r.statusText, 'Tool Replay Refused')
  assert.equal(header(r.headers, 'x-should-retry'), 'false')
  assert.equal(header(r.headers, ERROR_HEADER), 'TR_REPLAY_MISS')
  assert.equal(header(r.headers, 'content-type'), 'application/json; charset=utf-8')
  assert.equal(header(r.headers, 'content-length'), String(r.body.byteLength))
})

test('the body parses as an OpenAI error and as an Anthropic error, both carrying the code and the closest candidate', () => {
  const text = new TextDecoder().decode(refusalResponse(MISS).body)
  const body = parseJson(text) as {
    type: string
    message: string
    error: { type: string; code: string; message: string; param: null; details: { error_code: string } }
  }
  const expected = `TR_REPLAY_MISS: ${MISS.message}`
  // OpenAI (and the AI SDK's OpenAI error schema): error.message, error.type, error.code.
  assert.equal(body.error.message, expected)
  assert.equal(body.error.code, 'TR_REPLAY_MISS')
  assert.equal(typeof body.error.type, 'string')
  // Anthropic: type "error", error.type/message, error.details.error_code; the top-level message is what its SDK prints.
  assert.equal(body.type, 'error')
  assert.equal(body.error.details.error_code, 'TR_REPLAY_MISS')
  assert.equal(body.message, expected)
  assert.ok(body.message.includes('closest recorded: "POST https://api.openai.test/v1/chat/completions" (differs: body $.messages[0].content: "a" → "b")'))
})

test('the playback form is the same response as one chunk without delay', () => {
  const p = refusalPlayback(new ToolReplayError(ErrorCodes.REPLAY_EXHAUSTED, 'over'))
  assert.equal(p.kind, 'response')
  if (p.kind !== 'response') return
  assert.equal(p.head.status, 403)
  assert.equal(header(p.head.headers, ERROR_HEADER), 'TR_REPLAY_EXHAUSTED')
  const chunks = p.chunks as PlaybackChunk[]
  assert.equal(chunks.length, 1)
  assert.equal(p.headersMs, 0)
  assert.equal(new TextDecoder().decode(chunks[0]?.bytes).includes('"TR_REPLAY_EXHAUSTED: over"'), true)
})
