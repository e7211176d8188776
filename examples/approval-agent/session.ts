/**
 * The interceptor wiring record.ts and run.ts share (the library path: in-process, every fetch of this
 * process, the openai SDK's included, is recorded or replayed).
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
