/**
 * "Fork the next turn too", offline: a strict run against a branch that stopped at a request the branch does
 * not have (the app sent its change on: a tool result it read, the next model request) keeps that request as
 * a refusal. This makes a new branch that answers it: the run's exchanges up to it, then that request with the
 * answer the branch recorded for the request it replaced (the first one of that method and URL the run never
 * used), then the branch's other unused exchanges. The new exchange is marked patched, and the lineage says
 * what was done; fork its answer to decide what the model (or the tool) says next, and rerun. One step at a
 * time, the app's new conversation is replayed without a live model.
 */
import { bodyRefs, type TraceStore, traceDigest } from '../store/index.ts'
import { assertTraceName, ErrorCodes, type Exchange, sha256, ToolReplayError, type Trace } from '../trace/index.ts'
import { verdictOf } from './verdict.ts'

/** What the page asks: answer the first request strict replay refused in `run`, as branch `to`. */
export interface AnswerRequest {
  run: string
  to: string
}

/** Builds and stores the branch; returns its name and the seq of the answered request. */
export async function answerMiss(store: TraceStore, r: AnswerRequest) {
  assertTraceName(r.to, 'branch name')
  const reader = await store.openTrace(r.run)
  const against = reader.info.meta.labels?.observedAgainst
  const verdict = await verdictOf(store, reader)
  if (!reader.info.recorded || against === undefined || verdict?.firstMiss === undefined || verdict.live > 0) {
    throw new ToolReplayError(
      ErrorCodes.INVALID_OPTION,
      `Cannot answer a request of "${r.run}": only a strict run of the app against a trace, recorded by this store, that stopped at a request the trace does not have can be continued this way.`,
    )
  }
  if (await store.hasTrace(r.to))
    throw new ToolReplayError(ErrorCodes.TRACE_EXISTS, `Cannot make branch "${r.to}": a trace with that name exists. Pick another name.`)
  const run = await reader.readAll()
  const branch = await store.readTrace(against)
  const trace = answered(run, branch, verdict.firstMiss, r.to)
  await store.putTrace(trace)
  return { branch: r.to, seq: verdict.firstMiss, source: against, patch: trace.meta.lineage?.patches.at(-1) }
}

/** The branch that answers `run`'s request #miss with `branch`'s recorded answer (pure). */
export function answered(run: Trace, branch: Trace, miss: number, name: string): Trace {
  const unused = [...branch.exchanges]
  const take = (fits: (x: Exchange) => boolean) => {
    const i = unused.findIndex(fits)
    return i < 0 ? undefined : unused.splice(i, 1)[0]
  }
  const sameRequest = (a: Exchange, b: Exchange) =>
    a.request.method === b.request.method && a.request.url === b.request.url && a.request.body?.digest === b.request.body?.digest
  const before = run.exchanges.filter((x) => x.seq < miss)
  // The run replayed these: each used up the branch's recording of that request.
  for (const x of before) if (!take((b) => sameRequest(b, x))) throw unaligned(run, branch, x, 'it replayed a request the trace does not hold')
  const asked = run.exchanges.find((x) => x.seq === miss) as Exchange
  const replaced = take((b) => b.request.method === asked.request.method && b.request.url === asked.request.url)
  if (!replaced)
    throw unaligned(run, branch, asked, `"${branch.meta.name}" has no unused recording of ${asked.request.method} ${asked.request.url} to answer it with`)
  const spec = `#${miss} request=the request the app sent at #${miss} of run "${run.meta.name}" (answered as #${replaced.seq} of "${branch.meta.name}")`
  const id = sha256(spec).slice(0, 12)
  const exchanges: Exchange[] = [
    ...before,
    { ...replaced, seq: miss, request: asked.request, timing: { ...replaced.timing, startMs: asked.timing.startMs }, origin: 'patched', patchId: id },
    ...unused.map((x, i) => ({ ...x, seq: miss + 1 + i })),
  ]
  // Every body the new branch references (a WebSocket session's messages too), from whichever trace holds it.
  const bodies = new Map<string, Uint8Array>()
  for (const x of exchanges) {
    for (const [ref] of bodyRefs(x)) {
      const bytes = run.bodies.get(ref.digest) ?? branch.bodies.get(ref.digest)
      if (bytes) bodies.set(ref.digest, bytes)
    }
  }
  const lineage = branch.meta.lineage
  const app = branch.meta.app ?? run.meta.app
  return {
    meta: {
      name,
      format: 1,
      // The new branch is the original recording with the branch's patches and this one.
      lineage: {
        sourceDigest: lineage?.sourceDigest ?? traceDigest(branch),
        sourceName: lineage?.sourceName ?? branch.meta.name,
        patches: [...(lineage?.patches ?? []), { id, spec }],
      },
      ...(branch.meta.labels ? { labels: { ...branch.meta.labels } } : {}),
      ...(app ? { app: { command: app.command, ...(app.cwd !== undefined ? { cwd: app.cwd } : {}) } } : {}),
    },
    exchanges,
    bodies,
  }
}

function unaligned(run: Trace, branch: Trace, x: Exchange, why: string): ToolReplayError {
  return new ToolReplayError(
    ErrorCodes.INVALID_OPTION,
    `Cannot answer run "${run.meta.name}" #${x.seq} (${x.request.method} ${x.request.url}) from "${branch.meta.name}": ${why}. Rerun with a live tail instead.`,
  )
}
