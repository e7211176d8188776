/**
 * The CPU-profile helper behind BENCH_PROFILE=1: profiles one of our rows (in-process through node:inspector,
 * or a child process through --cpu-prof), writes the .cpuprofile (open it in Chrome DevTools or speedscope),
 * and summarizes where the time went: the top functions by self time and the same time grouped by area (a
 * product folder, a package, Node's internals, GC).
 */
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { Session } from 'node:inspector/promises'
import { tmpdir } from 'node:os'
import { join, relative, sep } from 'node:path'
import { fileURLToPath } from 'node:url'

const ROOT = fileURLToPath(new URL('../..', import.meta.url))

/** Where profiles go: BENCH_PROFILE_DIR, else a folder in the temp dir (printed). */
export const PROFILE_DIR = process.env.BENCH_PROFILE_DIR ?? join(tmpdir(), 'tool-replay-bench-profiles')

/** A profile's summary: total sampled time, top functions by self time, and self time by area. */
export interface ProfileSummary {
  label: string
  file: string
  totalMs: number
  functions: Array<{ name: string; where: string; selfMs: number; pct: number }>
  areas: Array<{ area: string; selfMs: number; pct: number }>
}

interface CpuProfileNode {
  id: number
  callFrame: { functionName: string; url: string; lineNumber: number }
}
interface CpuProfile {
  nodes: CpuProfileNode[]
  samples: number[]
  timeDeltas: number[]
}

const safe = (label: string) => label.replace(/[^a-z0-9.-]+/gi, '_').slice(0, 80)

/** Runs `fn` under the in-process CPU profiler (100 µs sampling) and returns its result and the profile's path. */
export async function profiled<T>(label: string, fn: () => Promise<T>): Promise<{ result: T; file: string }> {
  mkdirSync(PROFILE_DIR, { recursive: true })
  const session = new Session()
  session.connect()
  try {
    await session.post('Profiler.enable')
    await session.post('Profiler.setSamplingInterval', { interval: 100 })
    await session.post('Profiler.start')
    const result = await fn()
    const { profile } = await session.post('Profiler.stop')
    const file = join(PROFILE_DIR, `${safe(label)}-${process.pid}-${Date.now()}.cpuprofile`)
    writeFileSync(file, JSON.stringify(profile))
    return { result, file }
  } finally {
    session.disconnect()
  }
}

/** Node arguments that make a child process write its profile into a fresh folder; read it with `childProfile`. */
export function cpuProfArgs(label: string): { args: string[]; dir: string } {
  const dir = join(PROFILE_DIR, `${safe(label)}-${process.pid}-${Date.now()}`)
  mkdirSync(dir, { recursive: true })
  return { args: ['--cpu-prof', '--cpu-prof-dir', dir, '--cpu-prof-interval', '100'], dir }
}

/** The profiles a child wrote with `cpuProfArgs` (one per process it ran, e.g. a wrapper and its command). */
export function childProfiles(dir: string): string[] {
  return readdirSync(dir)
    .filter((f) => f.endsWith('.cpuprofile'))
    .map((f) => join(dir, f))
}

/** Where a frame's code lives: a product folder, a package, a Node built-in, or a V8 pseudo-frame. */
function areaOf(url: string, name: string): string {
  if (!url) return name.startsWith('(') ? name : '(native)'
  if (url.startsWith('node:')) return `node:${url.slice(5).split('/')[0]}`
  const path = url.startsWith('file:') ? fileURLToPath(url) : url
  const nm = path.lastIndexOf(`${sep}node_modules${sep}`)
  if (nm >= 0) {
    const parts = path.slice(nm + 14).split(sep)
    const pkg = parts[0]?.startsWith('@') ? `${parts[0]}/${parts[1]}` : (parts[0] as string)
    return pkg === 'tool-replay' ? `tool-replay (packed) ${parts[2] === 'dist' ? (parts[3] ?? '') : (parts[2] ?? '')}` : pkg
  }
  const rel = relative(ROOT, path)
  return rel.startsWith('..') ? path : `${rel.split(sep)[0]}/`
}

function shortWhere(url: string, line: number): string {
  if (!url) return ''
  const path = url.startsWith('file:') ? fileURLToPath(url) : url
  const nm = path.lastIndexOf(`${sep}node_modules${sep}`)
  const short = nm >= 0 ? path.slice(nm + 14) : relative(ROOT, path).startsWith('..') ? path : relative(ROOT, path)
  return `${short}:${line + 1}`
}

/** Self time by function and by area; `top` functions kept. */
export function summarizeProfile(label: string, file: string, top = 12): ProfileSummary {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile
  const byId = new Map(profile.nodes.map((n) => [n.id, n]))
  const selfUs = new Map<number, number>()
  profile.samples.forEach((id, i) => {
    selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0))
  })
  const fns = new Map<string, { name: string; where: string; us: number }>()
  const areas = new Map<string, number>()
  let total = 0
  for (const [id, us] of selfUs) {
    const frame = (byId.get(id) as CpuProfileNode).callFrame
    // Idle time is not work, and node:inspector's frames are the profiler stopping itself.
    if (frame.functionName === '(idle)' || frame.url === 'node:inspector') continue
    total += us
    const name = frame.functionName || '(anonymous)'
    const where = shortWhere(frame.url, frame.lineNumber)
    const key = `${name} ${where}`
    const f = fns.get(key) ?? { name, where, us: 0 }
    f.us += us
    fns.set(key, f)
    const area = areaOf(frame.url, name)
    areas.set(area, (areas.get(area) ?? 0) + us)
  }
  const pct = (us: number) => (total ? (us / total) * 100 : 0)
  return {
    label,
    file,
    totalMs: total / 1000,
    functions: [...fns.values()]
      .sort((a, b) => b.us - a.us)
      .slice(0, top)
      .map((f) => ({ name: f.name, where: f.where, selfMs: f.us / 1000, pct: pct(f.us) })),
    areas: [...areas.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, 10)
      .map(([area, us]) => ({ area, selfMs: us / 1000, pct: pct(us) })),
  }
}

/** The summary as text: areas on one line, then the top functions. */
export function formatProfile(p: ProfileSummary): string {
  const areas = p.areas.map((a) => `${a.area} ${a.pct.toFixed(0)}%`).join(', ')
  return [
    `  profile: ${p.label} (${p.totalMs.toFixed(0)} ms on CPU, idle excluded) ${p.file}`,
    `    by area: ${areas}`,
    ...p.functions.map((f) => `    ${f.pct.toFixed(1).padStart(5)}%  ${f.selfMs.toFixed(1).padStart(8)} ms  ${f.name}  ${f.where}`),
  ].join('\n')
}
