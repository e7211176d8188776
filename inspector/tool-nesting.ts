/**
 * Which exchanges answer a model turn's tool calls, from what they say rather than from their order alone: an
 * exchange between a model turn that asked for tools and the next model turn sits under it only when it is
 * the tool (an MCP `tools/call` of that name), when it carries one of the call's arguments (an id in its URL
 * or body), or when the next turn sends its answer back as the call's result. Anything else in between (a
 * metrics beacon, a token refresh) stays where it is. Pure: reads what the run index holds.
 */

/** What nesting reads of an exchange. */
export interface NestingInput {
  seq: number
  /** A model turn: the tool calls it asked for, and the tool results its request sends back. */
  model?: { calls: Array<{ name: string; arguments: unknown }>; results: Array<{ name?: string | undefined; output: string }> }
  /** An MCP tools/call: the tool's name. */
  mcpTool?: string
  /** The request as text: method, URL (decoded) and the start of its body. */
  requestText: string
  /** The start of the response body as text. */
  responseText: string
}

/** An exchange that answers a tool call: the model turn that asked, and which tool. */
export interface ToolParent {
  parent: number
  call: string
}

/** Shortest argument value that counts as carried (shorter ones, "1" or "ok", appear anywhere). */
const MIN_VALUE = 3
/** Shortest answer text that counts as sent back. */
const MIN_ANSWER = 8
const ANSWER_PREFIX = 200

/** The parent of each exchange that answers a tool call, by seq. */
export function nestToolCalls(rows: readonly NestingInput[]): Map<number, ToolParent> {
  const out = new Map<number, ToolParent>()
  let turn: NestingInput | undefined
  let between: NestingInput[] = []
  const settle = (next: NestingInput | undefined) => {
    if (turn?.model && turn.model.calls.length > 0) for (const x of between) nestOne(turn, x, next, out)
    between = []
  }
  for (const r of rows) {
    if (r.model) {
      settle(r)
      turn = r
    } else between.push(r)
  }
  settle(undefined)
  return out
}

function nestOne(turn: NestingInput, x: NestingInput, next: NestingInput | undefined, out: Map<number, ToolParent>): void {
  const calls = turn.model?.calls ?? []
  const byName = x.mcpTool !== undefined ? calls.find((c) => c.name === x.mcpTool) : undefined
  if (byName) return void out.set(x.seq, { parent: turn.seq, call: byName.name })
  const carried = calls.find((c) => leaves(c.arguments).some((v) => x.requestText.includes(v)))
  if (carried) return void out.set(x.seq, { parent: turn.seq, call: carried.name })
  const answer = x.responseText.trim().slice(0, ANSWER_PREFIX)
  const result = answer.length >= MIN_ANSWER ? next?.model?.results.find((r) => r.output.includes(answer)) : undefined
  // Sent back as a result: it answers the call that result names (else the turn's first call).
  if (result) out.set(x.seq, { parent: turn.seq, call: calls.find((c) => c.name === result.name)?.name ?? calls[0]?.name ?? '' })
}

/** The argument values worth looking for: strings and numbers, at any depth. */
function leaves(v: unknown): string[] {
  if (typeof v === 'string') return v.length >= MIN_VALUE ? [v] : []
  if (typeof v === 'number') return String(v).length >= MIN_VALUE ? [String(v)] : []
  if (Array.isArray(v)) return v.flatMap(leaves)
  if (v !== null && typeof v === 'object') return Object.values(v).flatMap(leaves)
  return []
}
