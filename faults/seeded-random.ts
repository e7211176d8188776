import { createHash } from 'node:crypto'
import { canonicalJson } from '../trace/index.ts'

/**
 * A number in [0, 1) that depends only on (seed, rule id, invocation key, purpose): every fault decision is
 * drawn from it, never from a shared random stream, so traffic to one target cannot shift another's schedule
 * and a run is reproduced exactly from its seed.
 * @example
 * seededUnit('42', 'lost-ack', 'call:3', 'select') < 0.2 // does call 3 of rule lost-ack fault at p = 0.2?
 */
export function seededUnit(seed: string, ruleId: string, invocation: string, purpose: string): number {
  const digest = createHash('sha256')
    .update(canonicalJson([seed, ruleId, invocation, purpose]))
    .digest()
  // 53 bits: every double in [0, 1) with that spacing is reachable, and no rounding reaches 1.
  return (digest.readUInt32BE(0) * 2 ** 21 + (digest.readUInt32BE(4) >>> 11)) / 2 ** 53
}
