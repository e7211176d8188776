import { hash } from 'node:crypto'
import { canonicalJson } from '../trace/index.ts'

/**
 * A number in [0, 1) that depends only on (seed, rule id, invocation key, purpose): every fault decision is
 * drawn from it, never from a shared random stream, so traffic to one target cannot shift another's schedule
 * and a run is reproduced exactly from its seed.
 * @example
 * seededUnit('42', 'lost-ack', 'call:3', 'select') < 0.2 // does call 3 of rule lost-ack fault at p = 0.2?
 */
export function seededUnit(seed: string, ruleId: string, invocation: string, purpose: string): number {
  // One-shot: half the time of a Hash object per draw (two draws a fault decision).
  const hex = hash('sha256', canonicalJson([seed, ruleId, invocation, purpose]), 'hex')
  // 53 bits of the digest's first 8 bytes, big-endian: every double in [0, 1) with that spacing is reachable,
  // and no rounding reaches 1.
  return (Number.parseInt(hex.slice(0, 8), 16) * 2 ** 21 + (Number.parseInt(hex.slice(8, 16), 16) >>> 11)) / 2 ** 53
}
