/**
 * `tool-replay/engine`, the public entry: a record or replay session (`openSession`) and its summary,
 * redaction and the secret scan, and the faults file with its coverage and behaviour contracts. The
 * folder's door for sibling folders is `./index.ts` (with the runner glue and the internals the capture
 * paths share); what is exported here is a decision, pinned by e2e/public-surface.test.ts.
 */

export type {
  ContractReport,
  ContractResult,
  ContractSpec,
  ContractViolation,
  Effect,
  EffectRule,
  FaultRule,
  FaultsConfig,
  FaultsInput,
  LedgerEntry,
  Mode,
  RedactionOptions,
  RuleCoverage,
  ScanOptions,
  SecretFinding,
  Session,
  SessionFaults,
  SessionOptions,
  SessionSummary,
} from './index.ts'
export {
  assertAllRulesFired,
  assertContracts,
  checkContracts,
  commitEvidence,
  FaultPlanner,
  formatContractReport,
  formatCoverage,
  formatSummary,
  openSession,
  parseFaults,
  Redactor,
  readFaultsFile,
  scanTrace,
  seedLine,
} from './index.ts'
