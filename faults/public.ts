/**
 * `tool-replay/faults`, the public entry: the faults file (rules and seed), the planner, coverage of the rules,
 * the effects a trace shows committed and the behaviour contracts checked on them. The folder's door for sibling
 * folders is `./index.ts`; what is exported here is a decision, pinned by e2e/public-surface.test.ts.
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
  RuleCoverage,
} from './index.ts'
export {
  assertAllRulesFired,
  assertContracts,
  checkContracts,
  commitEvidence,
  FaultPlanner,
  formatContractReport,
  formatCoverage,
  parseFaults,
  readFaultsFile,
  seedLine,
} from './index.ts'
