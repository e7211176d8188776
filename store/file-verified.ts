/**
 * Exchanges a trace file's reading thread verified (trace-file-thread.ts: the file's schema and trace/validate.ts's
 * rules, with the bytes of every body they reference), each with the canonical JSON it was parsed from here.
 * Staging one (trace-store-impl.ts) skips checking it again and the LevelDB backend stores that text instead of
 * writing it again: on a big import each cost a tenth of the storing thread. Only those objects, new ones that
 * only the import holds: an exchange changed after it was read must not be stored with the text (the import's
 * redaction makes a new object whenever it changes anything), so the reader in one thread, whose exchanges
 * other callers keep and change (readTraceFile), registers none.
 */
import type { Exchange } from '../trace/index.ts'

export const verifiedExchanges = new WeakMap<Exchange, string>()
