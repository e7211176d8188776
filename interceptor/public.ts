/**
 * `tool-replay/interceptor`, the public entry: `install()` for fetch and node:http in this process, and the
 * record/replay dispatcher for `dispatcher:` use. The ready-made test setups are entries of their own
 * (`tool-replay/node-test`, `tool-replay/vitest`). The folder's door for sibling folders is `./index.ts`;
 * what is exported here is a decision, pinned by e2e/public-surface.test.ts.
 */

export type { InstallOptions, InterceptorSession, RecordReplayDispatcher, RecordReplayDispatcherOptions } from './index.ts'
export { createRecordReplayDispatcher, install } from './index.ts'
