/** Live store updates the page hears (server-sent events from /api/events), for the pages that follow them. */

/** A run as the live stream lists it. */
export type LiveRun = { name: string; id: string; status: string; exchanges: number }
const listeners = new Set<(runs: LiveRun[]) => void>()

/** Subscribes to live updates; returns the unsubscribe function. */
export function onLive(fn: (runs: LiveRun[]) => void): () => void {
  listeners.add(fn)
  return () => listeners.delete(fn)
}

/** Hands an update to every subscriber. */
export function publishLive(runs: LiveRun[]): void {
  for (const l of listeners) l(runs)
}
