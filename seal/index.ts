/**
 * Sealed runs, the operating system's side: a command in its own network and mount namespaces whose only way
 * out is Tool Replay (names answered by Tool Replay's DNS, every TCP connection and UDP datagram redirected to
 * its listeners, the original destination read from connection tracking), the checks that say whether this
 * machine allows it, and bridges to host services. The proxy serves what arrives (proxy/sealed-run.ts).
 */

export type { Bridge, BridgeTarget } from './bridges.ts'
/** Parses `--bridge` values. */
export { parseBridges } from './bridges.ts'
export type { SealedDestination, SealHandlers, SealOptions, SealPlan, SealProbe } from './sealed-namespace.ts'
/** Prepares a sealed run (checks, resolver files, the helper's argv); tries one for real without a command. */
export { prepareSeal, probeSeal } from './sealed-namespace.ts'
export type { SealCheck, SealSupport } from './support.ts'
/** The checks that need no namespace (a typed error when one fails), and the variable that simulates a refused `unshare` (tests). */
export { assertSealable, SEAL_SIMULATE_ENV, sealSupport } from './support.ts'
