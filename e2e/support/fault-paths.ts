/**
 * One faulted recording through either capture path, for tests that run the same client code both ways:
 * the interceptor (install() with `faults`, its dispatcher per request) or the proxy (a session with
 * faults behind `startProxy`, reached through undici's ProxyAgent). Either way the client is undici's real
 * fetch, and the trace comes back from the store when the run closes.
 */
import { install } from 'tool-replay/interceptor'
import { ProxyAgent, fetch as undiciFetch } from 'undici'
import { loadSessionFaults, openSession } from '../../engine/index.ts'
import { loadCertificateAuthority, startProxy } from '../../proxy/index.ts'
import { createMemoryStore } from '../../store/index.ts'
import type { Trace } from '../../trace/index.ts'
import { tempDir } from './proxy-harness.ts'

export type CapturePath = 'interceptor' | 'proxy'
export const CAPTURE_PATHS: readonly CapturePath[] = ['interceptor', 'proxy']

export interface FaultedRun {
  /** A fetch whose requests go through the capture path. */
  fetch: typeof globalThis.fetch
  /** Ends the run; resolves with the recorded trace. */
  close(): Promise<Trace>
}

/** Starts a faulted recording named `trace` through `path`; `faults` is a faults object ({ seed, rules, ... }). */
export async function faultedRun(path: CapturePath, trace: string, faults: Record<string, unknown>): Promise<FaultedRun> {
  const store = createMemoryStore()
  if (path === 'interceptor') {
    const tr = await install({ mode: 'record', trace, store, faults, global: false })
    return {
      fetch: ((url: string, init?: RequestInit) => undiciFetch(url, { ...(init as object), dispatcher: tr.dispatcher })) as unknown as typeof globalThis.fetch,
      close: async () => {
        await tr.close()
        return store.readTrace(trace)
      },
    }
  }
  const session = await openSession({ mode: 'record', trace, store, faults: await loadSessionFaults(faults) })
  const proxy = await startProxy({ session, ca: await loadCertificateAuthority(tempDir('tr-fault-paths-')) })
  const agent = new ProxyAgent(proxy.url)
  return {
    fetch: ((url: string, init?: RequestInit) => undiciFetch(url, { ...(init as object), dispatcher: agent })) as unknown as typeof globalThis.fetch,
    close: async () => {
      await agent.close()
      await proxy.close()
      return store.readTrace(trace)
    },
  }
}
