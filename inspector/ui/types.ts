/** The API's shapes as the page reads them (see inspector/run-view.ts, exchange-view.ts, actions.ts). */

export interface OutputTail {
  text: string
  bytes: number
}
export interface AppRun {
  command: string[]
  cwd?: string
  exit?: { code: number; signal?: string; stdout: OutputTail; stderr: OutputTail }
}
export interface ToolCall {
  index: number
  id?: string
  name: string
  arguments: unknown
  argumentsText: string
  argumentsValid: boolean
}
export interface LlmView {
  api: string
  model?: string
  input: Array<{ role: string; text: string; toolCalls?: ToolCall[]; name?: string }>
  toolResults: Array<{ callId: string; name?: string; output: string }>
  outputText: string
  reasoning: string[]
  toolCalls: ToolCall[]
  refusal?: string
  finish?: string
  attempt?: number
  error?: string
  incomplete?: boolean
  stream: boolean
  usage?: Record<string, number>
}
export interface RunStats {
  modelTurns: number
  hosts: string[]
  errors: number
  patched: number
  faults: number
  faultKinds: string[]
  durationMs: number
  contractsOk?: boolean
}
export interface Run {
  name: string
  id: string
  status: 'complete' | 'recording' | 'partial'
  exchanges: number
  createdAt: string
  size: number
  lineage?: { sourceName?: string; sourceDigest: string; patches: Array<{ id: string; spec: string }> }
  labels?: Record<string, string>
  app?: AppRun
  recorded: boolean
  stats?: RunStats
}
export interface Row {
  seq: number
  method: string
  url: string
  status?: number
  error?: { code: string; phase: string; message: string }
  startMs: number
  headersMs: number
  bodyMs: number
  size: number
  origin?: string
  patchId?: string
  fault?: { rule: string; kind: string; phase: string; tag: string; upstream: string }
  attempt?: number
  llm?: LlmView
}
export interface BodyView {
  size: number
  digest: string
  chunks: Array<{ size: number; atMs: number }>
  contentType?: string
  encoding?: string
  kind: 'empty' | 'json' | 'sse' | 'text' | 'binary'
  text?: string
  truncated?: boolean
  events?: Array<{ event?: string; data: string; id?: string; chunk?: number; atMs?: number }>
  hex?: string
}
export interface ResponseView {
  status: number
  statusText: string
  headers: Array<[string, string]>
  trailers?: Array<[string, string]>
  body: BodyView
}
export interface ExchangeView {
  seq: number
  request: { method: string; url: string; headers: Array<[string, string]>; body?: BodyView }
  response?: ResponseView
  error?: { code: string; phase: string; message: string }
  timing: { startMs: number; headersMs: number }
  origin?: string
  patchId?: string
  fault?: {
    rule: string
    kind: string
    phase: string
    seed: string
    call: number
    key?: string
    upstream: { response?: ResponseView; error?: { code: string; phase: string; message: string } } | null
  }
  llm?: LlmView
  redacted: string[]
  curl: string
}
