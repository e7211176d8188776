import { type ErrorCode, ErrorCodes, ToolReplayError } from '../trace/index.ts'

/** TR_TRACE_EXISTS: storing a trace under a name taken, without overwrite. */
export function traceExists(name: string, location: string): ToolReplayError {
  return new ToolReplayError(
    ErrorCodes.TRACE_EXISTS,
    `Trace "${name}" already exists in the store at ${location}. Pick another name, delete it first (\`tr-proxy rm\`), or replace it (\`--force\` on the command line, \`overwrite: true\` in the library).`,
    { details: { trace: name, location } },
  )
}

/** TR_TRACE_NOT_FOUND naming the traces that do exist, so a typo is easy to see. */
export function traceNotFound(name: string, existing: string[], location: string): ToolReplayError {
  const list =
    existing.length > 0
      ? `Traces there: ${existing
          .slice(0, 10)
          .map((n) => `"${n}"`)
          .join(', ')}${existing.length > 10 ? ', ...' : ''}.`
      : 'The store has no complete traces.'
  return new ToolReplayError(
    ErrorCodes.TRACE_NOT_FOUND,
    `Trace "${name}" was not found in the store at ${location}. ${list} Record it first (mode "record" or \`tr-proxy record --trace ${name}\`), or check the name and --store.`,
    { details: { trace: name, existing, location } },
  )
}

/** An error as plain data, to cross the store's socket or a worker thread (fromWireError makes it an error again). */
export interface WireError {
  code: ErrorCode
  message: string
  details?: Record<string, unknown>
}

/** A ToolReplayError as it is; anything else is TR_INTERNAL, its message after `failed` (what was being done). */
export function toWireError(err: unknown, failed: string): WireError {
  if (err instanceof ToolReplayError) return { code: err.code, message: err.message, ...(err.details ? { details: err.details } : {}) }
  return { code: ErrorCodes.INTERNAL, message: `${failed}: ${(err as Error)?.message ?? String(err)}` }
}

export function fromWireError(e: WireError): ToolReplayError {
  return new ToolReplayError(e.code, e.message, e.details ? { details: e.details } : {})
}
