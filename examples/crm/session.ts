/**
 * Record and replay helpers for the example scripts, on the interceptor library path.
 * `replayApp` replays strictly (no network at all) and, with `recordAs`, keeps what the app did as a
 * trace for `tr-proxy diff`.
 */
import { type Mode, openSession, type SessionSummary } from 'tool-replay/engine'
import { createRecordReplayDispatcher, installGlobalDispatcher } from 'tool-replay/interceptor'
import type { TraceStore } from 'tool-replay/store'
import type { Dispatcher } from 'undici'

/** Runs `fn` with every fetch in the process recorded or replayed against `trace`. */
export async function withInterceptor<T>(
  options: { mode: Mode; trace: string; store: TraceStore; recordAs?: string; upstream?: Dispatcher },
  fn: () => Promise<T>,
): Promise<{ result?: T; error?: unknown; summary: SessionSummary }> {
  // Built from the engine directly (not `install`) so replay can also record what happened (`recordAs`).
  const session = await openSession({
    mode: options.mode,
    trace: options.trace,
    store: options.store,
    labels: { recordedWith: 'interceptor' },
    ...(options.recordAs ? { recordAs: options.recordAs } : {}),
  })
  const dispatcher = createRecordReplayDispatcher({ session, ...(options.upstream ? { upstream: options.upstream } : {}) })
  const uninstall = installGlobalDispatcher(dispatcher)
  let out: { result?: T; error?: unknown }
  try {
    out = { result: await fn() }
  } catch (error) {
    out = { error }
  } finally {
    uninstall()
  }
  const summary = await session.close()
  await dispatcher.close()
  return { ...out, summary }
}
