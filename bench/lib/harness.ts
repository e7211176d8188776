/**
 * What every benchmark suite shares: quick/full sizes, interleaved rounds with medians, the metric rows a
 * suite reports, and how a suite hands them to `bench/index.ts` (a JSON file named by BENCH_RESULT) or
 * prints them when run on its own.
 *
 * Ratios, not absolute figures, are what the suites report: the machines are shared and noisy. Every side of
 * a comparison runs in the same process (or with the same client process), in rotated order each round
 * (A B C, B C A, C A B, ...), after a warm-up, and the row keeps each side's median.
 */
import { writeFileSync } from 'node:fs'
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { formatProfile, type ProfileSummary } from './profile.ts'

/** BENCH_QUICK=1: fewer rounds and smaller amounts (the whole of `npm run bench` in a few minutes). */
export const QUICK = process.env.BENCH_QUICK === '1'
/** BENCH_PROFILE=1: after the measured rounds, each of our rows runs once more under the CPU profiler. */
export const PROFILE = process.env.BENCH_PROFILE === '1'

/** `quick` under BENCH_QUICK=1, else `full`. */
export const pick = <T>(quick: T, full: T): T => (QUICK ? quick : full)

/** Rounds per comparison (BENCH_ROUNDS overrides). */
export const ROUNDS = Number(process.env.BENCH_ROUNDS ?? pick(3, 5))

/** The median (upper median for an even count). */
export const median = (xs: readonly number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

// A full GC before every timed side, alike for all: otherwise one side pays for the garbage the previous one
// left. `npm run bench` passes no V8 flags, so the flag is set here.
setFlagsFromString('--expose-gc')
/** Runs a full garbage collection. */
export const collectGarbage = runInNewContext('gc') as () => void

/**
 * Milliseconds to create a million promises here: ~25-40 in a plain process; several times more once Node 22's
 * promise hooks are on (its AsyncLocalStorage turns them on at first use, as msw and nock set-ups do, and they
 * stay on), which every promise fetch makes pays. A setup line of the in-process suites, to show the condition.
 */
export function promiseCostMs(): number {
  const t0 = performance.now()
  for (let i = 0; i < 1_000_000; i++) void Promise.resolve(i)
  return performance.now() - t0
}

/** One side of a comparison: runs once and returns what it measured (ms, or req/s, as the suite says). */
export type Side = () => Promise<number>

/**
 * Runs every side once to warm up, then `rounds` times in rotated order with a pause before each (for the
 * previous side's background work, such as LevelDB compaction, to settle), and returns every side's values.
 * `collect`: a full GC before each side (see collectGarbage above); off where the sides are servers answering a
 * client in another process, where it cost every server more than the garbage it spared (bench/suites/proxy-get.ts).
 */
export async function interleave(sides: Record<string, Side>, rounds = ROUNDS, settleMs = 200, collect = true): Promise<Record<string, number[]>> {
  const entries = Object.entries(sides)
  const values: Record<string, number[]> = {}
  for (const [name, side] of entries) {
    await side()
    values[name] = []
  }
  for (let i = 0; i < rounds; i++) {
    for (let j = 0; j < entries.length; j++) {
      const [name, side] = entries[(i + j) % entries.length] as [string, Side]
      await sleep(settleMs)
      if (collect) collectGarbage()
      values[name]?.push(await side())
    }
  }
  for (const [name, list] of Object.entries(values)) process.stderr.write(`    ${name.padEnd(28)} ${list.map(fmt).join(' / ')}\n`)
  return values
}

/** A number with 3 significant figures at most, no exponent. */
export function fmt(n: number): string {
  if (!Number.isFinite(n)) return String(n)
  const abs = Math.abs(n)
  return abs >= 100 ? n.toFixed(0) : abs >= 10 ? n.toFixed(1) : n.toFixed(2)
}

/** A goal on a row's ratio (or, for absolute rows, on `ours`): at least or at most `value`. */
export interface Target {
  kind: 'min' | 'max'
  value: number
  text: string
}

/** One line of the final table. `id` is stable across runs, for diffing two `--json` outputs. */
export interface Metric {
  id: string
  /** What is measured, as a reader would say it. */
  metric: string
  ours: number
  unit: string
  /** The peer or limit measured in the same run (absent for absolute targets). */
  peer?: { name: string; value: number }
  /** ours against peer, oriented as `ratioText` says (e.g. "x SnapshotAgent calls/s"). */
  ratio?: number
  ratioText?: string
  /** The target: on the ratio, or on `ours` when `on` says so (absolute targets such as import time). */
  target?: Target & { on?: 'ratio' | 'ours' }
  /** Other conditions of the target (e.g. every chunk its own read); the row passes only if these hold too. */
  conditions?: Array<{ text: string; ok: boolean }>
  pass?: boolean
  /** Per-round values, ours then peer. */
  rounds?: { ours: number[]; peer?: number[] }
  /**
   * How the ratio follows from one round's values. When given, `ratio` becomes the median of the per-round
   * ratios (each round's two sides ran minutes apart at most, so a machine whose load drifts over the run skews
   * it less than a ratio of medians taken from different rounds), and `ratioOfMedians` keeps the other one.
   */
  ratioOf?: 'ours/peer' | 'peer/ours'
  ratioOfMedians?: number
  note?: string
}

/**
 * A time row (lower is better): side `ours` against side `peer` of one interleave() run's `ms` (`peerName`: how
 * the table names the peer, default its side's name), medians shown, the ratio paired per round. `more` adds a
 * target, a note or anything else of the row.
 */
export function timeRow(
  report: SuiteReport,
  ms: Record<string, number[]>,
  row: { id: string; metric: string; ours: string; peer: string; ratioText: string; peerName?: string },
  more: Partial<Metric> = {},
): void {
  const m = (side: string) => median(ms[side] as number[])
  report.row({
    id: row.id,
    metric: row.metric,
    ours: m(row.ours),
    unit: 'ms',
    peer: { name: row.peerName ?? row.peer, value: m(row.peer) },
    ratio: m(row.ours) / m(row.peer),
    ratioOf: 'ours/peer',
    ratioText: row.ratioText,
    rounds: { ours: ms[row.ours] as number[], peer: ms[row.peer] as number[] },
    ...more,
  })
}

/** Fills the paired ratio (see `ratioOf`) and `pass` from the target and the conditions. */
export function judged(m: Metric): Metric {
  const ours = m.rounds?.ours ?? []
  const peer = m.rounds?.peer ?? []
  if (m.ratioOf && ours.length > 0 && ours.length === peer.length) {
    const perRound = ours.map((o, i) => (m.ratioOf === 'ours/peer' ? o / (peer[i] as number) : (peer[i] as number) / o))
    m = { ...m, ratioOfMedians: m.ratio, ratio: median(perRound) }
  }
  if (!m.target) return m
  const value = m.target.on === 'ours' || m.ratio === undefined ? m.ours : m.ratio
  const meets = m.target.kind === 'min' ? value >= m.target.value : value <= m.target.value
  return { ...m, pass: meets && (m.conditions ?? []).every((c) => c.ok) }
}

/** Higher is better: ours/peer. */
export const faster = (oursRate: number, peerRate: number): number => oursRate / peerRate

/** What one suite hands to the runner. */
export interface SuiteResult {
  suite: string
  title: string
  /** Workload and set-up, one line each, printed above the suite's rows. */
  setup: string[]
  rows: Metric[]
  profiles: ProfileSummary[]
  ms: number
}

/**
 * Runs a suite body and reports its result: into the file BENCH_RESULT names (bench/index.ts), else printed.
 */
export async function runSuite(suite: string, title: string, body: (report: SuiteReport) => Promise<void>): Promise<void> {
  const t0 = performance.now()
  const result: SuiteResult = { suite, title, setup: [], rows: [], profiles: [], ms: 0 }
  process.stderr.write(`\n== ${title} (${QUICK ? 'quick' : 'full'}, ${ROUNDS} rounds, Node ${process.version})\n`)
  await body({
    setup: (line) => {
      result.setup.push(line)
      process.stderr.write(`  ${line}\n`)
    },
    row: (m) => {
      const row = judged(m)
      result.rows.push(row)
      process.stderr.write(`  => ${formatRow(row)}\n`)
    },
    profile: (p) => {
      result.profiles.push(p)
      process.stderr.write(`${formatProfile(p)}\n`)
    },
  })
  result.ms = performance.now() - t0
  const out = process.env.BENCH_RESULT
  if (out) writeFileSync(out, JSON.stringify(result))
  else process.stdout.write(`${formatTable(result.rows)}\n`)
}

/** What a suite body reports through. */
export interface SuiteReport {
  setup(line: string): void
  row(m: Metric): void
  profile(p: ProfileSummary): void
}

function formatRow(m: Metric): string {
  const ratio = m.ratio === undefined ? '' : ` = ${fmt(m.ratio)}${m.ratioText ?? ''}`
  const peer = m.peer ? ` vs ${m.peer.name} ${fmt(m.peer.value)} ${m.unit}` : ''
  const target = m.target ? ` (target ${m.target.text}: ${m.pass ? 'met' : 'MISSED'})` : ''
  return `${m.metric}: ${fmt(m.ours)} ${m.unit}${peer}${ratio}${target}${m.note ? `; ${m.note}` : ''}`
}

/** The final table: metric, ours, peer/limit, ratio, target, result. */
export function formatTable(rows: readonly Metric[]): string {
  const cells = rows.map((m) => [
    m.metric,
    `${fmt(m.ours)} ${m.unit}`,
    m.peer ? `${m.peer.name} ${fmt(m.peer.value)}` : '',
    m.ratio === undefined ? '' : `${fmt(m.ratio)}${m.ratioText ?? ''}`,
    m.target ? m.target.text + (m.conditions?.length ? ` + ${m.conditions.map((c) => `${c.text}${c.ok ? '' : ' (NOT met)'}`).join(', ')}` : '') : '',
    m.pass === undefined ? '' : m.pass ? 'met' : 'MISSED',
  ])
  const head = ['metric', 'ours', 'peer / limit', 'ratio', 'target', 'result']
  const widths = head.map((h, i) => Math.min(i === 4 ? 60 : 90, Math.max(h.length, ...cells.map((c) => (c[i] as string).length))))
  const line = (c: string[]) =>
    c
      .map((s, i) => s.padEnd(widths[i] as number))
      .join('  ')
      .trimEnd()
  return [line(head), widths.map((w) => '-'.repeat(w)).join('  '), ...cells.map(line)].join('\n')
}
