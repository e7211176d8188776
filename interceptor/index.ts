/** The undici dispatcher that records and replays fetch, and the node:http capture. */

export { DispatcherShell } from './dispatcher-shell.ts'
/** Makes a dispatcher global for Node's built-in fetch and the undici package (returns the undo); whether that captures this realm's fetch. */
/** For the ready-made test setups (setup/): undici's global dispatcher for the undici package, and the loader of undici itself. */
export { globalFetchIsCapturable, installGlobalDispatcher, installUndiciGlobal } from './global-dispatcher.ts'
/** Options for `install()`; the session handle it returns. */
export type { InstallOptions, InterceptorSession } from './install.ts'
/** Opens a session and installs its dispatcher for every fetch in the process. */
export { install } from './install.ts'
/** After a strict replay's end-of-file judgement, every request of the file is refused (setup/node-test.ts). */
export { refuseLateRequests } from './late-requests.ts'
/** Whether this runtime's streams keep pushed chunks apart (Node 26), which decides in-process chunk pacing (internal). */
export { readableKeepsChunksApart } from './playback.ts'
/** Options for `createRecordReplayDispatcher`. */
export type { RecordReplayDispatcherOptions } from './record-replay-dispatcher.ts'
/** The record/replay Dispatcher class, and its factory for `dispatcher:` use without a global install. */
export { createRecordReplayDispatcher, RecordReplayDispatcher } from './record-replay-dispatcher.ts'
export { loadUndici } from './undici-loader.ts'
