/**
 * `tool-replay/engine`, the public entry: a record or replay session (`openSession`) and its summary,
 * redaction and the secret scan, and the session's faults (the faults file, its coverage and behaviour
 * contracts are `tool-replay/faults`). The
 * folder's door for sibling folders is `./index.ts` (with the runner glue and the internals the capture
 * paths share); what is exported here is a decision, pinned by e2e/public-surface.test.ts.
 */

export type {
  FaultsInput,
  LedgerEntry,
  Mode,
  RedactionOptions,
  ScanOptions,
  SecretFinding,
  Session,
  SessionFaults,
  SessionOptions,
  SessionSummary,
} from './index.ts'
export {
  formatSummary,
  openSession,
  Redactor,
  scanTrace,
} from './index.ts'
