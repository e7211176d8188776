/**
 * The seed of a faulted run: where it comes from, how it is printed, and the command that reruns the run
 * with it. A run without a seed gets a random one, printed, so even a random run can be reproduced.
 */
import { randomInt } from 'node:crypto'

/** Environment variable naming a faults file. */
export const FAULTS_FILE_ENV = 'TOOL_REPLAY_FAULTS'
/** Environment variable that overrides the faults file's seed. */
export const FAULTS_SEED_ENV = 'TOOL_REPLAY_FAULTS_SEED'

/** Where the seed in use came from. */
export type SeedSource = 'option' | 'env' | 'file' | 'random'

/** The seed in use: an explicit option wins, then TOOL_REPLAY_FAULTS_SEED, then the file's seed, then a random one. */
export function resolveSeed(from: { option?: string | number; env?: Record<string, string | undefined>; file?: string }): { seed: string; source: SeedSource } {
  if (from.option !== undefined && String(from.option).trim() !== '') return { seed: String(from.option).trim(), source: 'option' }
  const env = from.env?.[FAULTS_SEED_ENV]
  if (env !== undefined && env.trim() !== '') return { seed: env.trim(), source: 'env' }
  if (from.file !== undefined) return { seed: from.file, source: 'file' }
  return { seed: String(randomInt(1, 2 ** 31)), source: 'random' }
}

/**
 * The command line that reruns a run with its seed: `argv` (the command as typed, program first) with any
 * `--seed` replaced, placed before a `--` that starts a wrapped command.
 * @example
 * rerunCommand(['tr-proxy', 'demo', '--scenario', 'lost_ack'], '42') // "tr-proxy demo --scenario lost_ack --seed 42"
 */
export function rerunCommand(argv: ReadonlyArray<string>, seed: string): string {
  const out: string[] = []
  let i = 0
  for (; i < argv.length; i++) {
    const a = argv[i] as string
    if (a === '--') break
    if (a === '--seed') {
      i++
      continue
    }
    if (a.startsWith('--seed=')) continue
    out.push(a)
  }
  out.push('--seed', seed, ...argv.slice(i))
  return out.map(shellQuote).join(' ')
}

/**
 * The command line that reruns a run whose seed comes from the environment (the test setups): the
 * process's own command, prefixed with TOOL_REPLAY_FAULTS_SEED.
 * @example
 * rerunWithSeedEnv(['node', '--test', 'a.test.ts'], '42') // "TOOL_REPLAY_FAULTS_SEED=42 node --test a.test.ts"
 */
export function rerunWithSeedEnv(argv: ReadonlyArray<string>, seed: string): string {
  return [`${FAULTS_SEED_ENV}=${shellQuote(seed)}`, ...argv.map(shellQuote)].join(' ')
}

/** "faults seed 42 (random; rerun: ...)": the line printed at the start of every faulted run and on every failure. */
export function seedLine(seed: string, source: SeedSource, rerun?: string): string {
  const from = { option: 'from --seed', env: `from ${FAULTS_SEED_ENV}`, file: 'from the faults file', random: 'random' }[source]
  return `faults seed ${seed} (${from})${rerun ? `; rerun: ${rerun}` : ''}`
}

function shellQuote(word: string): string {
  return /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replace(/'/g, "'\\''")}'`
}
