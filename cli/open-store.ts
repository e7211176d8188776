import { resolve } from 'node:path'
import { openStore, type TraceStore } from '../store/index.ts'

/** Any parsed arguments that may carry --store. */
export type StoreArgs = { store?: unknown; [key: string]: unknown }

/** The store directory from --store, $TOOL_REPLAY_STORE, or the default under the working directory. */
export function storeDir(args: StoreArgs): string {
  const given = typeof args.store === 'string' && args.store !== '' ? args.store : process.env.TOOL_REPLAY_STORE
  return resolve(given || '.tool-replay/store')
}

/** Opens the store for one command and always closes it. */
export async function withStore<T>(args: StoreArgs, fn: (store: TraceStore) => Promise<T>): Promise<T> {
  const store = await openStore(storeDir(args))
  try {
    return await fn(store)
  } finally {
    await store.close()
  }
}
