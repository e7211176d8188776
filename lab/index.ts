/** The fault lab: a bundled shipping API and agent, run under seeded faults with three recovery policies. */

export type { AgentResult, PolicySpec, RecoveryPolicy } from './agent.ts'
export { POLICIES, parsePolicies, RECOVERY_POLICIES, shipOrder } from './agent.ts'
export type { LabOptions, LabRun, PolicyRun } from './run-lab.ts'
export { findScenario, formatLabRun, LAB_DEADLINE_MS, labConfig, labRunJson, runLab } from './run-lab.ts'
export type { Scenario } from './scenarios.ts'
export { SCENARIO_NAMES, SCENARIOS } from './scenarios.ts'
export type { Rate, Shipment, ShippingApi } from './shipping-api.ts'
export { RATES, startShippingApi } from './shipping-api.ts'
export type { LabClock } from './virtual-clock.ts'
export { RealClock, VirtualClock } from './virtual-clock.ts'
