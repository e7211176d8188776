/**
 * Live store updates the page hears (server-sent events from /api/events), for the pages that follow them.
 * One stream serves every tab of this inspector: a browser opens at most six connections to one origin, and
 * each stream holds one for good, so with a stream per tab the seventh tab's API calls would wait forever.
 * The tab that holds the Web Lock opens the stream and passes what it hears to the others over a
 * BroadcastChannel; when it closes, the next tab takes the lock and opens the stream.
 */
import { eventsUrl } from './api.ts'

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

type Message = { type: 'runs'; runs: LiveRun[] } | { type: 'state'; connected: boolean } | { type: 'hello' }
const NAME = 'tool-replay-inspector-live'

/** Follows the live stream, shared by this inspector's tabs; `onState` hears whether it is connected. Returns the stop function. */
export function connectLive(onState: (connected: boolean) => void): () => void {
  const own = () => openStream(onState, () => {})
  if (typeof BroadcastChannel === 'undefined' || !navigator.locks) {
    const stream = own()
    return () => stream.close()
  }
  const channel = new BroadcastChannel(NAME)
  let leader: { close: () => void; last: () => Message | undefined } | undefined
  channel.onmessage = (e: MessageEvent<Message>) => {
    const m = e.data
    if (m.type === 'hello') {
      const last = leader?.last()
      if (last) channel.postMessage(last)
    } else if (m.type === 'runs') {
      onState(true)
      publishLive(m.runs)
    } else onState(m.connected)
  }
  const stop = new AbortController()
  let release = () => {}
  navigator.locks
    .request(NAME, { signal: stop.signal }, () => {
      leader = openStream(onState, (m) => channel.postMessage(m))
      // Held until this tab goes: then the next tab's request is granted and it opens the stream.
      return new Promise<void>((resolve) => (release = resolve))
    })
    .catch(() => {})
  // A tab that follows asks the one that leads for what it last heard.
  channel.postMessage({ type: 'hello' } satisfies Message)
  return () => {
    stop.abort()
    leader?.close()
    release()
    channel.close()
  }
}

function openStream(onState: (connected: boolean) => void, share: (m: Message) => void): { close: () => void; last: () => Message | undefined } {
  let last: Message | undefined
  const es = new EventSource(eventsUrl('/api/events'))
  es.addEventListener('runs', (e) => {
    const runs = JSON.parse((e as MessageEvent).data) as LiveRun[]
    last = { type: 'runs', runs }
    onState(true)
    publishLive(runs)
    share(last)
  })
  es.onerror = () => {
    last = { type: 'state', connected: false }
    onState(false)
    share(last)
  }
  return { close: () => es.close(), last: () => last }
}
