/**
 * How a timeline row reads, one renderer per protocol: a model turn (the LLM view), a tool turn (an MCP message
 * over stdio or HTTP), a gRPC call (over HTTP/2: its messages and status), a WebSocket session (its messages
 * each way and how it ended), an HTTP exchange. A protocol added later is one more entry here, keyed by the
 * row's `kind` the server gives it.
 */
import type { ComponentChildren } from 'preact'
import { clip, shortUrl } from './format.ts'
import type { LlmView, Row, WebSocketSessionRow } from './types.ts'

/** What a protocol shows of a row: its label in the row's first line, and what it says under it. */
export interface RowRenderer {
  label(row: Row): ComponentChildren
  body?(row: Row): ComponentChildren
}

const FINISHES_OK = ['stop', 'tool_calls', 'end_turn', 'tool_use', 'completed']

/** A Realtime session: each response with what the client added before it, as the CLI's timeline lists them. */
function realtimeBody(responses: LlmView[]): ComponentChildren {
  return (
    <div class="turn" data-testid="realtime-session">
      {responses.map((r, i) => (
        <div key={i} class="response">
          <div class="in">
            response[{i}]
            {r.input.map((m) =>
              m.role === 'tool' ? ` ← tool_result ${m.name ?? m.toolCallId ?? ''} ${clip(m.text, 120)}` : ` ← ${m.role}: ${clip(m.text, 120)}`,
            )}
          </div>
          {r.outputText !== '' && <div class="out">→ {clip(r.outputText, 240)}</div>}
          {r.toolCalls.map((c) => (
            <div key={c.index} class="call" data-testid="tool-call">
              → tool_call <b>{c.name}</b> <code>{clip(c.argumentsText, 200)}</code>
            </div>
          ))}
          {r.finish && !FINISHES_OK.includes(r.finish) && <div class="bad">finish {r.finish}</div>}
          {r.incomplete && <div class="bad">no response.done</div>}
          {r.error && <div class="bad">{r.error}</div>}
        </div>
      ))}
    </div>
  )
}

const model: RowRenderer = {
  label: (row) => (
    <span class="kind">
      {row.llm?.responses ? 'realtime' : 'model'} {row.llm?.model ?? ''}
    </span>
  ),
  body: (row) => {
    const v = row.llm
    if (!v) return null
    if (v.responses) return realtimeBody(v.responses)
    const last = v.input.filter((m) => m.role !== 'system').at(-1)
    return (
      <div class="turn">
        {v.toolResults.length > 0
          ? v.toolResults.map((r) => (
              <div key={r.callId} class="in">
                ← tool_result <b>{r.name ?? r.callId}</b> {clip(r.output, 160)}
              </div>
            ))
          : last && (
              <div class="in">
                ← {last.role}: {clip(last.text, 160)}
              </div>
            )}
        {v.reasoning.length > 0 && <div class="reasoning">reasoning: {clip(v.reasoning.join(' '), 200)}</div>}
        {v.outputText !== '' && <div class="out">→ {clip(v.outputText, 240)}</div>}
        {v.toolCalls.map((c) => (
          <div key={c.index} class="call" data-testid="tool-call">
            → tool_call <b>{c.name}</b> <code>{clip(c.argumentsText, 200)}</code>
          </div>
        ))}
        {v.finish && !FINISHES_OK.includes(v.finish) && <div class="bad">finish {v.finish}</div>}
        {v.error && <div class="bad">{v.error}</div>}
      </div>
    )
  },
}

const tool: RowRenderer = {
  label: (row) => (
    <span class="kind" title={row.mcp?.transport === 'stdio' ? 'MCP over stdio' : 'MCP over Streamable HTTP'}>
      tool {row.mcp?.server ?? ''}
    </span>
  ),
  body: (row) => {
    const m = row.mcp
    if (!m) return null
    return (
      <div class="turn" data-testid="tool-turn">
        <div class="call">
          → <b>{m.ask}</b>
        </div>
        {m.outcome !== '' && <div class={m.isError ? 'bad' : 'out'}>← {m.outcome}</div>}
        {m.notes.length > 0 && <div class="muted small">{m.notes.join(' · ')}</div>}
      </div>
    )
  },
}

const plural = (n: number, one: string) => `${n} ${one}${n === 1 ? '' : 's'}`

const grpc: RowRenderer = {
  label: (row) => (
    <>
      <span class="kind" title="gRPC over HTTP/2">
        gRPC
      </span>
      <span class="url" title={row.url}>
        {row.grpc ? `${row.grpc.service}/${row.grpc.method}` : shortUrl(row.url)}
      </span>
    </>
  ),
  body: (row) => {
    const g = row.grpc
    if (!g) return null
    const failed = g.status !== undefined && g.status !== 0
    return (
      <div class="turn" data-testid="grpc-call">
        <span class="call">→ {plural(g.requestMessages, 'message')}</span>{' '}
        <span class={failed ? 'bad' : 'out'}>
          ← {plural(g.responseMessages, 'message')} · {g.statusName ?? 'no grpc-status'}
          {g.message !== undefined && failed ? `: ${clip(g.message, 160)}` : ''}
        </span>
      </div>
    )
  },
}

/** How a WebSocket session ended, in a phrase: its close (who, code, reason) or the failure that cut it. */
function wsEnding(w: WebSocketSessionRow): string {
  if (w.closed) return `closed ${w.closed.code ?? ''} by the ${w.closed.by}${w.closed.reason ? `: ${clip(w.closed.reason, 80)}` : ''}`
  return w.end ? `ended ${w.end.code}` : 'open when the recording ended'
}

const websocket: RowRenderer = {
  label: (row) => (
    <>
      <span class="kind" title="WebSocket session">
        WS
      </span>
      <span class="url" title={row.url}>
        {shortUrl(row.url)}
      </span>
    </>
  ),
  body: (row) => {
    const w = row.websocket
    if (!w) return null
    return (
      <div class="turn" data-testid="websocket-session">
        <span class="call">→ {plural(w.client, 'message')}</span> <span class="out">← {plural(w.server, 'message')}</span>{' '}
        <span class={w.end || (w.closed && w.closed.code !== 1000) ? 'bad' : 'muted'}>· {wsEnding(w)}</span>
      </div>
    )
  },
}

const http: RowRenderer = {
  label: (row) => (
    <>
      <span class="kind">{row.method}</span>
      {row.httpVersion && (
        <span class="badge" title="sent over HTTP/2" data-testid="http-version">
          HTTP/2
        </span>
      )}
      <span class="url">{shortUrl(row.url)}</span>
    </>
  ),
}

/** The renderer of each kind of row. */
export const RENDERERS: Record<Row['kind'], RowRenderer> = { model, tool, grpc, websocket, http }
