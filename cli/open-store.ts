import { resolve } from 'node:path'
import { openStore, type TraceStore } from '../store/index.ts'

/** Any parsed arguments that may carry --store. */
export type StoreArgs = { store?: unknown; [key: string]: unknown }

/** The store directory from --store, $TOOL_REPLAY_STORE, or the default under the working directory. */
export function storeDir(args: StoreArgs): string {
  const given = typeof args.store === 'string' && args.store !== '' ? args.store : process.env.TOOL_REPLAY_STORE
  return resolve(given || '.tool-replay/store')
}

/**
 * Opens the store for one command and always closes it. Commands that only read (or change what exists)
 * pass `create: false`: they never create a store directory, and a missing store is TR_STORE_NOT_FOUND.
 */
export async function withStore<T>(args: StoreArgs, fn: (store: TraceStore) => Promise<T>, options: { create?: boolean; readOnly?: boolean } = {}): Promise<T> {
  const store = await openStore(storeDir(args), { create: options.create !== false, readOnly: options.readOnly === true })
  try {
    return await fn(store)
  } finally {
    await store.close()
  }
}

/** withStore for commands that change what exists but must not create a store (rm, fork). */
export function withExistingStore<T>(args: StoreArgs, fn: (store: TraceStore) => Promise<T>): Promise<T> {
  return withStore(args, fn, { create: false })
}

/**
 * withStore for commands that only read (ls, show, export, export-har, export-msw, diff, check, emit-test, scan,
 * fsck): the store is opened read-only, so not a file in its directory is created, renamed, changed or deleted.
 */
export function withReadOnlyStore<T>(args: StoreArgs, fn: (store: TraceStore) => Promise<T>): Promise<T> {
  return withStore(args, fn, { create: false, readOnly: true })
}
