/** One exchange in full: the LLM view beside the raw HTTP, bodies read for humans, the fault, copy as curl, and fork. */
import type { ComponentChildren } from 'preact'
import { useEffect, useState } from 'preact/hooks'
import { type ApiError, get, post, seg } from './api.ts'
import { bytes, go, ms } from './format.ts'
import { JsonTree, parseExact } from './json-tree.tsx'
import type { BodyView, ExchangeView, LlmView, McpView, ResponseView, Run } from './types.ts'
import { WebSocketPanel } from './websocket-panel.tsx'

/** The panel beside the timeline. */
export function ExchangePanel({ run, seq, q, onClose }: { run: Run; seq: number; q: string; onClose: () => void }) {
  const [x, setX] = useState<ExchangeView | undefined>()
  const [error, setError] = useState('')
  const [tab, setTab] = useState<'llm' | 'mcp' | 'messages' | 'request' | 'response' | 'fault' | 'fork'>('llm')
  useEffect(() => {
    get<{ exchange: ExchangeView }>(`/api/runs/${seg(run.name)}/exchanges/${seq}${q}`)
      .then((r) => {
        setX(r.exchange)
        if (!r.exchange.llm) setTab(r.exchange.mcp ? 'mcp' : r.exchange.websocket ? 'messages' : 'response')
      })
      .catch((e: Error) => setError(e.message))
  }, [seq])
  if (error) return <aside class="panel error">{error}</aside>
  if (!x) return <aside class="panel muted">Loading #{seq}…</aside>
  const tabs = [
    ...(x.llm ? (['llm'] as const) : []),
    ...(x.mcp ? (['mcp'] as const) : []),
    ...(x.websocket ? (['messages'] as const) : []),
    'request',
    'response',
    ...(x.fault ? (['fault'] as const) : []),
    'fork',
  ] as const
  const head = x.response ?? x.fault?.upstream?.response
  const lastChunk = head?.body.chunks.at(-1)?.atMs
  return (
    <aside class="panel" data-testid="exchange-panel">
      <div class="phead">
        <b>
          #{x.seq} {x.request.method} {x.request.url}
        </b>
        <button type="button" class="link" onClick={onClose} title="Esc">
          close
        </button>
      </div>
      <div class="facts">
        {x.request.httpVersion && <span data-testid="exchange-http-version">HTTP/{x.request.httpVersion}</span>}
        <span>started {ms(x.timing.startMs)}</span>
        <span>headers after {ms(x.timing.headersMs)}</span>
        {lastChunk !== undefined && lastChunk > x.timing.headersMs && <span data-testid="exchange-last-chunk">last chunk after {ms(lastChunk)}</span>}
        {x.websocket && x.websocket.messages.length > 0 && <span>last message after {ms((x.websocket.messages.at(-1) as { atMs: number }).atMs)}</span>}
        {x.origin && (
          <span class="badge patched">
            {x.origin} {x.patchId ?? ''}
          </span>
        )}
        {x.redacted.length > 0 && (
          <span class="badge redacted" title={x.redacted.join(', ')}>
            [REDACTED]: {x.redacted.join(', ')}
          </span>
        )}
        <button type="button" data-testid="copy-curl" onClick={() => void navigator.clipboard?.writeText(x.curl).catch(() => {})} title={x.curl}>
          Copy as curl
        </button>
      </div>
      <nav class="tabs">
        {tabs.map((t) => (
          <button type="button" key={t} class={tab === t ? 'on' : ''} onClick={() => setTab(t)} data-testid={`tab-${t}`}>
            {t === 'llm' ? 'model turn' : t === 'mcp' ? 'tool call (MCP)' : t}
          </button>
        ))}
      </nav>
      {tab === 'llm' && x.llm && <LlmPanel v={x.llm} />}
      {tab === 'mcp' && x.mcp && <McpPanel v={x.mcp} />}
      {tab === 'messages' && x.websocket && <WebSocketPanel v={x.websocket} />}
      {tab === 'request' && (
        <div>
          <Headers list={x.request.headers} />
          {x.request.body ? <Body body={x.request.body} /> : <p class="muted">No body.</p>}
          <pre class="curl" data-testid="curl">
            {x.curl}
          </pre>
        </div>
      )}
      {tab === 'response' && (
        <div>
          {x.error && (
            <p class="bad" data-testid="recorded-error">
              {x.error.code} during {x.error.phase}: {x.error.message}
            </p>
          )}
          {x.response ? <Response r={x.response} /> : <p class="muted">No response head arrived.</p>}
        </div>
      )}
      {tab === 'fault' && x.fault && (
        <div data-testid="fault">
          <p>
            fault <b>{x.fault.kind}</b> (rule {x.fault.rule}, {x.fault.phase}, call {x.fault.call}
            {x.fault.key !== undefined ? `, key ${x.fault.key}` : ''}, seed {x.fault.seed}): the app got the response tab.
          </p>
          <h4>What the upstream really did</h4>
          {x.fault.upstream === null ? (
            <p>Not forwarded: the request never left.</p>
          ) : (
            <>
              {x.fault.upstream.error && (
                <p class="bad">
                  {x.fault.upstream.error.code} during {x.fault.upstream.error.phase}
                </p>
              )}
              {x.fault.upstream.response && <Response r={x.fault.upstream.response} />}
            </>
          )}
        </div>
      )}
      {tab === 'fork' && <ForkForm run={run} x={x} />}
    </aside>
  )
}

function LlmPanel({ v }: { v: LlmView }) {
  return (
    <div class="llm" data-testid="llm-view">
      <div class="facts">
        <span>{v.api}</span>
        {v.model && <span>{v.model}</span>}
        {v.stream && <span>stream</span>}
        {v.finish && <span>finish {v.finish}</span>}
        {v.usage && <span>usage {JSON.stringify(v.usage)}</span>}
      </div>
      <h4>Input</h4>
      {v.input.map((m, i) => (
        <div key={i} class="msg">
          <b>{m.role}</b>
          {m.name ? ` (${m.name})` : ''}: {m.text}
          {m.toolCalls?.map((c) => (
            <div key={c.index} class="call">
              tool_call {c.name} <code>{c.argumentsText}</code>
            </div>
          ))}
        </div>
      ))}
      <h4>Answer</h4>
      {v.reasoning.map((r, i) => (
        <div key={i} class="reasoning">
          reasoning: {r}
        </div>
      ))}
      {v.outputText !== '' && (
        <div class="out" data-testid="llm-output">
          {v.outputText}
        </div>
      )}
      {v.refusal && <div class="bad">refusal: {v.refusal}</div>}
      {v.toolCalls.map((c) => (
        <div key={c.index} class="call" data-testid="llm-tool-call">
          tool_call[{c.index}] <b>{c.name}</b>
          {c.argumentsValid ? <JsonTree value={parseExact(c.argumentsText)?.value} /> : <code>{c.argumentsText} (not JSON)</code>}
        </div>
      ))}
      {v.error && <div class="bad">{v.error}</div>}
    </div>
  )
}

/** An MCP message in tool terms: the server, what was asked, what came back and what else the server did. */
function McpPanel({ v }: { v: McpView }) {
  return (
    <div class="mcp" data-testid="mcp-view">
      <div class="facts">
        <span>MCP {v.transport === 'stdio' ? 'over stdio' : 'over Streamable HTTP'}</span>
        <span>server {v.server}</span>
        <span>{v.kind}</span>
        <span>{v.method}</span>
      </div>
      {v.command && (
        <p>
          started <code>{v.command}</code>
        </p>
      )}
      {v.tool !== undefined && (
        <>
          <h4>
            tools/call <b data-testid="mcp-tool">{v.tool}</b>
          </h4>
          <JsonTree value={v.arguments ?? {}} />
        </>
      )}
      {v.uri !== undefined && <p>resource {v.uri}</p>}
      {v.prompt !== undefined && <p>prompt {v.prompt}</p>}
      <h4>Answer</h4>
      {!v.answered && <p class="muted">{v.failure ?? 'No answer in the transcript.'}</p>}
      {v.error && (
        <p class="bad">
          error {v.error.code ?? ''} {v.error.message}
        </p>
      )}
      {v.isError && <p class="bad">the tool reported an error (isError)</p>}
      {v.tools && <p>tools offered: {v.tools.join(', ')}</p>}
      {v.content?.map((c, i) => (
        <div key={i} class="out" data-testid="mcp-content">
          {c}
        </div>
      ))}
      {v.content === undefined && v.answered && v.result !== undefined && <JsonTree value={v.result} />}
      {(v.notifications.length > 0 || v.serverRequests.length > 0) && (
        <p class="muted">
          {v.notifications.length > 0 && `notifications: ${v.notifications.join(', ')}. `}
          {v.serverRequests.length > 0 && `the server asked: ${v.serverRequests.join(', ')}.`}
        </p>
      )}
      {v.stderr && <pre class="tail">{v.stderr}</pre>}
      {v.exit && <p class="muted">the server exited {v.exit.signal ? `by ${v.exit.signal}` : `with code ${v.exit.code}`}</p>}
    </div>
  )
}

function Headers({ list }: { list: Array<[string, string]> }) {
  return (
    <table class="headers">
      <tbody>
        {list.map(([k, v], i) => (
          <tr key={i}>
            <td>{k}</td>
            <td class={v.includes('[REDACTED]') ? 'redacted' : ''}>{v}</td>
          </tr>
        ))}
      </tbody>
    </table>
  )
}

function Response({ r }: { r: ResponseView }) {
  return (
    <div>
      <p>
        <b>
          {r.status} {r.statusText}
        </b>
      </p>
      <Headers list={r.headers} />
      <Body body={r.body} />
      {r.trailers && (
        <div data-testid="trailers">
          <h4>Trailers</h4>
          <Headers list={r.trailers} />
        </div>
      )}
    </div>
  )
}

function Body({ body }: { body: BodyView }) {
  const head = (
    <div class="muted small">
      {bytes(body.size)} · {body.chunks.length} chunk{body.chunks.length === 1 ? '' : 's'}
      {body.encoding ? ` · ${body.encoding}` : ''}
      {body.contentType ? ` · ${body.contentType}` : ''}
      {body.truncated ? ' · cut for display' : ''}
    </div>
  )
  if (body.kind === 'empty') return <div>{head}</div>
  if (body.kind === 'binary')
    return (
      <div>
        {head}
        <pre class="hex">{body.hex?.replace(/(..)/g, '$1 ')}</pre>
      </div>
    )
  if (body.kind === 'sse')
    return (
      <div>
        {head}
        <table class="events" data-testid="sse-events">
          <tbody>
            {body.events?.map((e, i) => (
              <tr key={i}>
                <td class="muted">{e.chunk !== undefined ? `chunk ${e.chunk}` : ''}</td>
                <td class="muted">{e.atMs !== undefined ? ms(e.atMs) : ''}</td>
                <td>{e.event ?? 'message'}</td>
                <td class="data">
                  <code>{e.data}</code>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    )
  if (body.grpc) return <GrpcMessages body={body} head={head} />
  const parsed = body.kind === 'json' && body.text !== undefined ? parseExact(body.text) : undefined
  return (
    <div>
      {head}
      {parsed ? (
        <div class="json" data-testid="json-tree">
          <JsonTree value={parsed.value} />
        </div>
      ) : (
        <pre class="text">{body.text}</pre>
      )}
    </div>
  )
}

/** A gRPC body as its length-prefixed messages, one row each: its size, whether it was compressed, and its value. */
function GrpcMessages({ body, head }: { body: BodyView; head: ComponentChildren }) {
  const messages = body.grpc ?? []
  return (
    <div>
      {head}
      <table class="events grpc" data-testid="grpc-messages">
        <tbody>
          {messages.map((m, i) => (
            <tr key={i} data-testid="grpc-message">
              <td class="muted">message #{i}</td>
              <td class="muted">
                {bytes(m.size)}
                {m.compressed ? ' · compressed' : ''}
              </td>
              <td class="muted">{m.kind}</td>
              <td class="data">{typeof m.value === 'string' ? <code>{m.value}</code> : <JsonTree value={m.value} />}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {messages.length === 0 && <p class="muted">No whole gRPC message in this body.</p>}
    </div>
  )
}

/** Edits one recorded answer and forks the run; the patch is written in the same language as `tr-proxy fork --patch`. */
function ForkForm({ run, x }: { run: Run; x: ExchangeView }) {
  const v = x.llm
  const [branch, setBranch] = useState(`${run.name}-fork`)
  const [output, setOutput] = useState(v?.outputText ?? '')
  const [args, setArgs] = useState<string[]>(v?.toolCalls.map((c) => c.argumentsText) ?? [])
  const [finish, setFinish] = useState(v?.finish ?? '')
  const [status, setStatus] = useState(String(x.response?.status ?? ''))
  const [path, setPath] = useState('')
  const [value, setValue] = useState('')
  const [errorCode, setErrorCode] = useState('')
  const [result, setResult] = useState<{ command: string } | undefined>()
  const [error, setError] = useState('')
  const specs: string[] = []
  if (v) {
    if (output !== v.outputText) specs.push(`#${x.seq} llm.output_text=${JSON.stringify(output)}`)
    v.toolCalls.forEach((c, i) => {
      if (args[i] !== undefined && args[i] !== c.argumentsText) specs.push(`#${x.seq} llm.tool_call[${i}].arguments=${args[i]}`)
    })
    if (finish !== (v.finish ?? '')) specs.push(`#${x.seq} llm.finish=${finish}`)
  } else {
    if (status !== String(x.response?.status ?? '')) specs.push(`#${x.seq} status=${status}`)
    if (path !== '') specs.push(`#${x.seq} ${path}=${value}`)
  }
  if (errorCode !== '') specs.push(`#${x.seq} error=${errorCode}`)
  const fork = (tail: 'strict' | 'live') => {
    setError('')
    post<{ command: string; branch: string }>('/api/fork', { source: run.name, to: branch, patches: specs })
      .then((r) => {
        setResult(r)
        go(`/run/${seg(r.branch)}?rerun=1${tail === 'live' ? '&tail=live' : ''}`)
      })
      .catch((e: ApiError) => setError(`${e.code}: ${e.message}`))
  }
  const next = run.stats?.modelTurnSeqs.find((s) => s > x.seq)
  return (
    <div class="fork" data-testid="fork-form">
      {v ? (
        <>
          <label>
            output text
            <textarea value={output} onInput={(e) => setOutput((e.target as HTMLTextAreaElement).value)} data-testid="fork-output" />
          </label>
          {v.toolCalls.map((c, i) => (
            <label key={c.index}>
              tool_call[{i}] {c.name} arguments (JSON)
              <textarea
                value={args[i]}
                onInput={(e) => setArgs(args.map((a, j) => (j === i ? (e.target as HTMLTextAreaElement).value : a)))}
                data-testid={`fork-args-${i}`}
              />
            </label>
          ))}
          <label>
            finish
            <input value={finish} onInput={(e) => setFinish((e.target as HTMLInputElement).value)} />
          </label>
        </>
      ) : (
        <>
          <label>
            status
            <input value={status} onInput={(e) => setStatus((e.target as HTMLInputElement).value)} data-testid="fork-status" />
          </label>
          <label>
            JSON field ($.path) and new value (JSON)
            <span class="row">
              <input placeholder="$.active" value={path} onInput={(e) => setPath((e.target as HTMLInputElement).value)} data-testid="fork-path" />
              <input placeholder="false" value={value} onInput={(e) => setValue((e.target as HTMLInputElement).value)} data-testid="fork-value" />
            </span>
          </label>
        </>
      )}
      <label>
        or make it fail with (ECONNRESET, ETIMEDOUT, ...)
        <input value={errorCode} onInput={(e) => setErrorCode((e.target as HTMLInputElement).value)} />
      </label>
      <label>
        branch name
        <input value={branch} onInput={(e) => setBranch((e.target as HTMLInputElement).value)} data-testid="fork-branch" />
      </label>
      <pre class="curl" data-testid="fork-specs">
        {specs.length > 0 ? specs.map((s) => `--patch '${s}'`).join('\n') : 'Change a field to fork.'}
      </pre>
      <ForkNeeds run={run} seq={x.seq} next={next} />
      <button type="button" disabled={specs.length === 0} onClick={() => fork('strict')} data-testid="fork-submit">
        Fork to {branch}, then rerun in strict replay
      </button>{' '}
      {next !== undefined && (
        <button type="button" disabled={specs.length === 0} onClick={() => fork('live')} data-testid="fork-submit-live">
          Fork, then rerun with a live tail
        </button>
      )}
      {result && <pre>{result.command}</pre>}
      {error && (
        <div class="error" data-testid="fork-error">
          {error}
        </div>
      )}
    </div>
  )
}

/**
 * What a fork at this point needs, said before forking: strict replay matches requests exactly, so a rerun
 * replays up to the first request the change alters, at the latest the next model turn (its request carries
 * the conversation so far); the two ways on from there.
 */
function ForkNeeds({ run, seq, next }: { run: Run; seq: number; next: number | undefined }) {
  if (!run.stats) return <p class="muted">Reading the run's model turns…</p>
  if (next === undefined)
    return (
      <div class="needs" data-testid="fork-needs" data-next="none">
        No model turn comes after #{seq}: a strict rerun against the fork replays offline, as long as the app's later requests stay as recorded.
      </div>
    )
  return (
    <div class="needs" data-testid="fork-needs" data-next={next}>
      <p>
        <b>A fork here will need more than this patch.</b> Strict replay matches requests exactly, and the model turn after this one, #{next}, sends the
        conversation so far: when the app sends your change on (a tool result it reads, an answer it keeps), a strict rerun stops at the first request it
        alters, #{next} at the latest, with a miss. Two ways on:
      </p>
      <ul>
        <li>
          <b>Fork the next model turn too</b>, offline: rerun strictly; the run keeps the request the app now sends at #{next}, and its page offers to answer it
          with the recorded answer, which you then fork.
        </li>
        <li>
          <b>Rerun with a live tail</b>: from the first request no recording matches, the real model and services answer (the app needs its network and keys),
          recorded in the run and marked <span class="badge verdict-live">LIVE</span>.
        </li>
      </ul>
    </div>
  )
}
