/**
 * Exchanges a trace file's reader verified (trace-file-read.ts: the file's schema and trace/validate.ts's rules,
 * with the bytes of every body they reference), each with a JSON text of it (the canonical JSON the trace digest
 * took). Staging one (trace-store-impl.ts) skips checking it again and the LevelDB backend stores that text instead
 * of writing it again: on a big import each cost a tenth of the storing thread. An exchange changed after it was
 * read must not be staged as it is (the import's redaction makes a new object whenever it changes anything).
 */
import type { Exchange } from '../trace/index.ts'

export const verifiedExchanges = new WeakMap<Exchange, string>()
