/**
 * The stores' side of "valid by construction": putTrace and append refuse an exchange that breaks the
 * rules of trace/validate.ts, so a trace in a store always replays without crashing a capture path.
 * Checked in the calling process, before anything crosses the store's socket or reaches LevelDB.
 */
import { assertValidAppRun, assertValidExchange, assertValidTrace, type Exchange, type Trace } from '../trace/index.ts'

const STORE = {
  action: 'Cannot store',
  remedy: 'A store only takes exchanges both capture paths can replay; re-record it, or change recorded exchanges with `tr-proxy fork`.',
}

/** Throws TR_TRACE_INVALID naming the first invalid exchange of a whole trace (import, fork). */
export function assertStorableTrace(trace: Trace): void {
  assertValidTrace(trace, STORE)
  if (trace.meta.app !== undefined) assertStorableApp(trace.meta.name, trace.meta.app)
}

/** Throws TR_TRACE_INVALID when the app outcome a trace carries (meta.app) breaks the rules of trace/validate.ts. */
export function assertStorableApp(trace: string, app: unknown): void {
  assertValidAppRun(trace, app, { action: 'Cannot store' })
}

/** Throws TR_TRACE_INVALID when an exchange being appended to the recording of `trace` is invalid. */
export function assertStorableExchange(trace: string, exchange: Exchange, bodies: ReadonlyMap<string, Uint8Array>): void {
  assertValidExchange(exchange, { ...STORE, trace, bodies })
}
