import { assertValidExchange, ErrorCodes, type Exchange } from '../trace/index.ts'

/**
 * The last gate before a capture path gets a playback: an exchange that breaks the rules of
 * trace/validate.ts (a store written before those rules, or damaged) is refused with TR_TRACE_INVALID,
 * which the session turns into a failed request in its ledger; it is never half-played into a client.
 */
export function assertPlayable(exchange: Exchange, trace: string, bodies: ReadonlyMap<string, Uint8Array>): void {
  assertValidExchange(exchange, {
    trace,
    // Bodies not in memory (a big trace replayed lazily) are size- and hash-checked by the store's reader.
    bodies,
    code: ErrorCodes.TRACE_INVALID,
    action: 'Cannot replay',
    remedy:
      'Playing it back would crash or hang the client, so it is refused. The trace was stored before Tool Replay checked this, or the store is damaged: re-record it, or export, fix and re-import it (import checks every exchange).',
  })
}
