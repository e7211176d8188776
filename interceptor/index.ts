/** The undici dispatcher that records and replays fetch, the node:http capture, and the test-setup entry points. */

/** Makes a dispatcher global for Node's built-in fetch and the undici package (returns the undo); whether that captures this realm's fetch. */
export { globalFetchIsCapturable, installGlobalDispatcher } from './global-dispatcher.ts'
/** Options for `install()`; the session handle it returns. */
export type { InstallOptions, InterceptorSession } from './install.ts'
/** Opens a session and installs its dispatcher for every fetch in the process. */
export { install } from './install.ts'
/** Whether this runtime's streams keep pushed chunks apart (Node 26), which decides in-process chunk pacing (internal). */
export { readableKeepsChunksApart } from './playback.ts'
/** Options for `createRecordReplayDispatcher`. */
export type { RecordReplayDispatcherOptions } from './record-replay-dispatcher.ts'
/** The record/replay Dispatcher class, and its factory for `dispatcher:` use without a global install. */
export { createRecordReplayDispatcher, RecordReplayDispatcher } from './record-replay-dispatcher.ts'
/** Options shared by the ready-made node:test and vitest setups. */
export type { TestSetupOptions } from './test-setup-options.ts'
