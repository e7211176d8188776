/**
 * MCP's stdio framing on the one line reader (trace/line-reader.ts): newline-delimited JSON-RPC, one message per
 * line, as the TypeScript SDK's `ReadBuffer` (shared/stdio.ts) reads it. What is MCP's here: the line limit is
 * the largest message (`maxBodyBytes`, as for an HTTP body), the wire's names in TR_LINE_TOO_LONG, and which
 * request a dropped line answered, read from its ends.
 */
import { DEFAULT_MAX_BODY_BYTES } from '../engine/index.ts'
import { LineReader, type LineWire, type LongLine, lineTooLong, type McpEvent, type ToolReplayError } from '../trace/index.ts'

/** The longest MCP message (one line, bytes): the default `maxBodyBytes`, 64 MiB (the SDK's own reader stops at 10 MiB). */
export const MAX_MCP_LINE_BYTES = DEFAULT_MAX_BODY_BYTES

const RAISE = 'Raise the limit with `tr-proxy mcp --max-body-bytes N` (maxBodyBytes for wrapMcpTransport), or have the server send less in one message.'

/** The two directions of an MCP stdio conversation, as TR_LINE_TOO_LONG names them. */
export const MCP_WIRES = {
  server: { name: "the MCP server's stdout", fix: RAISE },
  client: { name: "the MCP client's stdin (a message to the server)", fix: RAISE },
} as const satisfies Record<string, LineWire>

/** A line reader for MCP messages: lines up to `maxLineBytes`, longer ones reported to `onTooLong`. */
export function mcpLineReader(onLine: (line: string) => void, onTooLong: (line: LongLine) => void, maxLineBytes = MAX_MCP_LINE_BYTES): LineReader {
  return new LineReader(onLine, { maxLineBytes, onTooLong })
}

/** The JSON-RPC id whose number or string closes a value: `"id":7}` at the very end. */
const ID_AT_END = /"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")\s*\}\s*$/
/** ... or opens it: `{"jsonrpc":"2.0","id":7,`. */
const ID_AT_START = /^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")\s*,/
/** A request or notification names its method before its params (the SDK's order), where an answer has none. */
const METHOD_FIRST = /^\s*\{[^{}[\]]*"method"\s*:/

/**
 * The JSON-RPC id of a dropped line, read from its first and last bytes (the SDK writes `{"result":...,
 * "jsonrpc":"2.0","id":N}` and `{"method":...,"params":...,"jsonrpc":"2.0","id":N}`, others put the id first),
 * when the line is the kind asked for (an answer has no method; a request names it before its params);
 * undefined when neither end says. A caller uses it only for an id it knows.
 */
export function longLineId(line: LongLine, kind: 'answer' | 'request'): string | number | undefined {
  if (METHOD_FIRST.test(line.head) !== (kind === 'request')) return undefined
  const found = ID_AT_END.exec(line.tail) ?? ID_AT_START.exec(line.head)
  if (!found) return undefined
  try {
    const id = JSON.parse(found[1] as string) as unknown
    return typeof id === 'string' || typeof id === 'number' ? id : undefined
  } catch {
    return undefined
  }
}

/** The TR_LINE_TOO_LONG error of a `too-long` transcript event (the server's line, dropped). */
export function tooLongError(e: Extract<McpEvent, { kind: 'too-long' }>): ToolReplayError {
  return lineTooLong(MCP_WIRES.server, e, e.limit)
}
