/**
 * Record and replay helpers for the example scripts, on the interceptor library path.
 * `replayApp` replays strictly (no network at all) and, with `recordAs`, keeps what the app did as a
 * trace for `tr-proxy diff`.
 */
import type { Mode, SessionSummary } from 'tool-replay/engine'
import { install } from 'tool-replay/interceptor'
import type { TraceStore } from 'tool-replay/store'
import type { Dispatcher } from 'undici'

/** Runs `fn` with every fetch in the process recorded or replayed against `trace`. */
export async function withInterceptor<T>(
  options: { mode: Mode; trace: string; store: TraceStore; recordAs?: string; upstream?: Dispatcher },
  fn: () => Promise<T>,
): Promise<{ result?: T; error?: unknown; summary: SessionSummary }> {
  const tr = await install({
    mode: options.mode,
    trace: options.trace,
    store: options.store,
    ...(options.recordAs ? { recordAs: options.recordAs } : {}),
    ...(options.upstream ? { upstream: options.upstream } : {}),
  })
  let out: { result?: T; error?: unknown }
  try {
    out = { result: await fn() }
  } catch (error) {
    out = { error }
  }
  const summary = await tr.close()
  return { ...out, summary }
}
