/**
 * What the page asks of the library, done as the CLI does it: fork (trace/patch.ts, as `tr-proxy fork`),
 * compare (trace/diff.ts + trace/llm/llm-diff.ts, as `tr-proxy diff`), promote to a test (cases/, as
 * `tr-proxy emit-test`) and the fault evidence of a run (faults/, as `tr-proxy check`).
 */
import { emitCase } from '../cases/index.ts'
import { type ContractReport, checkContracts, commitEvidence, type FaultsConfig, type RuleCoverage } from '../faults/index.ts'
import { type TraceStore, traceDigest } from '../store/index.ts'
import {
  type AppRun,
  assertTraceName,
  diffTraces,
  diffTracesLlm,
  ErrorCodes,
  forkTraceWithNotes,
  formatTurnLine,
  type LlmTraceDiff,
  llmTimeline,
  llmView,
  OUTPUT_TAIL_BYTES,
  parsePatchSpec,
  resolvePatches,
  shellLine,
  ToolReplayError,
  type Trace,
  type TraceDiff,
} from '../trace/index.ts'
import type { ApprovedCommand } from './command-gate.ts'
import { verdictOf } from './verdict.ts'

/** What the page asks to fork. */
export interface ForkRequest {
  source: string
  to: string
  /** Patch specs, as `tr-proxy fork --patch` takes them ("#2 llm.tool_call[0].arguments={...}"). */
  patches: string[]
  force?: boolean
}

/** Forks `source` into `to` with the patches, as `tr-proxy fork` does; the source is untouched. */
export async function forkRun(store: TraceStore, r: ForkRequest) {
  if (!Array.isArray(r.patches) || r.patches.length === 0 || !r.patches.every((p) => typeof p === 'string')) {
    throw new ToolReplayError(ErrorCodes.INVALID_PATCH, 'A fork needs at least one patch, written as `tr-proxy fork --patch` takes it (e.g. "#2 $.amount=10").')
  }
  const specs = r.patches.map((p) => parsePatchSpec(p))
  if (specs.some((s) => s.action.kind === 'body-file')) {
    throw new ToolReplayError(ErrorCodes.INVALID_PATCH, 'body=@FILE patches read a file: use `tr-proxy fork` for them, or write the body as $.path edits.')
  }
  assertTraceName(r.to, 'branch name')
  if (r.to === r.source) {
    throw new ToolReplayError(
      ErrorCodes.INVALID_OPTION,
      `Cannot fork "${r.source}" onto its own source: a fork never replaces what it was made from. Name the branch.`,
    )
  }
  const source = await store.readTrace(r.source)
  await assertReplaceable(store, r.to, r.force === true, source.meta.name)
  const { trace: branch, notes } = forkTraceWithNotes(source, { name: r.to, sourceDigest: traceDigest(source), patches: specs })
  await store.putTrace(branch, { overwrite: r.force === true })
  const applied = resolvePatches(source, specs)
  return {
    source: source.meta.name,
    branch: r.to,
    lineage: branch.meta.lineage,
    command: `tr-proxy fork ${shellLine([source.meta.name, '--to', r.to, ...applied.flatMap((p) => ['--patch', p.spec])])}`,
    patches: applied.map((p) => ({ id: p.id, spec: p.spec, seq: p.seq, notes: notes.filter((n) => n.id === p.id && n.seq === p.seq).map((n) => n.note) })),
  }
}

/**
 * A fork may replace only a branch another fork made (`force`): never a recording or an imported trace, whose
 * exchanges happened and would be lost.
 */
async function assertReplaceable(store: TraceStore, name: string, force: boolean, source: string): Promise<void> {
  const existing = await store.openTrace(name).catch(() => undefined)
  if (!existing && !(await store.hasTrace(name))) return
  if (force && existing?.info.meta.lineage) return
  throw new ToolReplayError(
    ErrorCodes.TRACE_EXISTS,
    `Cannot fork "${source}" to "${name}": a trace with that name exists${force ? ' and it is not a branch made by a fork (a recording is never replaced from the page)' : ''}. Pick another name.`,
  )
}

/** One aligned pair of the comparison, with each side's timeline line. */
export interface ComparedPair {
  a?: number
  b?: number
  lineA?: string
  lineB?: string
  /** Index into `diff.differences` of the differences on this pair. */
  differences: number[]
}

/** Two runs compared as `tr-proxy diff` compares them, aligned side by side, with both apps' outcomes. */
export async function compareRuns(store: TraceStore, aName: string, bName: string, view?: 'llm' | 'http') {
  const a = await store.readTrace(aName)
  const b = await store.readTrace(bName)
  const useLlm = view === 'llm' || (view === undefined && (hasModelTurn(a) || hasModelTurn(b)))
  const diff: LlmTraceDiff | TraceDiff = useLlm ? diffTracesLlm(a, b) : diffTraces(a, b)
  const lines = (t: Trace) => {
    const out = new Map<number, string>()
    let previous: string | undefined
    for (const turn of llmTimeline(t)) {
      out.set(turn.seq, formatTurnLine(turn, previous))
      if (turn.llm?.model !== undefined) previous = turn.llm.model
    }
    return out
  }
  const la = lines(a)
  const lb = lines(b)
  const pairs: ComparedPair[] = diff.alignment.map((p) => ({
    ...(p.a !== undefined ? { a: p.a, lineA: la.get(p.a) } : {}),
    ...(p.b !== undefined ? { b: p.b, lineB: lb.get(p.b) } : {}),
    differences: diff.differences.flatMap((d, i) => ((d.a !== undefined && d.a === p.a) || (d.b !== undefined && d.b === p.b) ? [i] : [])),
  }))
  await nameAttributedPatches(store, diff, [a, b])
  const first = diff.first
  const firstPair = first ? pairs.findIndex((p) => (first.a !== undefined && p.a === first.a) || (first.b !== undefined && p.b === first.b)) : -1
  // The first divergence as two texts for the page's diff view: the model turns' LLM views, else the details.
  const views = first && {
    a: first.a === undefined ? '' : pretty(viewOrExchange(a, first.a)),
    b: first.b === undefined ? '' : pretty(viewOrExchange(b, first.b)),
  }
  return {
    view: useLlm ? 'llm' : 'http',
    a: side(a),
    b: side(b),
    ...(await promoteTarget(store, b)),
    diff,
    pairs,
    firstPair,
    firstViews: views,
    command: `tr-proxy diff ${shellLine([aName, bName])}`,
  }
}

/**
 * Attributions name a patch id; its spec is in the lineage of the fork that made it, which for a run of the
 * app against a fork (replay --record-as) is the lineage of the trace it ran against.
 */
async function nameAttributedPatches(store: TraceStore, diff: LlmTraceDiff | TraceDiff, traces: Trace[]): Promise<void> {
  const specs = new Map<string, string>()
  for (const t of traces) {
    const lineages = [t.meta.lineage]
    const against = t.meta.labels?.observedAgainst
    if (against) lineages.push((await store.openTrace(against).catch(() => undefined))?.info.meta.lineage)
    for (const l of lineages) for (const p of l?.patches ?? []) specs.set(p.id, p.spec)
  }
  for (const d of [...diff.differences, ...(diff.first ? [diff.first] : [])])
    for (const at of d.attribution ?? []) if (at.spec === undefined && specs.has(at.patchId)) at.spec = specs.get(at.patchId)
}

/**
 * What "Promote to test" on a comparison promotes, decided here and not by the page: a run of the app
 * against a trace, recorded by this store (a rerun), promotes that trace expecting the run's outcome; a run
 * with its own outcome promotes itself. The label of an imported trace never picks what runs.
 */
async function promoteTarget(store: TraceStore, b: Trace): Promise<{ promote?: { trace: string; expectFrom?: string }; promoteBlocked?: string }> {
  const against = b.meta.labels?.observedAgainst
  if (!b.meta.app?.exit) return {}
  if (against === undefined) return { promote: { trace: b.meta.name } }
  const reader = await store.openTrace(b.meta.name)
  if (!reader.info.recorded || !(await store.hasTrace(against))) return {}
  const verdict = await verdictOf(store, reader)
  if (verdict?.state !== 'complete') return { promoteBlocked: verdict?.summary ?? 'replay verdict unknown' }
  return { promote: { trace: against, expectFrom: b.meta.name } }
}

function side(t: Trace) {
  return { name: t.meta.name, exchanges: t.exchanges.length, app: t.meta.app, lineage: t.meta.lineage, observedAgainst: t.meta.labels?.observedAgainst }
}

function viewOrExchange(t: Trace, seq: number): unknown {
  const x = t.exchanges.find((e) => e.seq === seq)
  if (!x) return null
  const v = llmView(t, x)
  if (v)
    return {
      model: v.model,
      outputText: v.outputText,
      toolCalls: v.toolCalls.map((c) => ({ name: c.name, arguments: c.arguments ?? c.argumentsText })),
      finish: v.finish,
    }
  return { request: `${x.request.method} ${x.request.url}`, outcome: x.outcome.kind === 'response' ? x.outcome.response.status : x.outcome.error.code }
}

function pretty(v: unknown): string {
  return `${JSON.stringify(v, null, 2)}\n`
}

const hasModelTurn = (t: Trace) => t.exchanges.some((x) => llmView(t, x) !== undefined)

/** What the page asks to promote. */
export interface EmitRequest {
  /** The trace the case replays (the branch). */
  trace: string
  name: string
  /** A run of the app against `trace` recorded by this store (a rerun) whose outcome the case expects; default the trace itself. */
  expectFrom?: string
}

/**
 * Promotes a trace to a command case, as `tr-proxy emit-test --command` does: the trace's recorded command
 * (approved by command-gate.ts: verifying the case runs it), expecting the exit code and stdout the app had in
 * `expectFrom`. The case is verified before it is published, so what is returned passes `tr-proxy verify`.
 */
export async function emitRunCase(store: TraceStore, r: EmitRequest, casesDir: string, approved: ApprovedCommand) {
  if (approved.trace !== r.trace) throw new ToolReplayError(ErrorCodes.INTERNAL, `The command approved is trace "${approved.trace}"'s, not "${r.trace}"'s.`)
  const trace = await store.readTrace(r.trace)
  const expectRun = r.expectFrom !== undefined && r.expectFrom !== r.trace ? await runAgainst(store, r.expectFrom, r.trace) : trace.meta.app
  if (!expectRun?.exit) {
    throw new ToolReplayError(
      ErrorCodes.INVALID_OPTION,
      `Cannot promote "${r.trace}" from the page: "${r.expectFrom ?? r.trace}" has no outcome to expect (rerun the app against the branch first). Use \`tr-proxy emit-test\` with --runner or --command.`,
    )
  }
  const out = expectRun.exit.stdout
  // The stdout is expected only when the trace kept all of it, unredacted: a cut or redacted tail is not what the
  // app prints. A test runner's report (a test setup's command) carries durations: its exit code is the outcome.
  const stdoutKnown = out.bytes <= OUTPUT_TAIL_BYTES && !out.text.includes('[REDACTED]') && trace.meta.labels?.testRunner === undefined
  const emitted = await emitCase({
    trace,
    out: casesDir,
    name: r.name,
    command: { argv: [...approved.command], ...(approved.cwd !== undefined ? { cwd: approved.cwd } : {}) },
    expect: { exitCode: expectRun.exit.code, ...(stdoutKnown ? { stdout: out.text } : {}) },
  })
  return {
    dir: emitted.dir,
    manifest: emitted.manifest,
    verified: emitted.verified !== undefined,
    verifyCommand: `tr-proxy verify ${shellLine([emitted.dir])}`,
    command: `tr-proxy emit-test ${shellLine([r.trace, '--out', casesDir, '--name', r.name, '--expect-exit-code', String(expectRun.exit.code), '--', ...approved.command])}`,
  }
}

/**
 * The outcome of `run`, a run of the app against `trace` (replay --record-as). Its `observedAgainst` label is
 * believed only for a recording of this store: an imported file can say anything.
 */
async function runAgainst(store: TraceStore, run: string, trace: string): Promise<AppRun | undefined> {
  const reader = await store.openTrace(run)
  const { info } = reader
  if (!info.recorded || info.meta.labels?.observedAgainst !== trace) {
    throw new ToolReplayError(
      ErrorCodes.INVALID_OPTION,
      `Cannot promote "${trace}" expecting the outcome of "${run}": "${run}" is not a run of the app recorded by this store against "${trace}". Rerun the app against "${trace}" from the page, then promote that run.`,
    )
  }
  // A case replays strictly and requires every recording used: only a run that did exactly that is its expectation.
  const verdict = await verdictOf(store, reader)
  if (verdict?.state !== 'complete') {
    throw new ToolReplayError(
      ErrorCodes.INVALID_OPTION,
      `Cannot promote "${trace}" expecting the outcome of "${run}": its ${verdict?.summary ?? 'replay verdict is unknown'}, and a case needs a complete strict replay. Fork what the app now asks for too (or rerun with a live tail and fork that run), then rerun.`,
    )
  }
  return info.meta.app
}

/** A faulted run's evidence: coverage per rule, commit evidence and, with a contracts file, each contract's verdict. */
export async function faultEvidence(store: TraceStore, name: string, config: Pick<FaultsConfig, 'contracts' | 'effects' | 'rules' | 'source'> | undefined) {
  const trace = await store.readTrace(name)
  const seed = trace.meta.labels?.faultsSeed ?? trace.exchanges.find((x) => x.fault)?.fault?.seed
  const faulted = trace.exchanges.filter((x) => x.fault).map((x) => ({ seq: x.seq, ...(x.fault as NonNullable<typeof x.fault>), upstream: undefined }))
  let report: ContractReport | undefined
  if (config) report = checkContracts(trace, config)
  const coverage: RuleCoverage[] | Array<{ rule: string; fault: string; triggered: number }> = report?.coverage ?? coverageOfFaults(faulted)
  return {
    seed,
    contractsFile: config?.source,
    coverage,
    effects: report?.effects ?? commitEvidence(trace, config?.effects ?? []),
    contracts: report?.results,
    // Not `ok`: that is the API's own envelope field (every answer is { ok: true, ... }).
    contractsOk: report?.ok,
    faulted,
  }
}

function coverageOfFaults(faulted: Array<{ rule: string; kind: string }>) {
  const by = new Map<string, { rule: string; fault: string; triggered: number }>()
  for (const f of faulted) {
    const c = by.get(f.rule) ?? { rule: f.rule, fault: f.kind, triggered: 0 }
    c.triggered++
    by.set(f.rule, c)
  }
  return [...by.values()]
}
