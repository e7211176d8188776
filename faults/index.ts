/** Faults at the HTTP boundary: rules and seed, decisions, coverage, commit evidence and behaviour contracts. */

export type { SyntheticResponse } from '../trace/index.ts'
export { cutBody, providerErrorResponse, providerFor, StreamCutter } from '../trace/index.ts'
export type { AppliedFault, BufferedResponse, ClientView } from './client-view.ts'
export { applyAfterResponse } from './client-view.ts'
export type { Effect } from './commit-evidence.ts'
export { callGroup, commitEvidence, exchangeRef, upstreamOutcome } from './commit-evidence.ts'
export type { ContractReport, ContractResult, ContractViolation } from './contracts.ts'
export { assertContracts, checkContracts, coverageFromTrace, formatContractReport, requestedDelayMs } from './contracts.ts'
export type { MissReason, RuleCoverage } from './fault-coverage.ts'
export { assertAllRulesFired, FaultCoverage, formatCoverage, unfiredReason, unfiredRules } from './fault-coverage.ts'
export type { ActionContext, FaultAction, FaultDecision, FaultFailure } from './fault-decision.ts'
export { describeDecision, faultAction, faultRecord, forwards, isWebSocketRule, phaseOf, sampleLatency } from './fault-decision.ts'
export { FAULTS_OPTIONS } from './fault-options.ts'
export type { FaultRequest } from './fault-planner.ts'
export { FaultPlanner } from './fault-planner.ts'
export type {
  ContractSpec,
  DriftChange,
  EffectRule,
  FaultErrorCode,
  FaultOptionsByKind,
  FaultRule,
  FaultSchedule,
  FaultsConfig,
  LatencyDistribution,
  ProviderShape,
  StreamPoint,
  ValueRef,
} from './fault-rules.ts'
export { CONTRACT_KINDS, FAULT_ERROR_CODES, PROVIDER_SHAPES } from './fault-rules.ts'
export type { SeedSource } from './fault-seed.ts'
export { FAULTS_FILE_ENV, FAULTS_SEED_ENV, rerunCommand, rerunWithSeedEnv, resolveSeed, seedLine } from './fault-seed.ts'
export type { Target, TargetSpec } from './fault-target.ts'
export { compileTarget } from './fault-target.ts'
export { faultsFromObject, parseFaults, readFaultsFile } from './faults-file.ts'
export { driftJson } from './schema-drift.ts'
export { seededUnit } from './seeded-random.ts'
