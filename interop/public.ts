/**
 * `tool-replay/interop`, the public entry: a trace from a HAR file, HAR and MSW handlers from a trace. The
 * folder's door for sibling folders is `./index.ts`; what is exported here is a decision, pinned by
 * e2e/public-surface.test.ts.
 */

export type { Har, HarExportOptions, HarImport, HarImportOptions, HarLimits, MswExportOptions, SkippedHarEntry } from './index.ts'
export { formatHar, harFromTrace, mswHandlersFromTrace, traceFromHar } from './index.ts'
