import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { PlaybackChunk } from '../engine/index.ts'
import { ErrorCodes, headerValue, parseJson, ToolReplayError } from '../trace/index.ts'
import { ERROR_HEADER, GRPC_REFUSAL_STATUS, grpcMessage, REFUSAL_STATUS, refusalPlayback, refusalResponse } from './refusal.ts'

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

const missFor = (url: string) =>
  new ToolReplayError(ErrorCodes.REPLAY_MISS, `Failed to replay "POST ${url}": no recorded exchange matches.`, {
    details: { request: { method: 'POST', url } },
  })
const bodyOf = (r: ReturnType<typeof refusalResponse>) => parseJson(new TextDecoder().decode(r.body)) as Record<string, unknown>

test('each API gets the error shape its clients read: Google, AWS, Ollama; the same 403, no-retry and marker headers', () => {
  const google = refusalResponse(missFor('https://generativelanguage.googleapis.com/v1beta/models/gemini-2.0-flash:generateContent'))
  const g = bodyOf(google).error as { code: number; message: string; status: string }
  assert.deepEqual([g.code, g.status], [403, 'PERMISSION_DENIED'])
  assert.match(g.message, /^TR_REPLAY_MISS: Failed to replay "POST https:\/\/generativelanguage/)

  const aws = refusalResponse(missFor('https://bedrock-runtime.us-east-1.amazonaws.com/model/anthropic.claude-3-5-sonnet-20241022-v2%3A0/converse'))
  assert.equal(header(aws.headers, 'x-amzn-errortype'), 'ToolReplayRefusedException')
  assert.deepEqual(Object.keys(bodyOf(aws)).sort(), ['__type', 'message'])
  assert.match(String(bodyOf(aws).message), /^TR_REPLAY_MISS: /)
  // A Bedrock path on another host (a gateway, a local fake) is still Bedrock.
  assert.equal(header(refusalResponse(missFor('https://llm-gateway.test/model/m/converse-stream')).headers, 'x-amzn-errortype'), 'ToolReplayRefusedException')

  // The ollama client shows `error` as the message: it must be the text, not an object.
  const ollama = bodyOf(refusalResponse(missFor('http://127.0.0.1:11434/api/chat')))
  assert.equal(typeof ollama.error, 'string')
  assert.match(String(ollama.error), /^TR_REPLAY_MISS: Failed to replay "POST http:\/\/127\.0\.0\.1:11434\/api\/chat"/)

  // Exhausted recordings name the request as "METHOD url"; errors without one get the OpenAI + Anthropic shape.
  const exhausted = new ToolReplayError(ErrorCodes.REPLAY_EXHAUSTED, 'over', { details: { request: 'POST http://localhost:11434/api/generate' } })
  assert.equal(typeof bodyOf(refusalResponse(exhausted)).error, 'string')
  assert.equal(bodyOf(refusalResponse(new ToolReplayError(ErrorCodes.STORE_CLOSED, 'closed'))).type, 'error')
  for (const r of [google, aws]) {
    assert.equal(r.status, 403)
    assert.equal(header(r.headers, 'x-should-retry'), 'false')
    assert.equal(header(r.headers, ERROR_HEADER), 'TR_REPLAY_MISS')
    assert.equal(header(r.headers, 'content-length'), String(r.body.byteLength))
  }
})

test('a refused gRPC call is a Trailers-Only answer with PERMISSION_DENIED and the message percent-encoded', () => {
  const error = new ToolReplayError(ErrorCodes.REPLAY_MISS, 'Failed to replay "POST https://g.test/a.B/C": 100% — nothing matches.')
  const p = refusalPlayback(error, [['content-type', 'application/grpc+proto']])
  assert.equal(p.kind, 'response')
  if (p.kind !== 'response') return
  assert.equal(p.head.status, 200)
  assert.deepEqual(p.chunks, [], 'no body: the status is in the head')
  assert.equal(headerValue(p.head.headers, 'grpc-status'), String(GRPC_REFUSAL_STATUS))
  assert.equal(headerValue(p.head.headers, 'grpc-message'), 'TR_REPLAY_MISS: Failed to replay "POST https://g.test/a.B/C": 100%25 %E2%80%94 nothing matches.')
  assert.equal(headerValue(p.head.headers, ERROR_HEADER), 'TR_REPLAY_MISS')
  assert.equal(refusalPlayback(error, [['content-type', 'application/grpc-web']]).head?.status, 403, 'gRPC-Web is read as HTTP')
  assert.equal(grpcMessage('a%b'), 'a%25b')
})
